"""Correlation (FlowNet's; MXNet 1.9.1 src/operator/correlation-inl.h, correlation.cc): for each
displacement (dy, dx) of a (2 r + 1)^2 grid, r = max_displacement // stride2, steps of stride2,
the sum over a kernel_size^2 window and the channels of data1 times data2 shifted by it (or of
their absolute difference), divided by kernel_size^2 x channels; windows start every stride1
pixels at max_displacement into the inputs zero-padded by pad_size. The hidden outputs tmp1 /
tmp2 are the padded inputs channels-last, as MXNet's.

One product map per displacement, summed over channels, then every window summed at once
(``reduce_window``): the emitted ops grow with the displacement grid (an attribute, like a
kernel's offsets), never with the image."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .registry import define, differentiable, lowers
from .rules import known, same_dtype


@dataclass(frozen=True)
class CorrelationParam:
    kernel_size: int = 1
    max_displacement: int = 1
    stride1: int = 1
    stride2: int = 1
    pad_size: int = 0
    is_multiply: bool = True


@dataclass(frozen=True)
class _Geometry:
    hp: int             # padded input height / width
    wp: int
    th: int             # output height / width
    tw: int
    radius: int         # of the displacement grid
    grid: int           # its width: 2 radius + 1
    hr: int             # rows / columns the windows cover, from max_displacement on
    wr: int


def _geometry(p: CorrelationParam, h: int, w: int) -> _Geometry:
    hp, wp = h + 2 * p.pad_size, w + 2 * p.pad_size
    border = p.max_displacement + (p.kernel_size - 1) // 2
    th = math.ceil((hp - 2 * border) / p.stride1)
    tw = math.ceil((wp - 2 * border) / p.stride1)
    radius = p.max_displacement // p.stride2
    return _Geometry(hp, wp, th, tw, radius, 2 * radius + 1, (th - 1) * p.stride1 + p.kernel_size,
                     (tw - 1) * p.stride1 + p.kernel_size)


def _correlation_shape(p: CorrelationParam, ins, outs):
    """MXNet's CorrelationProp::InferShape checks."""
    a, b = ins
    for s in (a, b):
        if s is not None and len(s) != 4:
            raise ValueError("data should be a 4D tensor")
    if not known(a):
        return ins, outs
    n, c, h, w = a
    g = _geometry(p, h, w)
    if g.tw < 1 or g.th < 1:
        raise ValueError("Correlation cannot be done with current settings.Neighborhood and kernel don't fit in blob")
    padded = (n, g.hp, g.wp, c)
    return [tuple(a), tuple(a)], [(n, g.grid * g.grid, g.th, g.tw), padded, padded]


Correlation = define("Correlation", stateful=True, params=CorrelationParam, inputs=["data1", "data2"],
                     outputs=["output", "tmp1", "tmp2"], num_visible=lambda p: 1,
                     infer_shape=_correlation_shape, infer_type=same_dtype)


def _padded(b, p: CorrelationParam, g: _Geometry, x):
    """x zero-padded by pad_size, and on the bottom / right as far as the windows read (an even
    kernel's last windows reach one past the padded input, where MXNet reads out of bounds)."""
    md = p.max_displacement
    eh, ew = max(0, 2 * md + g.hr - g.hp), max(0, 2 * md + g.wr - g.wp)
    q = p.pad_size
    return b.pad(x, 0.0, (0, 0, q, q), (0, 0, q + eh, q + ew))


def _displacements(p: CorrelationParam, g: _Geometry):
    """(dy, dx) in output-channel order: dy major."""
    return [((i - g.radius) * p.stride2, (j - g.radius) * p.stride2) for i in range(g.grid) for j in range(g.grid)]


def _window(b, p: CorrelationParam, g: _Geometry, xp, dy: int, dx: int):
    """The (N, C, hr, wr) part of padded ``xp`` the windows read, shifted by (dy, dx)."""
    md = p.max_displacement
    n, c = xp.shape[:2]
    return b.slice(xp, (0, 0, md + dy, md + dx), (n, c, md + dy + g.hr, md + dx + g.wr))


