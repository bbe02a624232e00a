"""NDArray: an MXNet-style n-d array living in an IREE device buffer.

Data lives in `handle` (an rt.HalBufferView), which the executor passes straight to
`LoadedModule.invoke`. All operations are synchronous, so `waitall()` has nothing to
wait for. Differences from MXNet, on purpose:
- `x[key]` returns a new NDArray holding a *copy* (MXNet returns views for basic
  slices on axis 0); `x[key] = v` does write into x's own buffer.
- No arithmetic operators: computation goes through compiled symbols.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import iree.runtime as rt

from ..base import AotexecError
from .context import Context, current_context
from .device import Device
from .dtypes import normalize_dtype

def _is_full_key(key: Any) -> bool:
    """True for `[:]`, `[...]`, `[()]`: keys that overwrite the whole array."""
    if isinstance(key, tuple):
        if not key:
            return True
        if len(key) != 1:
            return False
        key = key[0]
    return key is Ellipsis or (isinstance(key, slice) and key == slice(None))


def _norm_shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


class Storage:
    """The buffer behind an array and its views, with a count of the writes to it: an
    inference program holding parameters resident (``Executor._resident_module``) re-reads them
    when the count moved."""
    __slots__ = ("version", "error")

    def __init__(self) -> None:
        self.version = 0
        self.error: Exception | None = None     # an op's failure, raised when the content is read (MXNet's engine)

    def written(self) -> None:
        self.version += 1
        self.error = None


class NDArray:
    __slots__ = ("handle", "_shape", "_dtype", "_ctx", "_storage", "__weakref__")

    def __init__(self, handle: rt.HalBufferView, shape: Sequence[int], dtype, ctx: Context,
                 storage: Storage | None = None):
        """``storage``: the array this one views (same buffer), so writes to either count for both."""
        self.handle = handle
        self._shape = tuple(int(d) for d in shape)
        self._dtype = normalize_dtype(dtype)
        self._ctx = ctx
        self._storage = storage or Storage()

    def view(self, shape: Sequence[int]) -> "NDArray":
        """An array of ``shape`` over the start of this one's buffer (no copy)."""
        shape = tuple(int(d) for d in shape)
        return NDArray(Device.get(self._ctx).view(self.handle, shape, self._dtype), shape, self._dtype, self._ctx,
                       self._storage)

    @classmethod
    def _from_view(cls, view: rt.HalBufferView, shape: Sequence[int], dtype,
                   ctx: Context) -> "NDArray":
        """Wrap an existing buffer view, e.g. an executor result (no copy)."""
        return cls(view, shape, dtype, ctx)

    # -- properties ----------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> type:
        """The numpy scalar type (np.float32), as MXNet returns."""
        return self._dtype.type

    @property
    def context(self) -> Context:
        return self._ctx

    ctx = context

    @property
    def size(self) -> int:
        return math.prod(self._shape)

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def device(self) -> Device:
        return Device.get(self._ctx)

    # -- host transfer -------------------------------------------------------------------
    def asnumpy(self) -> np.ndarray:
        """A numpy copy of the content."""
        self.wait_to_read()
        return Device.get(self._ctx).download(self.handle, self._shape, self._dtype)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if copy is False:
            raise ValueError("NDArray cannot be viewed by numpy without a copy")
        a = self.asnumpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def asscalar(self):
        if self.size != 1:
            raise ValueError("The current array is not a scalar")
        return self.asnumpy().reshape(())[()]

    def wait_to_read(self) -> None:
        """Every operation is synchronous; an op that failed computing this array raises here, as
        MXNet's engine does (``take(mode='raise')``)."""
        if self._storage.error:
            raise self._storage.error

    # -- writes ----------------------------------------------------------------------------
    def __setitem__(self, key: Any, value: Any) -> None:
        dev = Device.get(self._ctx)
        self._storage.written()
        if _is_full_key(key):
            if (isinstance(value, NDArray) and value._shape == self._shape
                    and value._dtype == self._dtype and value._ctx == self._ctx):
                if value.handle is not self.handle:
                    dev.copy(value.handle, self.handle)
                return
            src = value.asnumpy() if isinstance(value, NDArray) else np.asarray(value)
            arr = np.broadcast_to(src.astype(self._dtype, copy=False), self._shape)
        else:
            # Partial writes: read-modify-write of the whole buffer.
            arr = self.asnumpy()
            arr[key] = value.asnumpy() if isinstance(value, NDArray) else value
        dev.write(self.handle, arr)

    def __getitem__(self, key: Any) -> "NDArray":
        """A new NDArray holding a copy of `self.asnumpy()[key]` (see module doc)."""
        out = self.asnumpy()[key.asnumpy() if isinstance(key, NDArray) else key]
        if out.ndim == 0:
            out = out.reshape(1)  # MXNet 1.x: integer index of a 1-d array gives shape (1,)
        return array(out, ctx=self._ctx, dtype=self._dtype)

    # -- copies and views ----------------------------------------------------------------
    def copyto(self, other: "NDArray | Context") -> "NDArray":
        if isinstance(other, Context):
            out = empty(self._shape, ctx=other, dtype=self._dtype)
        elif isinstance(other, NDArray):
            if other._shape != self._shape:
                raise AotexecError(f"copyto: shape mismatch {self._shape} vs {other._shape}")
            out = other
        else:
            raise AotexecError(f"copyto expects an NDArray or a Context, got {type(other)}")
        out[:] = self
        out._storage.error = self._storage.error      # a failed op's error travels with its copies (MXNet's engine)
        return out

    def copy(self) -> "NDArray":
        return self.copyto(self._ctx)

    def as_in_context(self, ctx: Context) -> "NDArray":
        return self if ctx == self._ctx else self.copyto(ctx)

    def reshape(self, *shape: Any, **kwargs: Any) -> "NDArray":
        """A view sharing this array's buffer. MXNet codes: 0 keeps a dim, -1 infers one."""
        if "shape" in kwargs:
            shape = kwargs.pop("shape")
        elif len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        if kwargs:
            raise TypeError(f"unexpected reshape arguments {sorted(kwargs)}")
        new = [self._shape[i] if d == 0 else int(d) for i, d in enumerate(shape)]
        if new.count(-1) > 1:
            raise AotexecError(f"reshape: more than one -1 in {tuple(shape)}")
        if -1 in new:
            known = math.prod(d for d in new if d != -1)
            new[new.index(-1)] = self.size // known if known else 0
        if math.prod(new) != self.size:
            raise AotexecError(f"cannot reshape array of shape {self._shape} into {tuple(shape)}")
        return self.view(new)

    def astype(self, dtype, copy: bool = True) -> "NDArray":
        dt = normalize_dtype(dtype)
        if dt == self._dtype and not copy:
            return self
        return array(self.asnumpy().astype(dt), ctx=self._ctx, dtype=dt)

    # -- python protocol -----------------------------------------------------------------
    def __len__(self) -> int:
        if not self._shape:
            raise TypeError("len() of a 0-d NDArray")
        return self._shape[0]

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self._shape)
        return f"\n{self.asnumpy()}\n<{type(self).__name__} {shape} @{self._ctx}>"

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")
        return bool(self.asscalar())


