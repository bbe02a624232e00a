"""MLIR tensor types and the SSA values the emitter hands to lowering rules."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .symbolic import Dim, simplify

MLIR_DTYPES = {"float16": "f16", "float32": "f32", "float64": "f64", "bfloat16": "bf16",
               "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
               "uint8": "ui8", "uint32": "ui32", "uint64": "ui64", "bool": "i1"}


def tensor_type(shape: Sequence[int], dtype) -> str:
    """A dynamic dimension (``symbolic.Dim``) is ``?``."""
    el = MLIR_DTYPES[np.dtype(dtype).name]
    return "tensor<" + "".join("?x" if isinstance(d, Dim) else f"{d}x" for d in shape) + el + ">"


def value_shape(shape: Sequence) -> tuple:
    """A shape as stored in a Value: ints, and Dims where dynamic."""
    return tuple(simplify(d) if isinstance(d, Dim) else int(d) for d in shape)


@dataclass(frozen=True)
class Value:
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def type(self) -> str:
        return tensor_type(self.shape, self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)


def mlir_string(text: str) -> str:
    """``text`` as an MLIR string literal body: printable ASCII as is, ``"``, ``\\`` and every
    other byte of its UTF-8 as ``\\XX`` (names come from user files)."""
    return "".join(chr(b) if 0x20 <= b < 0x7F and b not in (0x22, 0x5C) else f"\\{b:02X}"
                   for b in text.encode("utf-8"))
