"""``import mxnet as mx`` for MXNet 1.9.1's unit tests, answered by aotexec (see README.md)."""
from __future__ import annotations

import sys

import numpy as _numpy

import aotexec as _ax
from aotexec import AttrScope, Context, cpu, current_context, gpu  # noqa: F401
from aotexec.util import is_np_shape, np_shape, set_np_shape, use_np_shape  # noqa: F401

from . import _harness
from ._harness import PartialModule, UnsupportedAttr, UnsupportedModule

_harness.install()

from . import base, context, util, attribute, name  # noqa: E402,F401
from .base import MXNetError  # noqa: E402,F401
from . import ndarray, symbol, random, operator  # noqa: E402,F401

nd = ndarray
sym = symbol
__version__ = "1.9.1"

# parts of MXNet aotexec does not have: any use is reported as unsupported
for _missing in ("autograd", "gluon", "kv", "kvstore",
                 "optimizer", "contrib", "image", "recordio", "profiler", "engine", "np", "npx",
                 "numpy", "numpy_extension", "library", "runtime", "visualization", "viz", "model",
                 "callback", "lr_scheduler", "monitor", "executor_manager", "amp", "onnx", "subgraph"):
    globals()[_missing] = UnsupportedModule(f"mx.{_missing}")

# parts aotexec has: its names, the rest unsupported
for _name, _source in (("rnn", _ax.rnn), ("io", _ax.io), ("mod", _ax.module), ("module", _ax.module),
                       ("init", _ax.initializer), ("initializer", _ax.initializer),
                       ("metric", _ax.metric)):
    globals()[_name] = PartialModule(f"mx.{_name}", _source)

from . import test_utils  # noqa: E402,F401  (mx.test_utils.check_consistency is used unimported)

# numpy 2 dropped these aliases; MXNet 1.9.1's tests still use them
for _alias, _tp in (("bool", bool), ("int", int), ("float", float), ("object", object), ("str", str)):
    if _alias not in _numpy.__dict__:
        setattr(_numpy, _alias, _tp)
sys.modules.setdefault("mxnet.nd", ndarray)
sys.modules.setdefault("mxnet.sym", symbol)


def __getattr__(attr: str):
    raise UnsupportedAttr(f"mx.{attr}")