# -- creation --------------------------------------------------------------------------------
def array(source: Any, ctx: Context | None = None, dtype=None) -> NDArray:
    """A new array copying `source` (numpy, NDArray, list, scalar).

    dtype defaults to source's dtype for numpy arrays and NDArrays, else float32 (MXNet).
    """
    ctx = current_context() if ctx is None else ctx
    if isinstance(source, NDArray):
        src = source.asnumpy()
    elif isinstance(source, np.ndarray):
        src = source
    else:
        src = np.asarray(source, dtype=np.float32 if dtype is None else dtype)
    dt = normalize_dtype(src.dtype if dtype is None else dtype)
    src = np.asarray(src, dtype=dt)
    return NDArray(Device.get(ctx).upload(src), src.shape, dt, ctx)


def full(shape: int | Sequence[int], val, ctx: Context | None = None,
         dtype="float32") -> NDArray:
    ctx = current_context() if ctx is None else ctx
    shape = _norm_shape(shape)
    dt = normalize_dtype(dtype)
    return NDArray(Device.get(ctx).allocate(shape, dt, fill=val), shape, dt, ctx)


def zeros(shape: int | Sequence[int], ctx: Context | None = None, dtype="float32") -> NDArray:
    return full(shape, 0, ctx, dtype)


def ones(shape: int | Sequence[int], ctx: Context | None = None, dtype="float32") -> NDArray:
    return full(shape, 1, ctx, dtype)


def empty(shape: int | Sequence[int], ctx: Context | None = None, dtype="float32") -> NDArray:
    """Uninitialized content (whatever the allocator hands out)."""
    return full(shape, None, ctx, dtype)


def waitall() -> None:
    """No-op: all transfers and invocations complete before they return."""
