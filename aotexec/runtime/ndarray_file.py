"""MXNet's NDArray file format (``mx.nd.save`` / ``mx.nd.load``, checkpoint ``*.params``), read
and written without MXNet: src/ndarray/ndarray.cc (``NDArray::Save`` / ``Load``) of MXNet 1.9.1.

Layout, little-endian::

    u64 0x112 (kMXAPINDArrayListMagic)    u64 reserved (0)
    u64 n, then n arrays:
        u32 magic        0xF993fac9 (V2) | 0xF993faca (V3: saved under numpy shape semantics)
        i32 storage      0 dense (1 row_sparse and 2 csr are refused: aotexec arrays are dense)
        i32 ndim, i64 dims[ndim]          V2 ndim 0: a "none" array, nothing follows
        i32 dev_type, i32 dev_id          context it was saved from (1 cpu, 2 gpu, 3/5 cpu pinned/shared)
        i32 type flag    mshadow's: 0 float32, 1 float64, 2 float16, 3 uint8, 4 int32, 5 int8, 6 int64, 7 bool
        data             C order
    u64 m (0: a list; m == n: a dict), then m names: u64 length + UTF-8 bytes

Older arrays have no storage field: V1 (magic 0xF993fac8) has i32 ndim + i64 dims; before it
the magic *is* ndim and u32 dims follow.  Every size the file declares is checked against the
bytes left before anything is allocated, so a damaged file is one ``AotexecError`` naming the
file and the byte offset, never a huge allocation or a numpy error.
"""
from __future__ import annotations

import math
import os
import struct
from typing import Any, BinaryIO, Sequence

import numpy as np

from ..base import AotexecError
from ..util import is_np_shape
from .context import Context, current_context
from .ndarray import NDArray, array

LIST_MAGIC = 0x112
V1_MAGIC, V2_MAGIC, V3_MAGIC = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
FLAG_DTYPES = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8", 6: "int64",
               7: "bool", 8: "int16", 9: "uint16", 10: "uint32", 11: "uint64"}
DTYPE_FLAGS = {np.dtype(v): k for k, v in FLAG_DTYPES.items()}
# MXNet 1.9's Python layer maps flags 0-7 only (int16 and up came with 2.0): aotexec writes no others
WRITABLE = sorted((np.dtype(FLAG_DTYPES[k]) for k in range(8)), key=DTYPE_FLAGS.get)
_SPARSE = {1: "row_sparse", 2: "csr"}
_DEVICE_TYPES = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
_MAX_LEGACY_NDIM = 32   # a pre-V1 array starts with its ndim; a bigger first word is an unknown magic


# ------------------------------------------------------------------ reading
class _Reader:
    """A cursor over the file's bytes; every read checks that the bytes are there."""

    def __init__(self, buf: memoryview, source: str):
        self.buf, self.pos, self.source = buf, 0, source

    @property
    def left(self) -> int:
        return len(self.buf) - self.pos

    def fail(self, what: str, detail: str, at: int | None = None) -> AotexecError:
        return AotexecError(f"Invalid NDArray file format: {self.source}: {what} at byte offset "
                            f"{self.pos if at is None else at}: {detail}")

    def take(self, n: int, what: str) -> memoryview:
        if n > self.left:
            raise self.fail(what, f"needs {n} bytes, only {self.left} left (truncated file?)")
        self.pos += n
        return self.buf[self.pos - n:self.pos]

    def scalar(self, fmt: str, what: str) -> int:
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt), what))[0]

    def count(self, what: str, min_bytes: int) -> int:
        """A u64 count of items that take at least ``min_bytes`` each, checked against the bytes left."""
        at = self.pos
        n = self.scalar("Q", f"number of {what}")
        if n * min_bytes > self.left:
            raise self.fail(f"number of {what}", f"{n} {what} cannot fit in the {self.left} bytes left", at)
        return n


