"""The `ax.nd` namespace: NDArray, its creation functions and MXNet's NDArray files (MXNet's `mx.nd`)."""
from __future__ import annotations

from .base import AotexecError
from .runtime import ndarray as _nd
from .runtime.ndarray import NDArray, array, waitall
from .runtime.ndarray_file import load, load_frombuffer, save
from .util import is_np_shape

__all__ = ["NDArray", "array", "empty", "full", "load", "load_frombuffer", "ones", "save", "waitall", "zeros"]


def _known_shape(shape) -> None:
    """MXNet's legacy shape semantics: () and 0 dims mean unknown, so no array has them
    (inside ``ax.np_shape()`` they are a scalar and zero-size dims)."""
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if not is_np_shape() and (not dims or 0 in dims):
        raise AotexecError(f"Check failed: shape_is_known(shape): cannot create an array of shape {dims}: outside "
                           "numpy shape semantics () and 0 dims mean unknown; use ax.np_shape() for a scalar or "
                           "a zero-size array")


def full(shape, val, ctx=None, dtype="float32") -> NDArray:
    _known_shape(shape)
    return _nd.full(shape, val, ctx, dtype)


def zeros(shape, ctx=None, dtype="float32") -> NDArray:
    _known_shape(shape)
    return _nd.zeros(shape, ctx, dtype)


def ones(shape, ctx=None, dtype="float32") -> NDArray:
    _known_shape(shape)
    return _nd.ones(shape, ctx, dtype)


def empty(shape, ctx=None, dtype="float32") -> NDArray:
    _known_shape(shape)
    return _nd.empty(shape, ctx, dtype)
