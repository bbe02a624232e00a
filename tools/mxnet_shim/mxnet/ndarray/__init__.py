"""mx.nd / mx.ndarray: aotexec's NDArray with numpy arithmetic (a harness convenience), and
imperative operators run as one-node aotexec executors (each counts against the budget)."""
from __future__ import annotations

import numpy as _np

import aotexec as ax
from aotexec.nd import load, load_frombuffer, save, waitall  # noqa: F401
from aotexec.runtime.ndarray import NDArray

from .. import _harness
from . import random  # noqa: F401
from ._arith import install as _install_arith
from ._imperative import run_op

_install_arith()
ndarray = NDArray  # mx.nd.ndarray.NDArray
for _sub in ("sparse", "numpy", "np", "npx"):
    globals()[_sub] = _harness.UnsupportedModule(f"mx.nd.{_sub}")
contrib = _harness.ContribModule("mx.nd.contrib", lambda op: lambda *a, **kw: run_op(op, a, kw))
linalg = _harness.ContribModule("mx.nd.linalg", lambda op: lambda *a, **kw: run_op(op, a, kw), prefix="_linalg_")
image = _harness.ContribModule("mx.nd.image", lambda op: lambda *a, **kw: run_op(op, a, kw), prefix="_image_")


def _dtype(dtype, default="float32"):
    return _np.dtype(default if dtype is None else dtype)


def array(source_array, ctx=None, dtype=None) -> NDArray:
    """MXNet: the dtype is the source's for an NDArray, float32 otherwise."""
    if dtype is None:
        dtype = source_array.dtype if isinstance(source_array, NDArray) else "float32"
    return ax.nd.array(_np.asarray(source_array), ctx=ctx, dtype=_dtype(dtype))


def zeros(shape, ctx=None, dtype=None, stype=None, **kwargs) -> NDArray:
    _dense(stype)
    return ax.nd.zeros(shape, ctx=ctx, dtype=_dtype(dtype))


def ones(shape, ctx=None, dtype=None, **kwargs) -> NDArray:
    return ax.nd.ones(shape, ctx=ctx, dtype=_dtype(dtype))


def empty(shape, ctx=None, dtype=None, stype=None) -> NDArray:
    _dense(stype)
    return ax.nd.zeros(shape, ctx=ctx, dtype=_dtype(dtype))


def full(shape, val, ctx=None, dtype=None, out=None) -> NDArray:
    return ax.nd.full(shape, val, ctx=ctx, dtype=_dtype(dtype))


def arange(start, stop=None, step=1.0, repeat=1, infer_range=None, ctx=None, dtype=None) -> NDArray:
    # aotexec's _arange: MXNet's values in integer dtypes (numpy's too), not a cast of floats
    dtype = _np.dtype(dtype or "float32").name
    return run_op("arange", (), dict(start=start, stop=stop, step=step, repeat=repeat, dtype=dtype))


def zeros_like(data, **kwargs) -> NDArray:
    return ax.nd.zeros(data.shape, ctx=data.context, dtype=data.dtype)


def ones_like(data, **kwargs) -> NDArray:
    return ax.nd.ones(data.shape, ctx=data.context, dtype=data.dtype)


def _numpy_function(fn):
    """MXNet's NDArray functions with numpy broadcasting (mx.nd.add, mx.nd.maximum...)."""
    def call(lhs, rhs, out=None):
        like = lhs if isinstance(lhs, NDArray) else rhs
        a, b = (v.asnumpy() if isinstance(v, NDArray) else v for v in (lhs, rhs))
        value = _np.asarray(fn(a, b))
        if not isinstance(like, NDArray):
            return value
        result = ax.nd.array(value.astype(like.dtype), ctx=like.context)
        if out is not None:
            out[:] = result
            return out
        return result
    return call


for _name, _fn in (("add", _np.add), ("subtract", _np.subtract), ("multiply", _np.multiply), ("divide", _np.divide),
                   ("true_divide", _np.divide), ("modulo", _np.mod), ("power", _np.power), ("maximum", _np.maximum),
                   ("minimum", _np.minimum), ("hypot", _np.hypot), ("equal", _np.equal), ("not_equal", _np.not_equal),
                   ("greater", _np.greater), ("greater_equal", _np.greater_equal), ("lesser", _np.less),
                   ("lesser_equal", _np.less_equal), ("logical_and", _np.logical_and), ("logical_or", _np.logical_or),
                   ("logical_xor", _np.logical_xor)):
    globals()[_name] = _numpy_function(_fn)


def _dense(stype) -> None:
    if stype not in (None, "default"):
        raise _harness.Unsupported(f"storage type {stype}")


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return lambda *args, **kwargs: run_op(name, args, kwargs)
