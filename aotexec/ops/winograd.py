"""Winograd F(m x m, 3x3), m = 2 or 4: a 3x3, stride-1 NHWC convolution with 2.25x (m = 2)
or 4x (m = 4) fewer multiplies than the direct form.

Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks" (2016): each m x m output
tile is A^T [(G g G^T) * (B^T d B)] A for the (m + 2) x (m + 2) input tile d around it.
Written in StableHLO so IREE sees three ordinary pieces: the input transform (one axis at a
time: strided slices of the whole map and their weighted sums, stacked on a leading axis),
(m + 2)^2 independent (C x F) matmuls batched in one ``dot_general``, and the output transform
(the same, then one transpose into NHWC). The weight transform is the same weighted sums
on the 3x3 kernel (hoisted into the initializer when the weight is resident). The weight
gradient differentiates the same identity (``weight_grad``).
"""
from __future__ import annotations

import numpy as np

from ..emitter import Emitter, Value
from ..kernels import matmul as kernel_matmul
from ..kernels import winograd as kernel_winograd
from ..kernels.matmul import ceil_div
from ..symbolic import any_dynamic

# where F(2x2) pays (llvm-cpu, docs/PERFORMANCE.md): layers of >= 128 channels (batch 16: 28x28x128
# 36 -> 31 ms, 14x14x256 35 -> 23, 7x7x512 41 -> 24), and 64-channel ones while the transformed
# input tiles (16 x tiles x channels floats) stay in cache (56x56x64 at batch 1: 2.24 -> 1.79 ms;
# at batch 16, 51 MB of tiles, 36 -> 44 ms; SqueezeNet's 64-channel expand layers: b16 110 -> 98 ms)
MIN_CHANNELS = 128
MIN_CHANNELS_SMALL = 64
SMALL_TILES_BYTES = 4 << 20
# F(4x4) where its 36 matmuls have rows enough to be compute-bound (ResNet-18 / 50 at batch 16:
# 7-9% faster); with few tiles they read 36/16 as many transformed weights as F(2x2) for the
# same outputs (batch 1's 7x7 and 14x14 maps: slower)
MIN_TILES_F4 = 64
# and Winograd at all from this many F(2x2) tiles: with fewer (7x7 maps at batch 1: 16) the
# products read 16/9 of the weight for too few rows, and the direct kernel is faster (ResNet-18 /
# 50 b1 inference 4.5% / 2.9%; 14x14's 49 tiles stay Winograd: 1.3% slower without)
MIN_TILES = 32
# weight gradients of 3x3 stride-1 layers from 64 channels as F(4x4) tile products: ResNet-18's
# batch-16 training step 8% faster than one contraction per kernel offset (which packs each
# offset's window: 9x the input through memory); F(2x2) there was slower than per offset
WEIGHT_GRAD_MIN_CHANNELS = 64

# (B^T, G, A^T) per output tile size m; F(4x4, 3x3) with the interpolation points 0, +-1, +-2
TRANSFORMS = {
    2: (np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]),
        np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]),
        np.array([[1, 1, 1, 0], [0, 1, -1, -1]])),
    4: (np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                  [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]),
        np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                  [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]]),
        np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]])),
}


def _stride1_3x3(kernel, stride, dilate, shape) -> bool:
    return (tuple(kernel) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilate) == (1, 1)
            and not any_dynamic(shape))


