"""Run the ``aotexec`` command line in-process, as a user's shell would, capturing its output."""
from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass

from aotexec.cli.main import main


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def invoke(args: list[str]) -> Result:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return Result(code, out.getvalue(), err.getvalue())