def _kind_hint(buf: memoryview) -> str:
    head = bytes(buf[:6])
    if head.startswith(b"PK\x03\x04"):
        return " (it is a zip archive: a numpy .npz?)"
    if head == b"\x93NUMPY":
        return " (it is a numpy .npy file)"
    return ""


def read_arrays(buf: bytes | bytearray | memoryview, source: str) -> tuple[list[np.ndarray], list[str]]:
    """The arrays (read-only numpy views of ``buf``) and names (empty for a list) of a file's bytes."""
    r = _Reader(memoryview(buf).cast("B"), source)
    magic = r.scalar("Q", "list magic")
    if magic != LIST_MAGIC:
        raise r.fail("list magic", f"0x{magic:x} is not MXNet's NDArray list magic 0x112{_kind_hint(r.buf)}", 0)
    r.scalar("Q", "reserved word")
    n = r.count("arrays", 4)
    arrays = [_read_array(r, f"array {i} of {n}") for i in range(n)]
    at = r.pos
    m = r.count("names", 8)
    if m not in (0, n):
        raise r.fail("number of names", f"{m} names for {n} arrays (must be 0 or {n})", at)
    names = [_read_name(r, f"name {i} of {m}") for i in range(m)]
    if r.left:
        raise r.fail("end of the names", f"{r.left} unexpected bytes follow the last name")
    return arrays, names


def _read_name(r: _Reader, what: str) -> str:
    at = r.pos
    raw = r.take(r.scalar("Q", f"{what}: length"), what)
    try:
        return bytes(raw).decode("utf-8")
    except UnicodeDecodeError as e:
        raise r.fail(what, f"not UTF-8 ({e.reason})", at) from None


def _read_array(r: _Reader, what: str) -> np.ndarray:
    at = r.pos
    magic = r.scalar("I", f"{what}: magic")
    if magic in (V2_MAGIC, V3_MAGIC):
        stype_at = r.pos
        stype = r.scalar("i", f"{what}: storage type")
        if stype in _SPARSE:
            raise r.fail(f"{what}: storage type", f"{_SPARSE[stype]} (sparse) arrays are not supported; "
                         "save them dense (.tostype('default'))", stype_at)
        if stype != 0:
            raise r.fail(f"{what}: storage type", f"unknown storage type {stype}", stype_at)
        shape = _read_shape(r, what, "q", np_shape=magic == V3_MAGIC)
    elif magic == V1_MAGIC:
        shape = _read_shape(r, what, "q", np_shape=False)
    elif magic <= _MAX_LEGACY_NDIM:
        shape = _read_dims(r, what, magic, "I", np_shape=False)
    else:
        raise r.fail(what, f"unknown NDArray magic 0x{magic:08x}", at)
    dev_at = r.pos
    dev_type, dev_id = r.scalar("i", f"{what}: device type"), r.scalar("i", f"{what}: device id")
    if dev_type not in _DEVICE_TYPES or dev_id < 0:
        raise r.fail(f"{what}: context", f"unknown device ({dev_type}, {dev_id})", dev_at)
    dtype = _read_dtype(r, what)
    nbytes = math.prod(shape) * dtype.itemsize
    data = r.take(nbytes, f"{what}: data ({dtype} {shape})")
    try:
        return np.frombuffer(data, dtype).reshape(shape) if nbytes else np.zeros(shape, dtype)
    except (ValueError, MemoryError) as e:      # a zero-size shape numpy cannot represent
        raise r.fail(f"{what}: shape", f"{shape}: {e}", at) from None


def _read_dtype(r: _Reader, what: str) -> np.dtype:
    at = r.pos
    flag = r.scalar("i", f"{what}: type flag")
    if flag == 12:
        raise r.fail(f"{what}: type flag", "bfloat16 arrays are not supported (numpy has no bfloat16)", at)
    if flag not in FLAG_DTYPES:
        raise r.fail(f"{what}: type flag", f"unknown type flag {flag}", at)
    return np.dtype(FLAG_DTYPES[flag]).newbyteorder("<")