@lowers(Correlation)
def _correlation_lower(ctx, p: CorrelationParam, x1, x2):
    b = ctx.b
    n, c, h, w = x1.shape
    g = _geometry(p, h, w)
    x1p, x2p = _padded(b, p, g, x1), _padded(b, p, g, x2)
    a = _window(b, p, g, x1p, 0, 0)
    maps = []
    for dy, dx in _displacements(p, g):
        v = _window(b, p, g, x2p, dy, dx)
        t = b.mul(a, v) if p.is_multiply else b.abs(b.sub(a, v))
        maps.append(b.reshape(b.reduce(t, [1]), (n, 1, g.hr, g.wr)))
    d2 = g.grid * g.grid
    stacked = b.concatenate(maps, 1) if len(maps) > 1 else maps[0]
    k, s = p.kernel_size, p.stride1
    out = b.reduce_window(stacked, "add", (1, 1, k, k), (1, 1, s, s), [(0, 0)] * 4, (n, d2, g.th, g.tw))
    out = b.div(out, float(k * k * c))
    tmp = [b.transpose(b.slice(xp, (0, 0, 0, 0), (n, c, g.hp, g.wp)), (0, 2, 3, 1)) for xp in (x1p, x2p)]
    return [out] + tmp


@differentiable(Correlation, ("ograd0", "in0", "in1"))
def _correlation_grad(ctx, p: CorrelationParam, gout, x1, x2):
    """Each output's gradient spread back over its window (k^2 interior-padded copies), then
    per displacement: d data1 += G x data2 shifted, d data2 (shifted back) += G x data1; for
    the absolute difference the sign of data1 - data2, +1 where equal (MXNet's)."""
    b = ctx.b
    n, c, h, w = x1.shape
    g = _geometry(p, h, w)
    k, s, md = p.kernel_size, p.stride1, p.max_displacement
    gs = b.div(gout, float(k * k * c))
    last_h, last_w = (g.th - 1) * s + 1, (g.tw - 1) * s + 1
    spread = None
    for u in range(k):
        for v in range(k):
            term = b.pad(gs, 0.0, (0, 0, u, v), (0, 0, g.hr - u - last_h, g.wr - v - last_w), (0, 0, s - 1, s - 1))
            spread = term if spread is None else b.add(spread, term)          # (N, D^2, hr, wr)
    x1p, x2p = _padded(b, p, g, x1), _padded(b, p, g, x2)
    full = x1p.shape
    a = _window(b, p, g, x1p, 0, 0)
    win = (n, c, g.hr, g.wr)
    da, tvs = None, []
    shifts = _displacements(p, g)
    for i, (dy, dx) in enumerate(shifts):
        gd = b.broadcast_in_dim(b.reshape(b.slice(spread, (0, i, 0, 0), (n, i + 1, g.hr, g.wr)), (n, g.hr, g.wr)),
                                win, (0, 2, 3))
        v = _window(b, p, g, x2p, dy, dx)
        if p.is_multiply:
            ta, tv = b.mul(gd, v), b.mul(gd, a)
        else:
            sign = b.sub(b.mul(b.convert(b.compare(a, v, "GE"), a.dtype), 2.0), 1.0)   # +1 where equal
            ta = b.mul(gd, sign)
            tv = b.neg(ta)
        da = ta if da is None else b.add(da, ta)
        tvs.append(b.reshape(tv, (1,) + win))
    # one barrier between the terms and their placement: IREE 3.13 fused the absolute
    # difference's terms with the padded placements into a dispatch it could not compile
    # ("write affecting operations on global resources are restricted to workgroup distributed contexts")
    stacked = b.barrier(b.concatenate(tvs, 0) if len(tvs) > 1 else tvs[0])
    dx2p = None
    for i, (dy, dx) in enumerate(shifts):
        tv = b.reshape(b.slice(stacked, (i, 0, 0, 0, 0), (i + 1,) + win), win)
        top, left = md + dy, md + dx
        placed = b.pad(tv, 0.0, (0, 0, top, left), (0, 0, full[2] - top - g.hr, full[3] - left - g.wr))
        dx2p = placed if dx2p is None else b.add(dx2p, placed)
    dx1p = b.pad(da, 0.0, (0, 0, md, md), (0, 0, full[2] - md - g.hr, full[3] - md - g.wr))
    q = p.pad_size
    crop = lambda t: b.slice(t, (0, 0, q, q), (n, c, q + h, q + w))             # noqa: E731
    return [crop(dx1p), crop(dx2p)]