def tile(kernel, stride, dilate, channels_in: int, channels_out: int, shape) -> int:
    """The output tile size m when a 2-D convolution of the NHWC input ``shape`` runs as
    Winograd F(m x m, 3x3) (3x3, stride 1, undilated, static, wide enough), else 0."""
    if not _stride1_3x3(kernel, stride, dilate, shape):
        return 0
    c = min(channels_in, channels_out)
    n, h, w = shape[:3]
    if n * ceil_div(h, 2) * ceil_div(w, 2) < MIN_TILES:
        return 0
    if c >= MIN_CHANNELS:
        return 4 if n * ceil_div(h, 4) * ceil_div(w, 4) >= MIN_TILES_F4 else 2
    tiles = 16 * n * ((h + 1) // 2) * ((w + 1) // 2) * channels_in * 4
    return 2 if c >= MIN_CHANNELS_SMALL and tiles <= SMALL_TILES_BYTES else 0


def weight_grad_applies(kernel, stride, dilate, channels_in: int, channels_out: int, g_shape) -> bool:
    """Whether a 2-D convolution's weight gradient runs as ``weight_grad`` (F(4x4))."""
    return _stride1_3x3(kernel, stride, dilate, g_shape) and min(channels_in, channels_out) >= WEIGHT_GRAD_MIN_CHANNELS


def _combine(b: Emitter, terms: list[Value], coeffs, scaled: dict) -> Value:
    """sum_i coeffs[i] * terms[i]: adds and subtracts, and a multiply per term and coefficient
    magnitude other than 1, shared through ``scaled`` (as their splats) by the sums of one transform."""
    pairs = sorted(((k, t) for t, k in zip(terms, coeffs) if k), key=lambda kt: -kt[0])
    acc = None
    for k, t in pairs:
        if abs(k) != 1:
            k_abs = abs(float(k))
            if (k_abs, t.shape) not in scaled:
                scaled[k_abs, t.shape] = b.full_like(t, k_abs)
            if (k_abs, t.name) not in scaled:
                scaled[k_abs, t.name] = b.mul(t, scaled[k_abs, t.shape])
            t = scaled[k_abs, t.name]
        acc = (t if k > 0 else b.neg(t)) if acc is None else (b.add(acc, t) if k > 0 else b.sub(acc, t))
    return acc


def _stack(b: Emitter, xs: list[Value]) -> Value:
    return b.concatenate([b.reshape(x, (1, *x.shape)) for x in xs], 0)


def _transform(b: Emitter, x: Value, axis: int, count: int, step: int, mat) -> Value:
    """Rows a of ``mat`` applied along ``axis`` to ``count`` windows of ``x`` taken every
    ``step``: out[a, ..., k, ...] = sum_i mat[a, i] x[..., step k + i, ...], stacked on a new axis 0."""
    windows = []
    for i in range(mat.shape[1]):
        start = [0] * x.ndim
        limit = list(x.shape)
        strides = [1] * x.ndim
        start[axis], limit[axis], strides[axis] = i, i + step * (count - 1) + 1, step
        windows.append(b.slice(x, start, limit, strides))
    scaled: dict = {}
    return _stack(b, [_combine(b, windows, row, scaled) for row in mat])


def _input_tiles(b: Emitter, x: Value, pad: tuple[int, int], th: int, tw: int, m: int) -> Value:
    """B^T d B of every (m+2) x (m+2) input tile d of NHWC ``x`` padded by ``pad`` (zeros up to
    th x tw whole tiles): ((m+2)^2, R, C), index (m+2) b + a, for the P = N * TH * TW tiles and
    zero rows after them (R >= P: ``kernels.winograd.stream_rows``)."""
    b_t = TRANSFORMS[m][0]
    t = m + 2
    v = kernel_winograd.tiles(b, x, b_t, th, tw, m, pad)
    if v is not None:
        return v
    xp = b.pad(x, 0.0, (0, pad[0], pad[1], 0),
               (0, m * th + 2 - x.shape[1] - pad[0], m * tw + 2 - x.shape[2] - pad[1], 0))
    v = _transform(b, _transform(b, xp, 1, th, m, b_t), 3, tw, m, b_t)          # (Tb, Ta, N, TH, TW, C)
    return b.reshape(v, (t * t, x.shape[0] * th * tw, x.shape[3]))


def _transformed(b: Emitter, w: Value, m: int, packed: bool) -> Value:
    """G w G^T of an OIHW (F, C, 3, 3) weight for every (c, f): ((m+2)^2, C, F), index
    (m+2) b + a for (G w G^T)[a, b]; with ``packed``, in the kernel's packed layout
    (``kernels.matmul.pack_columns``: ((m+2)^2, ceil(F/32), C, 32), flat) instead. The sums
    run on the weight laid out with the 3 x 3 outermost, adding whole contiguous slabs (on
    OIHW, with the 3 x 3 innermost, IREE ran them at about 1 GB/s: ResNet-18's 512-channel
    layers' transforms took 6% of its b16 training step). Weighted sums, not matmuls: a
    contraction of 3 ran as its own slow dispatch in training."""
    f, c = w.shape[:2]
    g_mat = TRANSFORMS[m][1].astype(w.dtype)
    t = g_mat.shape[0]
    if packed:
        p = kernel_matmul.panels(f)
        w = b.pad(w, 0.0, (0, 0, 0, 0), (p * kernel_matmul.NR - f, 0, 0, 0))
        lay = b.transpose(b.reshape(w, (p, kernel_matmul.NR, c, 3, 3)), (3, 4, 0, 2, 1))   # (3, 3, P, C, 32)
    else:
        lay = b.transpose(w, (2, 3, 1, 0))                                                  # (3, 3, C, F)
    u = _transform(b, _transform(b, lay, 0, 1, 1, g_mat), 2, 1, 1, g_mat)                 # (Tb, Ta, 1, 1, ...)
    return b.reshape(u, (t * t * int(np.prod(lay.shape[2:])),) if packed else (t * t, c, f))


def conv3x3_nhwc(b: Emitter, x: Value, w: Value, out_shape, pad: tuple[int, int], m: int = 2) -> Value:
    """NHWC ``x`` (N, H, W, C) convolved (stride 1, undilated) with the OIHW (F, C, 3, 3)
    weight ``w`` (transformed here: IREE hoists that into the initializer when ``w`` is
    resident), padded by ``pad``; ``out_shape`` (N, OH, OW, F)."""
    a_t = TRANSFORMS[m][2]
    t = m + 2
    n, oh, ow, f = out_shape
    th, tw = ceil_div(oh, m), ceil_div(ow, m)
    p = n * th * tw
    v = _input_tiles(b, x, pad, th, tw, m)                           # (T^2, R, C): R >= P rows, zero past P
    r = v.shape[1]
    if x.dtype == w.dtype == np.float32 and kernel_matmul.takes(b, t * t, r, f, x.shape[3], alone=True):
        mm = kernel_matmul.packed_product(b, v, _transformed(b, w, m, packed=True), f)
    else:
        mm = b.dot_general(v, _transformed(b, w, m, packed=False), contract=([2], [1]), batch=([0], [0]),
                           alone=True)                               # (T^2, R, F); the output transform reads it
    mm = b.reshape(mm, (t, t, r, f))                                 # (Tb, Ta, R, F)
    if r != p:
        mm = b.slice(mm, (0, 0, 0, 0), (t, t, p, f))
    cols = _transform(b, mm, 1, 1, 1, a_t)                           # (u, Tb, 1, P, F)
    y = _transform(b, b.reshape(cols, (m, t, p, f)), 1, 1, 1, a_t)   # (v, u, 1, P, F)
    y = b.transpose(b.reshape(y, (m, m, n, th, tw, f)), (2, 3, 1, 4, 0, 5))   # (N, TH, u, TW, v, F)
    y = b.reshape(y, (n, m * th, m * tw, f))
    if (m * th, m * tw) != (oh, ow):
        y = b.slice(y, (0, 0, 0, 0), (n, oh, ow, f))
    return y


def _g_tiles(b: Emitter, g: Value, mat, th: int, tw: int, m: int, rows: int) -> Value:
    """A g A^T of every m x m tile of the NHWC head gradient ``g`` (zeros up to th x tw whole
    tiles): ((m+2)^2, ``rows``, F), zero rows past the tiles."""
    dy = kernel_winograd.tiles(b, g, mat, th, tw, m, (0, 0), rows=rows)
    if dy is not None:
        return dy
    n, oh, ow, f = g.shape
    gp = b.pad(g, 0.0, (0, 0, 0, 0), (0, m * th - oh, m * tw - ow, 0))
    dy = _transform(b, _transform(b, gp, 1, th, m, mat), 3, tw, m, mat)            # (Tb, Ta, N, TH, TW, F)
    dy = b.reshape(dy, ((m + 2) ** 2, n * th * tw, f))
    return dy if rows == n * th * tw else b.pad(dy, 0.0, (0, 0, 0), (0, rows - n * th * tw, 0))


def _tile_products(b: Emitter, v: Value, g: Value, mat, th: int, tw: int, m: int) -> Value | None:
    """sum over the tiles of v (T^2, R, C) times g's tiles (T^2, R, F) through the matmul
    kernel, (T^2, C, F): v read as it is (A stored (R, C)), g's tiles as the tiles kernel writes
    them packed where it takes them; None where the matmul kernel does not take it."""
    t2, r, c = v.shape
    f = g.shape[3]
    if not kernel_matmul.takes(b, t2, c, f, r, alone=True):
        return None
    packed = kernel_winograd.tiles(b, g, mat, th, tw, m, (0, 0), rows=r, packed=True)
    if packed is not None:
        return kernel_matmul.packed_product(b, v, packed, f, a_trans=True)
    return kernel_matmul.call(b, v, _g_tiles(b, g, mat, th, tw, m, r), [1], [1], [0], [0], alone=True)


def weight_grad(b: Emitter, x: Value, g: Value, pad: tuple[int, int], m: int) -> Value:
    """d weight (OIHW (F, C, 3, 3)) of the 3x3 stride-1 convolution of NHWC ``x`` padded by
    ``pad`` from its NHWC head gradient ``g``: the forward's identity differentiated,
    dU = sum over tiles of (B^T d B) * (A g A^T) (one batched matmul contracting the tiles),
    then dW = G^T dU G. (m + 2)^2 / (9 m^2) of the direct form's multiplies."""
    _, g_mat, a_t = TRANSFORMS[m]
    t = m + 2
    n, oh, ow, f = g.shape
    c = x.shape[3]
    th, tw = ceil_div(oh, m), ceil_div(ow, m)
    v = _input_tiles(b, x, pad, th, tw, m)                                       # (T^2, R, C), zero past P
    r = v.shape[1]
    du = _tile_products(b, v, g, a_t.T, th, tw, m) if x.dtype == g.dtype == np.float32 else None
    if du is None:      # IREE's matmuls: tiles innermost, the (C x R) (R x F)^T products in the layout they pack
        du = b.dot_general(b.transpose(v, (0, 2, 1)), b.transpose(_g_tiles(b, g, a_t.T, th, tw, m, r), (0, 2, 1)),
                           contract=([2], [2]), batch=([0], [0]))                # (T^2, C, F)
    g_t = g_mat.T.astype(x.dtype)
    dw = _transform(b, _transform(b, b.reshape(du, (t, t, c, f)), 1, 1, 1, g_t), 1, 1, 1, g_t)   # (3j, 3i, 1, 1, C, F)
    return b.transpose(b.reshape(dw, (3, 3, c, f)), (3, 2, 1, 0))
