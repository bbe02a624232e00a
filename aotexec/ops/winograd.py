"""Winograd F(2x2, 3x3): a 3x3, stride-1 NHWC convolution with 2.25x fewer multiplies.

Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (2016): each 2x2 output
tile is A^T [(G g G^T) * (B^T d B)] A for the 4x4 input tile d around it. Written in
StableHLO so IREE sees three ordinary pieces: the input transform (strided slices and
adds; IREE 3.13 splits it into several elementwise dispatches and packs V for the matmul),
16 independent (C x F) matmuls batched in one ``dot_general``, and the output transform
(adds, an interleave into NHWC). The weight
transform is two small matmuls with constant matrices (hoisted when the weight is resident).
"""
from __future__ import annotations

import numpy as np

from ..emitter import Emitter, Value
from ..symbolic import any_dynamic

# where it pays (llvm-cpu, docs/PERFORMANCE.md): layers of >= 128 channels (batch 16: 28x28x128
# 36 -> 31 ms, 14x14x256 35 -> 23, 7x7x512 41 -> 24), and 64-channel ones while the transformed
# input tiles (16 x tiles x channels floats) stay in cache (56x56x64 at batch 1: 2.24 -> 1.79 ms;
# at batch 16, 51 MB of tiles, 36 -> 44 ms; SqueezeNet's 64-channel expand layers: b16 110 -> 98 ms)
MIN_CHANNELS = 128
MIN_CHANNELS_SMALL = 64
SMALL_TILES_BYTES = 4 << 20


def applies(kernel, stride, dilate, channels_in: int, channels_out: int, shape) -> bool:
    """Whether a 2-D convolution of the NHWC input ``shape`` runs as Winograd F(2x2, 3x3):
    3x3, stride 1, undilated, static, and wide enough."""
    if not (tuple(kernel) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilate) == (1, 1)
            and not any_dynamic(shape)):
        return False
    c = min(channels_in, channels_out)
    n, h, w = shape[:3]
    tiles = 16 * n * ((h + 1) // 2) * ((w + 1) // 2) * channels_in * 4
    return c >= MIN_CHANNELS or (c >= MIN_CHANNELS_SMALL and tiles <= SMALL_TILES_BYTES)


B_T = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64)
A_T = ((1, 1, 1, 0), (0, 1, -1, -1))


def _combine(b: Emitter, terms: list[Value], coeffs) -> Value:
    """sum_i coeffs[i] * terms[i] for coefficients in {-1, 0, 1}, one op per term after the
    first (a positive one)."""
    pairs = sorted(((k, t) for t, k in zip(terms, coeffs) if k), key=lambda kt: -kt[0])
    acc = pairs[0][1] if pairs[0][0] == 1 else b.neg(pairs[0][1])
    for k, t in pairs[1:]:
        acc = b.add(acc, t) if k == 1 else b.sub(acc, t)
    return acc


def weight_transform(b: Emitter, w: Value) -> Value:
    """(16, C, F) from an OIHW (F, C, 3, 3) weight: U[4a+b] = (G w G^T)[a, b]."""
    f, c = w.shape[:2]
    g = b.constant(G.astype(w.dtype), G.shape, w.dtype)
    t = b.dot_general(g, w, contract=([1], [2]))                     # (4, F, C, 3): sum_i G[a,i] w[f,c,i,j]
    u = b.dot_general(t, g, contract=([3], [1]))                     # (4, F, C, 4)
    u = b.transpose(u, (0, 3, 2, 1))                                 # (4a, 4b, C, F)
    return b.reshape(u, (16, c, f))


def conv3x3_nhwc(b: Emitter, x: Value, u: Value, out_shape, pad: tuple[int, int]) -> Value:
    """NHWC ``x`` (N, H, W, C) convolved (stride 1, undilated) with transformed weights
    ``u`` (16, C, F), padded by ``pad``; ``out_shape`` (N, OH, OW, F)."""
    n, oh, ow, f = out_shape
    c = x.shape[3]
    th, tw = -(-oh // 2), -(-ow // 2)
    xp = b.pad(x, 0.0, (0, pad[0], pad[1], 0),
               (0, 2 * th + 2 - x.shape[1] - pad[0], 2 * tw + 2 - x.shape[2] - pad[1], 0))
    d = [[b.slice(xp, (0, i, j, 0), (n, i + 2 * th - 1, j + 2 * tw - 1, c), (1, 2, 2, 1)) for j in range(4)]
         for i in range(4)]                                          # d[i][j]: (N, TH, TW, C)
    rows = [[_combine(b, [d[i][j] for i in range(4)], B_T[a]) for j in range(4)] for a in range(4)]
    p = n * th * tw
    v = [b.reshape(_combine(b, rows[a], B_T[bb]), (1, p, c)) for a in range(4) for bb in range(4)]
    m = b.dot_general(b.concatenate(v, 0), u, contract=([2], [1]), batch=([0], [0]))   # (16, P, F)
    ms = [[b.slice(m, (4 * a + bb, 0, 0), (4 * a + bb + 1, p, f)) for bb in range(4)] for a in range(4)]
    cols = [[_combine(b, ms[a], A_T[v_]) for v_ in range(2)] for a in range(4)]        # (1, P, F) each
    ys = [b.reshape(_combine(b, [cols[a][v_] for a in range(4)], A_T[u_]), (n, th, 1, tw, 1, f))
          for u_ in range(2) for v_ in range(2)]
    y = b.concatenate([b.concatenate(ys[0:2], 4), b.concatenate(ys[2:4], 4)], 2)         # (N, TH, 2, TW, 2, F)
    y = b.reshape(y, (n, 2 * th, 2 * tw, f))
    if (2 * th, 2 * tw) != (oh, ow):
        y = b.slice(y, (0, 0, 0, 0), (n, oh, ow, f))
    return y
