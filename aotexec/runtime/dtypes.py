"""numpy dtype <-> IREE HAL element type."""
from __future__ import annotations

import numpy as np
import iree.runtime as rt

from ..base import AotexecError

_ET = rt.HalElementType
_TO_HAL: dict[np.dtype, int] = {
    np.dtype(np.float16): _ET.FLOAT_16,
    np.dtype(np.float32): _ET.FLOAT_32,
    np.dtype(np.float64): _ET.FLOAT_64,
    np.dtype(np.int8): _ET.SINT_8,
    np.dtype(np.int16): _ET.SINT_16,
    np.dtype(np.int32): _ET.SINT_32,
    np.dtype(np.int64): _ET.SINT_64,
    np.dtype(np.uint8): _ET.UINT_8,
    np.dtype(np.uint16): _ET.UINT_16,
    np.dtype(np.uint32): _ET.UINT_32,
    np.dtype(np.uint64): _ET.UINT_64,
    np.dtype(np.bool_): _ET.BOOL_8,
}
_FROM_HAL: dict[int, np.dtype] = {int(v): k for k, v in _TO_HAL.items()}
# Compiled modules return signless integers (StableHLO iN): read them as signed.
_FROM_HAL.update({int(_ET.INT_8): np.dtype(np.int8), int(_ET.INT_16): np.dtype(np.int16),
                  int(_ET.INT_32): np.dtype(np.int32), int(_ET.INT_64): np.dtype(np.int64)})


def normalize_dtype(dtype) -> np.dtype:
    """Any numpy-understood dtype spec ('float32', np.float32, ...) -> supported np.dtype."""
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise AotexecError(f"not a dtype: {dtype!r}") from e
    if dt not in _TO_HAL:
        raise AotexecError(
            f"dtype {dt} is not supported; supported: {sorted(str(d) for d in _TO_HAL)}")
    return dt


def to_hal(dtype) -> int:
    return _TO_HAL[normalize_dtype(dtype)]


def from_hal(element_type: int) -> np.dtype:
    try:
        return _FROM_HAL[int(element_type)]
    except KeyError:
        raise AotexecError(f"unsupported HAL element type 0x{int(element_type):08x}") from None
