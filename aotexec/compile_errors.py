"""IREE's diagnostics as aotexec's ``CompileError``: each line rewritten to name the graph
node (``loc("...")``) or the MLIR source line it points at, errors first, the first few kept
in the message and every line kept on the error (the fallbacks read the notes)."""
from __future__ import annotations

import re

from aotexec.base import AotexecError

_MAX_DIAG_LINES = 12
_MAX_LINE_CHARS = 400


class CompileError(AotexecError):
    """IREE rejected a module. ``nodes`` names the graph nodes its diagnostics point at."""

    def __init__(self, message: str, *, target: str, nodes: list[str], diagnostics: list[str],
                 lines: list[str] | None = None):
        super().__init__(message)
        self.target = target
        self.nodes = nodes
        self.diagnostics = diagnostics      # the first few lines, errors first
        self.lines = diagnostics if lines is None else lines    # every line (notes name the ops)


class CompileTimeout(CompileError):
    """A compile stopped at its time limit: an outcome of the machine's load as much as of the
    module (the fallbacks neither give up on a form nor remember what they compiled instead)."""


_FILE_LOC = re.compile(r'^(?:"-"|<stdin>|<unknown>|source\.mlir|[\w./-]+\.mlir):(\d+):(\d+):\s*')
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"(?!:\d)')


def _match_paren(s: str, start: int) -> int:
    """Index just past the ')' closing the '(' at s[start-1]; len(s) if unbalanced."""
    depth, i, in_str = 1, start, False
    while i < len(s):
        c = s[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(s)


def _rewrite_line(line: str, severity: str, source_lines: list[str], nodes: list[str]) -> str:
    """'<sev>: [node 'a', 'b'] msg' for loc("a") prefixes; 'line L:C' + source for file locs."""
    line = line.strip()
    line = re.sub(r"^<unknown>:0:\s*", "", line)
    m = re.match(r"^(error|warning|note|remark):\s*", line)
    if m:
        severity, line = m.group(1), line[m.end():]
    where = ""
    fm = _FILE_LOC.match(line)
    if fm:
        lineno = int(fm.group(1))
        line = line[fm.end():]
        m = re.match(r"^(error|warning|note|remark):\s*", line)
        if m:
            severity, line = m.group(1), line[m.end():]
        src = source_lines[lineno - 1].strip() if 0 < lineno <= len(source_lines) else ""
        where = f"[line {lineno}: `{src[:160]}`] " if src else f"[line {lineno}] "
        for n in re.findall(r'loc\("((?:[^"\\]|\\.)+)"\)', src):  # the node the line belongs to
            if n not in nodes:
                nodes.append(n)
    elif line.startswith("loc("):
        end = _match_paren(line, 4)
        inner = line[4:end - 1]
        fl = re.fullmatch(r'"[^"]*":(\d+):\d+', inner)  # the Python binding's file loc form
        if fl:
            return _rewrite_line(f"<stdin>:{fl.group(1)}:0: {line[end:].lstrip(': ')}", severity, source_lines, nodes)
        names = [n for n in _QUOTED.findall(inner) if n]
        for n in names:
            if n not in nodes:
                nodes.append(n)
        line = line[end:].lstrip(": ")
        if names:
            where = "[node " + ", ".join(repr(n) for n in names) + "] "
    out = f"{severity}: {where}{line}"
    return out if len(out) <= _MAX_LINE_CHARS else out[: _MAX_LINE_CHARS - 3] + "..."


def format_failure(
    what: str, raw: list[tuple[str, str]], mlir_text: str, target: str
) -> CompileError:
    """Build the error from (severity, text) diagnostics; keeps the first few lines."""
    source_lines = mlir_text.splitlines()
    nodes: list[str] = []
    lines: list[str] = []
    for severity, text in raw:
        for chunk in re.split(r"\n\s*\n", text.strip()):
            first = chunk.strip().splitlines()[0] if chunk.strip() else ""
            if first:
                lines.append(_rewrite_line(first, severity, source_lines, nodes))
                severity = "note"  # later chunks of one callback message are its notes
    # Errors first: they carry the cause; notes/warnings follow while room remains.
    ordered = [l for l in lines if l.startswith("error")] + [l for l in lines if not l.startswith("error")]
    shown = ordered[:_MAX_DIAG_LINES]
    msg = what
    if nodes:
        msg += f" (graph node{'s' if len(nodes) > 1 else ''}: {', '.join(nodes)})"
    if shown:
        msg += ":\n  " + "\n  ".join(shown)
        if len(ordered) > len(shown):
            msg += f"\n  ... {len(ordered) - len(shown)} more diagnostic lines"
    else:
        msg += " (the compiler gave no diagnostics)"
    if "missing GPU target" in msg:
        msg += "\n  hint: IREE 3.13 has no target entry for this arch; use cuda_arch='sm_80' (PTX runs on newer GPUs)"
    return CompileError(msg, target=target, nodes=nodes, diagnostics=shown, lines=ordered)


def subprocess_diags(stderr: str) -> list[tuple[str, str]]:
    """iree-compile's stderr: keep diagnostic lines, drop the echoed source and carets."""
    out = []
    for line in stderr.splitlines():
        m = re.search(r"\b(error|warning|note|remark):", line)
        if m and (line.startswith("<") or line.startswith("loc(") or _FILE_LOC.match(line) or m.start() == 0):
            out.append((m.group(1), line))
        elif line.startswith("Error parsing flags") or "Unknown command line argument" in line:
            out.append(("error", line))
    if not out and stderr.strip():
        out = [("error", l) for l in stderr.strip().splitlines()[:_MAX_DIAG_LINES]]
    return out
