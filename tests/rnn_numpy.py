"""A float64 numpy reference of MXNet's fused RNN op (rnn_impl.h's kernels, and cuDNN's
semantics for what MXNet 1.9.1 runs only on cuDNN: state clipping and sequence lengths), for the
cases MXNet's CPU kernels refuse; central differences of it give their gradients."""
from __future__ import annotations

from math import prod

import numpy as np

GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def unpack(mode: str, params, input_size: int, h: int, layers: int, dirs: int, proj: int | None):
    """{(layer, dir): [wx, wh, whr, bx, bh]} from the flat vector (weights first, then biases)."""
    g, p = GATES[mode], proj or h
    flat, off, w = np.asarray(params, np.float64), 0, {}

    def take(shape):
        nonlocal off
        a = flat[off:off + prod(shape)].reshape(shape)
        off += prod(shape)
        return a
    for layer in range(layers):
        ni = input_size if layer == 0 else dirs * p
        for d in range(dirs):
            w[layer, d] = [take((g * h, ni)), take((g * h, p)), take((p, h)) if proj else None]
    for layer in range(layers):
        for d in range(dirs):
            w[layer, d] += [take((g * h,)), take((g * h,))]
    assert off == flat.size, (off, flat.size)
    return w


def param_size(mode: str, input_size: int, h: int, layers: int, dirs: int, proj: int | None = None) -> int:
    g, p = GATES[mode], proj or h
    n = 0
    for layer in range(layers):
        ni = input_size if layer == 0 else dirs * p
        n += dirs * (g * h * (ni + p + 2) + (p * h if proj else 0))
    return n


def _step(mode, xt, hw, h, c, clip, clip_nan):
    if mode == "lstm":
        hh = hw.shape[1] // 4
        i, f, g, o = (hw[:, k * hh:(k + 1) * hh] + xt[:, k * hh:(k + 1) * hh] for k in range(4))
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        if clip is not None:
            nan = np.isnan(c)
            c = np.minimum(np.maximum(c, clip[0]), clip[1])
            if clip_nan:
                c = np.where(nan, clip[0], c)
        return _sigmoid(o) * np.tanh(c), c
    if mode == "gru":
        hh = hw.shape[1] // 3
        r = _sigmoid(xt[:, :hh] + hw[:, :hh])
        z = _sigmoid(xt[:, hh:2 * hh] + hw[:, hh:2 * hh])
        n = np.tanh(xt[:, 2 * hh:] + r * hw[:, 2 * hh:])
        return (1 - z) * n + z * h, None
    pre = xt + hw
    return (np.tanh(pre) if mode == "rnn_tanh" else np.maximum(pre, 0)), None


def rnn_forward(mode: str, x, params, h0, c0, state_size: int, layers: int, bidirectional: bool = False,
                proj: int | None = None, clip: tuple[float, float] | None = None, clip_nan: bool = False,
                lengths=None):
    """(output, hy, cy or None) in float64; x (T, N, I), states (layers * dirs, N, ·)."""
    dirs = 2 if bidirectional else 1
    x = np.asarray(x, np.float64)
    steps, n, _ = x.shape
    w = unpack(mode, params, x.shape[2], state_size, layers, dirs, proj)
    lens = np.full(n, steps) if lengths is None else np.asarray(lengths).astype(np.int64)
    inp, hy, cy = x, [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            wx, wh, whr, bx, bh = w[layer, d]
            k = layer * dirs + d
            h = np.asarray(h0[k], np.float64)
            c = np.asarray(c0[k], np.float64) if mode == "lstm" else None
            y = np.zeros((steps, n, h.shape[1]))
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                hn, cn = _step(mode, inp[t] @ wx.T + bx, h @ wh.T + bh, h, c, clip, clip_nan)
                if whr is not None:
                    hn = hn @ whr.T
                m = (t < lens)[:, None]
                y[t] = np.where(m, hn, 0.0)
                h = np.where(m, hn, h)
                c = np.where(m, cn, c) if c is not None else None
            outs.append(y)
            hy.append(h)
            cy.append(c)
        inp = np.concatenate(outs, axis=2)
    return inp, np.stack(hy), (np.stack(cy) if mode == "lstm" else None)


def numeric_grad(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences of the scalar ``f`` at ``x`` (float64)."""
    x = np.asarray(x, np.float64).copy()
    g = np.zeros_like(x)
    flat, gf = x.reshape(-1), g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        hi = f(x)
        flat[i] = old - eps
        lo = f(x)
        flat[i] = old
        gf[i] = (hi - lo) / (2 * eps)
    return g
