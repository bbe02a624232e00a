"""mx.sym / mx.symbol: aotexec.sym, with MXNet's sub-namespaces."""
from __future__ import annotations

import aotexec.symbol as _ax_sym
from aotexec.symbol import *  # noqa: F401,F403
from aotexec.symbol import Group, Symbol, Variable, load, load_json, var  # noqa: F401

from .._harness import ContribModule, MissingOp, UnsupportedModule
from . import _internal  # noqa: F401

op = _internal
random = _ax_sym.random
for _sub in ("sparse", "numpy", "np", "npx", "numpy_extension"):
    globals()[_sub] = UnsupportedModule(f"mx.sym.{_sub}")
contrib = ContribModule("mx.sym.contrib", lambda op: getattr(_ax_sym, op))
linalg = ContribModule("mx.sym.linalg", lambda op: getattr(_ax_sym, op), prefix="_linalg_")
image = ContribModule("mx.sym.image", lambda op: getattr(_ax_sym, op), prefix="_image_")


def __getattr__(name: str):
    try:
        return getattr(_ax_sym, name)
    except AttributeError:
        raise MissingOp("mxnet.symbol", name) from None