def _read_shape(r: _Reader, what: str, dim_fmt: str, np_shape: bool) -> tuple[int, ...]:
    at = r.pos
    ndim = r.scalar("i", f"{what}: ndim")
    if ndim == -1 and np_shape:
        raise r.fail(f"{what}: shape", "a none array (unknown shape, no data), which aotexec does not load", at)
    if ndim < 0:
        raise r.fail(f"{what}: ndim", f"negative ndim {ndim}", at)
    return _read_dims(r, what, ndim, dim_fmt, np_shape)


def _read_dims(r: _Reader, what: str, ndim: int, dim_fmt: str, np_shape: bool) -> tuple[int, ...]:
    """Legacy semantics: ndim 0 is a none array; numpy's: ndim 0 is a scalar, a dim -1 unknown."""
    at = r.pos
    dims = struct.unpack(f"<{ndim}{dim_fmt}", r.take(ndim * struct.calcsize(dim_fmt), f"{what}: shape"))
    if (not np_shape and ndim == 0) or (np_shape and -1 in dims):
        raise r.fail(f"{what}: shape", "a none array (no shape, no data), which aotexec does not load", at)
    if any(d < 0 for d in dims):
        raise r.fail(f"{what}: shape", f"negative dimension in {dims}", at)
    return dims


def _check_fname(fname: Any) -> None:
    if not isinstance(fname, (str, os.PathLike)):     # open() would take an int as a file descriptor
        raise TypeError("fname required to be a string")


def _read_file(fname: str | os.PathLike) -> bytes:
    _check_fname(fname)
    try:
        with open(fname, "rb") as f:
            return f.read()
    except OSError as e:
        raise AotexecError(f"cannot read NDArray file {fname}: {e.strerror or e}") from None


def _result(arrays: list, names: list[str]) -> list | dict:
    """MXNet's return value: a list when the file has no names, else a dict in file order."""
    return dict(zip(names, arrays)) if names else list(arrays)


def load_numpy(fname: str | os.PathLike) -> list[np.ndarray] | dict[str, np.ndarray]:
    """``load`` as read-only numpy arrays, with no device upload (artifact building)."""
    return _result(*read_arrays(_read_file(fname), str(fname)))


def load(fname: str | os.PathLike, ctx: Context | None = None) -> list[NDArray] | dict[str, NDArray]:
    """``mx.nd.load``: a dict name -> NDArray, or a list when the file holds no names.
    Arrays go to ``ctx`` (default: the current context), not the context recorded in the file."""
    return _to_ndarrays(load_numpy(fname), ctx)


