"""Winograd's input-tile transforms (``ops.winograd``) as calls of the AVX-512 kernel
(``aotexec_wino_tiles_workgroup``): one pass over the map writing the stacked tiles.

``ops.winograd``'s own form computes each row of a transform as a weighted sum of windows and
stacks the rows (``stablehlo.concatenate``); IREE 3.13 writes a row into the stack in place
only when its dispatch produces nothing else, and the rows share terms it stores apart, so
ResNet-18's b16 training step copied 906 MB between its own buffers. (The output transform
as a kernel was no faster: IREE fuses it with its consumers, docs/PERFORMANCE.md.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..mlir_values import Value
from ..symbolic import any_dynamic
from . import executable
from .matmul import NR, ceil_div, panels

if TYPE_CHECKING:
    from ..emitter import Emitter

# channels per workgroup (the C side's WINO_CHANNELS) and the largest transform side (WINO_MAX)
CHANNELS = 256
MAX_SIDE = 8
# smaller stacks of tiles stay with IREE, which fuses their transform with its producer and
# saves a dispatch (ResNet-18 / SqueezeNet b1 inference ~1% faster without the kernel there)
MIN_FLOATS = 1 << 20


def stream_rows(tiles: int, c: int) -> int:
    """Rows per stream of a stack of ``tiles`` tiles of ``c`` floats: the fewest zero rows past
    the tiles that put consecutive streams at least 1 KB off a multiple of 4 KB. A tile's T^2
    stores 4 KB apart share L1 sets: 16x28x28x128 F(4x4) 1.8 -> 1.2-1.5 ms, 16x14x14x256
    1.2 -> 0.3-0.6, 16x7x7x512 F(2x2) 0.43 -> 0.17 (one core, docs/PERFORMANCE.md)."""
    row = 4 * c
    for rows in range(tiles, tiles + 4096):
        if 1024 <= rows * row % 4096 <= 3072:
            return rows
    return tiles        # every stride a multiple of 4 KB (c a multiple of 1024)


def tiles(b: "Emitter", x: Value, mat: np.ndarray, th: int, tw: int, step: int,
          pad: tuple[int, int], rows: int | None = None, packed: bool = False) -> Value | None:
    """(T*T, R, C): out[b T + a][p] = sum_ij mat[a, i] mat[b, j] x[n, ty step + i - pad[0],
    tx step + j - pad[1]] over the NHWC ``x`` (zero outside), ``mat`` (T x I), for the N*TH*TW
    tiles p, zero rows after them up to ``rows`` (R; default ``stream_rows``); with ``packed``,
    each of the T*T (R, C) matrices as ``kernels.matmul.pack_columns`` lays out a B operand,
    flat. None where the kernel does not take it."""
    if b.kernels is None or x.dtype != np.float32 or any_dynamic(x.shape) or max(mat.shape) > MAX_SIDE:
        return None
    n, h, w, c = (int(d) for d in x.shape)
    t, i = mat.shape
    if t * t * n * th * tw * c < MIN_FLOATS:
        return None
    r = stream_rows(n * th * tw, c) if rows is None else rows
    m = b.constant(np.asarray(mat, np.float32), mat.shape)
    out = (t * t * panels(c) * r * NR,) if packed else (t * t, r, c)
    return executable.dispatch(b, "wino_tiles", (ceil_div(c, CHANNELS), n * th, 1), [x, m],
                               [n, h, w, c, th, tw, t, i, step, pad[0], pad[1], r, int(packed)], out)
