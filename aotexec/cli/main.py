"""``aotexec compile | inspect | run | bench | export-run-cmd``: build, examine, execute and time
artifacts, and print the command that runs one with IREE's tools alone.

Bad input exits with code 2 and a one-line ``Error: ...`` on stderr; ``--help`` works on
every command.  Standard library only (argparse): ``inspect``, ``run`` and ``bench`` on
artifacts need nothing beyond the runtime install.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from .build import add_compile, add_inspect
from .common import CliError
from .execute import add_bench, add_run
from .export import add_export


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):   # argparse's usage errors: one line and exit 2, like ours
        raise CliError(f"{message} (see {self.prog} --help)")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="aotexec", description="Ahead-of-time compile MXNet symbol graphs with IREE, and run "
                                            "the artifacts.")
    sub = p.add_subparsers(dest="command", metavar="{compile,inspect,run,bench,export-run-cmd}")
    for add in (add_compile, add_inspect, add_run, add_bench, add_export):
        add(sub)
    return p


def _log_progress() -> None:
    """Long compiles report their progress (aotexec.compiler's INFO records) on stderr."""
    log = logging.getLogger("aotexec.compiler")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("  %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def _one_line(e: BaseException) -> str:
    """The message's first line; a first line that introduces a list (a compile failure's
    diagnostics) brings its first entry along."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    if not lines:
        return type(e).__name__
    return f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 for bad input and failed checks)."""
    p = parser()
    try:
        args = p.parse_args(argv)
        if args.command is None:
            p.print_help(sys.stderr)
            return 2
        _log_progress()
        args.func(args)
        return 0
    except SystemExit as e:          # --help
        return e.code if isinstance(e.code, int) else 0
    except CliError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, ValueError, TypeError, OSError, KeyError) as e:
        # AotexecError and the builtins MXNet's API raises: one line, no traceback; anything
        # else that escapes the library's checks keeps its type name, to be reported
        from aotexec.base import AotexecError
        kind = "" if isinstance(e, (AotexecError, ValueError, TypeError, OSError)) else f"{type(e).__name__}: "
        print(f"Error: {kind}{_one_line(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
