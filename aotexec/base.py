"""aotexec's error type, and the one check that tells a runtime-only install from a full one."""
from __future__ import annotations

import importlib.util

COMPILER_HINT = "pip install 'aotexec[compiler]'"


class AotexecError(RuntimeError): ...


MXNetError = AotexecError


class NotImplementedForSymbol(AotexecError): ...


class OutOfBoundsIndex(AotexecError, IndexError):
    """An index outside its axis (MXNet 1.9.1 raises IndexError there, e.g. gather_nd)."""


def compiler_missing() -> str | None:
    """Why the IREE compiler cannot be imported (None when it can), without importing it."""
    try:
        if importlib.util.find_spec("iree.compiler") is None:
            return "No module named 'iree.compiler'"
    except (ImportError, ValueError) as e:
        return str(e) or type(e).__name__
    return None


def require_compiler(what: str) -> None:
    """Fail up front, in one line, where ``what`` would otherwise reach the compiler's import
    deep inside a call (a runtime-only install has numpy and iree-base-runtime only)."""
    why = compiler_missing()
    if why:
        raise AotexecError(f"{what} needs the IREE compiler, which is not installed ({why}): install "
                           f"aotexec[compiler] ({COMPILER_HINT}); a runtime-only install loads and runs "
                           "compiled artifacts (ax.load(path).simple_bind(...))")