def load_frombuffer(buf: bytes | bytearray | memoryview, ctx: Context | None = None
                    ) -> list[NDArray] | dict[str, NDArray]:
    """``mx.nd.load_frombuffer``: ``load`` from the file's bytes."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise TypeError("buf required to be a string or bytes")
    return _to_ndarrays(_result(*read_arrays(buf, "<buffer>")), ctx)


def _to_ndarrays(data: list | dict, ctx: Context | None) -> list[NDArray] | dict[str, NDArray]:
    ctx = ctx or current_context()
    if isinstance(data, dict):
        return {k: array(v, ctx=ctx) for k, v in data.items()}
    return [array(v, ctx=ctx) for v in data]


def is_ndarray_file(head: bytes) -> bool:
    """Whether a file's first 8 bytes are MXNet's NDArray list magic."""
    return len(head) >= 8 and struct.unpack("<Q", head[:8])[0] == LIST_MAGIC


# ------------------------------------------------------------------ writing
def _device(value: Any) -> tuple[int, int]:
    """The (dev_type, dev_id) MXNet records: gpu stays gpu; vulkan, which MXNet lacks, is written as
    cpu(0) so MXNet loads it on the host instead of asking CUDA for it."""
    if isinstance(value, NDArray) and value.context.device_type == "gpu":
        return 2, value.context.device_id
    if isinstance(value, NDArray) and value.context.device_type == "cpu":
        return 1, value.context.device_id
    return 1, 0


def _entry(value: Any, label: str, np_shape: bool) -> tuple[np.dtype, tuple[int, ...]]:
    """Check one value before anything is written (a failed save leaves no half-written file)."""
    if not isinstance(value, (NDArray, np.ndarray)):
        raise TypeError("save only accept dict str->NDArray or list of NDArray")
    dtype, shape = np.dtype(value.dtype), tuple(value.shape)
    if dtype not in WRITABLE:
        raise AotexecError(f"cannot save {label}: MXNet's NDArray files hold {', '.join(map(str, WRITABLE))}, "
                           f"not {dtype}; cast it first (.astype)")
    if not shape and not np_shape:
        raise AotexecError(f"cannot save {label}: a 0-d array is saved under numpy shape semantics only "
                           "(inside `with ax.np_shape():`), as in MXNet")
    return dtype, shape


def _pairs(data: Any) -> tuple[list[Any], list[str] | None]:
    """MXNet's accepted forms: one array, a list of arrays, a dict str -> array (numpy arrays too)."""
    if isinstance(data, (NDArray, np.ndarray)):
        return [data], None
    if isinstance(data, dict):
        if any(not isinstance(k, str) for k in data):
            raise TypeError("save only accept dict str->NDArray or list of NDArray")
        return list(data.values()), list(data)
    if isinstance(data, list):
        return list(data), None
    raise ValueError("data needs to either be a NDArray, dict of str, NDArray pairs or a list of NDarrays.")


def _checked(values: Sequence[Any], names: Sequence[str] | None) -> list[tuple[np.dtype, tuple[int, ...]]]:
    np_shape = is_np_shape()
    labels = [f"'{n}'" for n in names] if names else [f"array {i}" for i in range(len(values))]
    return [_entry(v, label, np_shape) for v, label in zip(values, labels)]


def write_arrays(f: BinaryIO, values: Sequence[Any], names: Sequence[str] | None,
                 meta: list[tuple[np.dtype, tuple[int, ...]]]) -> None:
    """Write ``values`` (NDArray or numpy; ``meta`` from ``_checked``) as ``mx.nd.save`` does: V3 arrays
    under ``ax.np_shape()``, else V2 (MXNet's rule, so a file it wrote round-trips byte for byte)."""
    magic = V3_MAGIC if is_np_shape() else V2_MAGIC
    f.write(struct.pack("<QQQ", LIST_MAGIC, 0, len(values)))
    for value, (dtype, shape) in zip(values, meta):
        f.write(struct.pack(f"<Iii{len(shape)}q", magic, 0, len(shape), *shape))
        f.write(struct.pack("<iii", *_device(value), DTYPE_FLAGS[dtype]))
        host = value.asnumpy() if isinstance(value, NDArray) else value    # one array on the host at a time
        f.write(np.ascontiguousarray(host, dtype.newbyteorder("<")).data)
    encoded = [n.encode("utf-8") for n in names or ()]
    f.write(struct.pack("<Q", len(encoded)))
    for raw in encoded:
        f.write(struct.pack("<Q", len(raw)) + raw)


def save(fname: str | os.PathLike, data: Any) -> None:
    """``mx.nd.save``: an NDArray, a list of them, or a dict str -> NDArray (numpy arrays are
    accepted too and recorded as cpu(0)), written so that MXNet 1.9 loads the file."""
    _check_fname(fname)
    values, names = _pairs(data)
    meta = _checked(values, names)      # before the file is opened: a refused save leaves no file behind
    try:
        with open(fname, "wb") as f:
            write_arrays(f, values, names, meta)
    except OSError as e:
        raise AotexecError(f"cannot write NDArray file {fname}: {e.strerror or e}") from None
