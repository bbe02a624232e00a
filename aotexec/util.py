"""Small shared helpers: numpy-shape semantics switch (``mx.np_shape``)."""
from __future__ import annotations

import contextlib
import threading

_state = threading.local()


def is_np_shape() -> bool:
    return getattr(_state, "np_shape", False)


def set_np_shape(active: bool) -> bool:
    prev = is_np_shape()
    _state.np_shape = bool(active)
    return prev


@contextlib.contextmanager
def np_shape(active: bool = True):
    """Inside, unknown dims are -1 / shapes None (numpy style) instead of MXNet's legacy 0 / ()."""
    prev = set_np_shape(active)
    try:
        yield
    finally:
        set_np_shape(prev)


def use_np_shape(func):
    import functools

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with np_shape(True):
            return func(*args, **kwargs)
    return wrapper


def shape_from_user(shape) -> tuple | None:
    """A user's shape in internal form (unknown dim -1, unknown shape None)."""
    if shape is None:
        return None
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if is_np_shape():
        return tuple(-1 if d is None or d < 0 else int(d) for d in shape)
    if len(shape) == 0:
        return None
    return tuple(-1 if d is None or d <= 0 else int(d) for d in shape)


def shape_to_user(shape: tuple | None):
    if is_np_shape():
        return shape
    if shape is None:
        return ()
    return tuple(0 if d < 0 else d for d in shape)
