"""UpSampling (MXNet 1.9.1 src/operator/nn/upsampling.cc): nearest (a broadcast per input,
joined or summed) and bilinear (MXNet's grouped Deconvolution with the given weight)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .conv import conv_weight_grad, deconv_data_grad, transposed_conv
from .registry import define, differentiable, lowers
from .rules import known, same_dtype


@dataclass(frozen=True)
class UpSamplingParam:
    scale: int
    num_args: int
    sample_type: Literal["nearest", "bilinear"] = "nearest"
    num_filter: int = 0
    multi_input_mode: Literal["concat", "sum"] = "concat"
    workspace: int = 512


def _upsampling_shape(p: UpSamplingParam, ins, outs):
    ins = list(ins)
    if p.sample_type == "bilinear":
        d = ins[0]
        if not known(d):
            return ins, outs
        k = 2 * p.scale - p.scale % 2
        ins[1] = (d[1], 1, k, k)
        return ins, [(d[0], d[1], d[2] * p.scale, d[3] * p.scale)]
    if any(s is None for s in ins):
        return ins, outs
    d = ins[0]
    oh, ow = (x * p.scale if x >= 0 else -1 for x in d[2:4])
    channels = [s[1] for s in ins]
    c = (sum(channels) if min(channels) >= 0 else -1) if p.multi_input_mode == "concat" else d[1]
    return ins, [(d[0], c, oh, ow)]


UpSampling = define(
    "UpSampling", params=UpSamplingParam, variadic="num_args",
    infer_shape=_upsampling_shape, infer_type=same_dtype)
# bilinear takes (data, weight): a fixed pair, not a variadic list
UpSampling.input_names = lambda p: (["data", "weight"] if p.sample_type == "bilinear"  # type: ignore[method-assign]
                                    else [f"arg{i}" for i in range(p.num_args)])


def _upsample_nearest(b, x, s: int):
    n, c, h, w = x.shape
    y = b.broadcast_in_dim(x, (n, c, h, s, w, s), [0, 1, 2, 4])
    return b.reshape(y, (n, c, h * s, w * s))


@lowers(UpSampling)
def _upsampling_lower(ctx, p: UpSamplingParam, *xs):
    b = ctx.b
    out = ctx.out_shapes[0]
    if p.sample_type == "bilinear":  # MXNet: a grouped Deconvolution with the given weight
        x, w = xs
        k, s = 2 * p.scale - p.scale % 2, p.scale
        q = int(math.ceil((p.scale - 1) / 2))
        return transposed_conv(b, x, w, out, (k, k), (s, s), (1, 1), (q, q), x.shape[1])
    # each input is scaled to the output size (scale_i = out_h / h_i)
    ups = [_upsample_nearest(b, x, out[2] // x.shape[2]) for x in xs]
    if p.multi_input_mode == "sum":
        y = ups[0]
        for u in ups[1:]:
            y = b.add(y, u)
        return y
    return b.concatenate(ups, 1)


@differentiable(UpSampling, lambda p: ["ograd0", "in0", "in1"] if p.sample_type == "bilinear" else ["ograd0"])
def _upsampling_grad(ctx, p: UpSamplingParam, g, x=None, w=None):
    b = ctx.b
    if p.sample_type == "bilinear":
        k, s = 2 * p.scale - p.scale % 2, p.scale
        q = int(math.ceil((p.scale - 1) / 2))
        c = x.shape[1]
        dx = deconv_data_grad(b, g, w, x.shape, (k, k), (s, s), (1, 1), (q, q), c)
        dw = conv_weight_grad(b, g, x, (k, k), (s, s), (1, 1), (q, q), c)
        return [dx, dw]
    grads, c0 = [], 0
    n, _, oh, ow = g.shape
    for shape in ctx.fwd_in_shapes:
        c, h, w_ = shape[1], shape[2], shape[3]
        part = g
        if p.multi_input_mode == "concat":
            part = b.slice(g, [0, c0, 0, 0], (n, c0 + c, oh, ow))
            c0 += c
        s = oh // h
        blocks = b.reshape(part, (n, c, h, s, w_, s))
        grads.append(b.reduce(blocks, [3, 5], "add"))
    return grads
