"""Neural-network layers: FullyConnected, Convolution, Deconvolution, Pooling,
Activation, LeakyReLU, BatchNorm, Dropout, LRN, UpSampling, Embedding.

Each op mirrors MXNet 1.9.1 ``src/operator/nn/*`` (parameters, defaults,
input/aux/output names, shape rules).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from ..base import AotexecError
from .params import Shape
from .registry import define
from .rules import forward, known, merge, prod, same_dtype, same_shape


# --- FullyConnected (src/operator/nn/fully_connected.cc, FullyConnectedShape) ---
@dataclass(frozen=True)
class FullyConnectedParam:
    num_hidden: int
    no_bias: bool = False
    flatten: bool = True

    def check(self):
        if self.num_hidden < 1:
            raise ValueError(f"num_hidden must be >= 1, got {self.num_hidden}")


def _fc_shape(p: FullyConnectedParam, ins, outs):
    data = ins[0]
    ins = list(ins)
    out = outs[0]
    feature_dims = (data[1:] if p.flatten else data[-1:]) if data is not None else None
    if feature_dims is not None and known(feature_dims) and len(data) >= 1:
        # the weight needs only the feature dims (MXNet infers it from a (0, k) data shape)
        ins[1] = (p.num_hidden, prod(feature_dims))
        if not p.no_bias:
            ins[2] = (p.num_hidden,)
    if data is not None and known(data):
        k = prod(data[1:]) if p.flatten else data[-1]
        ins[1] = (p.num_hidden, k)
        if not p.no_bias:
            ins[2] = (p.num_hidden,)
        out = (data[0], p.num_hidden) if p.flatten else tuple(data[:-1]) + (p.num_hidden,)
    elif data is not None and p.flatten:
        out = merge(out, (data[0], p.num_hidden))
    if out is not None and data is not None and p.flatten and out[0] >= 0 and data[0] < 0:
        ins[0] = (out[0],) + tuple(data[1:])
    return ins, [out]


def weighted_inputs(p) -> list[str]:
    """FullyConnected / Convolution / Deconvolution: the bias input exists unless no_bias."""
    return ["data", "weight"] if p.no_bias else ["data", "weight", "bias"]


FullyConnected = define("FullyConnected", params=FullyConnectedParam, inputs=weighted_inputs,
                        infer_shape=_fc_shape, infer_type=same_dtype)


# --- Convolution / Deconvolution (src/operator/nn/convolution.cc, deconvolution.cc) ---
@dataclass(frozen=True)
class ConvolutionParam:
    kernel: Shape
    num_filter: int
    stride: Shape = ()
    dilate: Shape = ()
    pad: Shape = ()
    num_group: int = 1
    workspace: int = 1024
    no_bias: bool = False
    cudnn_tune: Optional[str] = None
    cudnn_off: bool = False
    layout: Optional[str] = None

    def check(self):
        if not 1 <= len(self.kernel) <= 3:
            raise ValueError(f"kernel must have 1 to 3 dimensions, got {self.kernel}")
        if self.layout not in (None, "NCW", "NCHW", "NCDHW"):
            raise ValueError(f"layout {self.layout} is not supported (aotexec supports NCW/NCHW/NCDHW)")

    def spatial(self, name: str, default: int) -> tuple[int, ...]:
        v = getattr(self, name)
        return tuple(v) if v else (default,) * len(self.kernel)


def _conv_shape(p: ConvolutionParam, ins, outs):
    ins = list(ins)
    data = ins[0]
    if data is None or not known(data):
        if ins[1] is None and data is not None and data[1] >= 0:
            ins[1] = (p.num_filter, data[1] // p.num_group) + tuple(p.kernel)
        if not p.no_bias:
            ins[2] = merge(ins[2], (p.num_filter,))
        return ins, outs
    nd = len(p.kernel)
    if len(data) != nd + 2:
        raise ValueError(f"Convolution with a {nd}-D kernel needs a {nd + 2}-D input, got {data}")
    stride, dilate, pad = p.spatial("stride", 1), p.spatial("dilate", 1), p.spatial("pad", 0)
    ins[1] = (p.num_filter, data[1] // p.num_group) + tuple(p.kernel)
    if not p.no_bias:
        ins[2] = (p.num_filter,)
    sp = []
    for x, k, s, d, pd in zip(data[2:], p.kernel, stride, dilate, pad):
        ek = d * (k - 1) + 1
        if x + 2 * pd < ek:
            raise ValueError(f"kernel size ({k}) exceeds input ({x} padded to {x + 2 * pd})")
        sp.append((x + 2 * pd - ek) // s + 1)
    return ins, [(data[0], p.num_filter) + tuple(sp)]


Convolution = define("Convolution", params=ConvolutionParam, inputs=weighted_inputs,
                     infer_shape=_conv_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class DeconvolutionParam(ConvolutionParam):
    """Convolution's parameters with MXNet's other defaults, plus adj / target_shape."""
    workspace: int = 512
    no_bias: bool = True
    adj: Shape = ()
    target_shape: Shape = ()



def _deconv_shape(p: DeconvolutionParam, ins, outs):
    ins = list(ins)
    data = ins[0]
    if not p.no_bias:
        ins[2] = merge(ins[2], (p.num_filter,))
    if data is None or not known(data):
        return ins, outs
    stride, dilate, pad, adj = (p.spatial("stride", 1), p.spatial("dilate", 1),
                                p.spatial("pad", 0), p.spatial("adj", 0))
    ins[1] = (data[1], p.num_filter // p.num_group) + tuple(p.kernel)
    sp = []
    for i, (x, k, s, d, pd, a) in enumerate(zip(data[2:], p.kernel, stride, dilate, pad, adj)):
        if p.target_shape:
            sp.append(p.target_shape[i])
        else:
            sp.append(s * (x - 1) + d * (k - 1) + 1 - 2 * pd + a)
    return ins, [(data[0], p.num_filter) + tuple(sp)]


Deconvolution = define("Deconvolution", params=DeconvolutionParam, inputs=weighted_inputs,
                       infer_shape=_deconv_shape, infer_type=same_dtype)


# --- Pooling (src/operator/nn/pooling.cc, PoolingShape) ---
@dataclass(frozen=True)
class PoolingParam:
    kernel: Shape = ()
    pool_type: Literal["max", "avg", "sum", "lp"] = "max"
    global_pool: bool = False
    cudnn_off: bool = False
    pooling_convention: Literal["valid", "full", "same"] = "valid"
    stride: Shape = ()
    pad: Shape = ()
    p_value: Optional[int] = None
    count_include_pad: Optional[bool] = None
    layout: Optional[str] = None

    def window(self, data_shape: tuple[int, ...]):
        """(kernel, stride, pad) for the spatial dims of ``data_shape``."""
        nd = len(data_shape) - 2
        if self.global_pool:
            return tuple(data_shape[2:]), (1,) * nd, (0,) * nd
        kernel = tuple(self.kernel)
        stride = tuple(self.stride) if self.stride else (1,) * nd
        pad = tuple(self.pad) if self.pad else (0,) * nd
        return kernel, stride, pad


@forward
def _pool_shape(p: PoolingParam, data):
    if not 3 <= len(data) <= 5:
        raise ValueError(f"Pooling: input data should be 3D, 4D or 5D, got {data}")
    if not p.global_pool and len(p.kernel) != len(data) - 2:
        raise ValueError(f"Pooling: kernel {p.kernel} does not match a {len(data)}-D input")
    if p.pooling_convention == "same" and len(data) != 3:
        raise ValueError("Pooling: Input data should be 3D in (batch, channel, x). Currently 'same' supports "
                         "Max Pooling 1-D")
    kernel, stride, pad = p.window(data)
    if p.global_pool:
        return (data[0], data[1]) + (1,) * (len(data) - 2)
    sp = []
    for x, k, s, pd in zip(data[2:], kernel, stride, pad):
        if p.pooling_convention == "full":
            sp.append(1 + int(math.ceil((x + 2 * pd - k) / s)))
        elif p.pooling_convention == "same":
            sp.append((x + s - 1) // s)
        else:
            sp.append(1 + (x + 2 * pd - k) // s)
    return (data[0], data[1]) + tuple(sp)


def _pool_outputs(p: PoolingParam) -> list[str]:
    # MXNet 1.9.1 builds (oneDNN) give max pooling a hidden workspace output (GetNumOutputs)
    return ["output", "workspace"] if p.pool_type == "max" else ["output"]


def _pool_shape_all(p, ins, outs):
    ins, res = _pool_shape(p, ins, outs[:1])
    return ins, list(res) + [res[0]] * (len(outs) - 1)


Pooling = define("Pooling", params=PoolingParam, outputs=_pool_outputs, num_visible=lambda p: 1,
                 infer_shape=_pool_shape_all, infer_type=same_dtype)


# --- Activation / LeakyReLU ---
@dataclass(frozen=True)
class ActivationParam:
    act_type: Literal["relu", "sigmoid", "tanh", "softrelu", "softsign", "log_sigmoid", "mish"]


Activation = define("Activation", params=ActivationParam, listed_inputs=False,
                    infer_shape=same_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class LeakyReLUParam:
    act_type: Literal["elu", "gelu", "leaky", "prelu", "rrelu", "selu"] = "leaky"
    slope: float = 0.25
    lower_bound: float = 0.125
    upper_bound: float = 0.334


def _lrelu_shape(p: LeakyReLUParam, ins, outs):
    s = merge(ins[0], outs[0])
    res = [s]
    if p.act_type == "prelu":
        gamma = ins[1]
        if s is not None and s[1] >= 0 and gamma is None:
            gamma = (s[1],)
        res.append(gamma)
    return res, [s] * len(outs)   # rrelu's hidden mask has the data's shape


LeakyReLU = define(
    "LeakyReLU", params=LeakyReLUParam,
    inputs=lambda p: ["data", "gamma"] if p.act_type == "prelu" else ["data"],
    outputs=lambda p: ["output", "mask"] if p.act_type == "rrelu" else ["output"],
    num_visible=lambda p: 1, aux_init={"gamma": '["Constant", {"value": 0.25}]'}, infer_shape=_lrelu_shape, infer_type=same_dtype)


# --- BatchNorm (src/operator/nn/batch_norm.cc, BatchNormShape) ---
@dataclass(frozen=True)
class BatchNormParam:
    eps: float = 1e-3
    momentum: float = 0.9
    fix_gamma: bool = True
    use_global_stats: bool = False
    output_mean_var: bool = False
    axis: int = 1
    cudnn_off: bool = False
    min_calib_range: Optional[float] = None
    max_calib_range: Optional[float] = None


def _bn_shape(p: BatchNormParam, ins, outs):
    data = merge(ins[0], outs[0])
    ins = list(ins)
    if data is not None and known(data):
        axis = p.axis + len(data) if p.axis < 0 else p.axis
        c = (data[axis],)
        ins[1:5] = [c, c, c, c]
        return [data] + ins[1:], [data, c, c]
    return [data] + ins[1:], [data] + list(outs[1:])


BatchNorm = define(
    "BatchNorm", params=BatchNormParam,
    inputs=["data", "gamma", "beta", "moving_mean", "moving_var"],
    aux=["moving_mean", "moving_var"], outputs=["output", "mean", "var"],
    num_visible=lambda p: 3 if p.output_mean_var else 1,
    aux_init={"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'},
    infer_shape=_bn_shape, infer_type=same_dtype)


# --- Dropout / LRN / UpSampling ---
@dataclass(frozen=True)
class DropoutParam:
    p: float = 0.5
    mode: Literal["training", "always"] = "training"
    axes: Shape = ()
    cudnn_off: Optional[bool] = False


Dropout = define("Dropout", params=DropoutParam, outputs=["output", "mask"], num_visible=lambda p: 1,
                 infer_shape=same_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class LRNParam:
    nsize: int
    alpha: float = 1e-4
    beta: float = 0.75
    knorm: float = 2.0


LRN = define("LRN", params=LRNParam, outputs=["output", "tmp_norm"], num_visible=lambda p: 1,
             infer_shape=same_shape, infer_type=same_dtype)


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
    if not all(known(s) for s in ins):
        return ins, outs
    oh, ow = ins[0][2] * p.scale, ins[0][3] * p.scale
    c = sum(s[1] for s in ins) if p.multi_input_mode == "concat" else ins[0][1]
    return ins, [(ins[0][0], c, oh, ow)]


UpSampling = define(
    "UpSampling", params=UpSamplingParam, variadic="num_args",
    infer_shape=_upsampling_shape, infer_type=same_dtype)
# bilinear takes (data, weight): a fixed pair, not a variadic list
UpSampling.input_names = lambda p: (["data", "weight"] if p.sample_type == "bilinear"  # type: ignore[method-assign]
                                    else [f"arg{i}" for i in range(p.num_args)])


# --- Embedding (src/operator/tensor/indexing_op.cc) ---
@dataclass(frozen=True)
class EmbeddingParam:
    input_dim: int
    output_dim: int
    dtype: str = "float32"
    sparse_grad: bool = False


def _embedding_shape(p: EmbeddingParam, ins, outs):
    ins = list(ins)
    ins[1] = (p.input_dim, p.output_dim)
    if known(ins[0]):
        return ins, [tuple(ins[0]) + (p.output_dim,)]
    return ins, outs


def _embedding_type(p: EmbeddingParam, ins, outs):
    t = np.dtype(p.dtype)
    return [ins[0] if ins[0] is not None else t, t], [t]


Embedding = define("Embedding", params=EmbeddingParam, inputs=["data", "weight"],
                   no_grad_inputs=("data",), infer_shape=_embedding_shape, infer_type=_embedding_type)


# ---------------------------------------------------------------- lowering rules
from .registry import lowers, rematerializes  # noqa: E402


@lowers(FullyConnected)
def _fc_lower(ctx, p: FullyConnectedParam, x, w, bias=None):
    b = ctx.b
    if p.flatten:
        x = b.reshape(x, (x.shape[0], prod(x.shape[1:])))
    y = b.dot_general(x, w, contract=([x.ndim - 1], [1]))
    if bias is not None:
        y = b.add(y, b.broadcast_in_dim(bias, y.shape, [y.ndim - 1]))
    return y


def activation(b, act_type: str, x):
    """Shared by Activation and the unary ops of the same names."""
    if act_type == "relu":
        return b.max(x, 0.0)
    if act_type == "sigmoid":
        return b.logistic(x)
    if act_type == "tanh":
        return b.tanh(x)
    if act_type == "softrelu":  # log(1 + exp(x)), stable for large |x|
        return b.add(b.max(x, 0.0), b.unary("log_plus_one", b.exp(b.neg(b.abs(x)))))
    if act_type == "softsign":
        return b.div(x, b.add(b.abs(x), 1.0))
    if act_type == "log_sigmoid":
        return b.neg(activation(b, "softrelu", b.neg(x)))
    if act_type == "mish":
        return b.mul(x, b.tanh(activation(b, "softrelu", x)))
    raise ValueError(f"unknown act_type {act_type}")


@lowers(Activation)
def _activation_lower(ctx, p: ActivationParam, x):
    return activation(ctx.b, p.act_type, x)


# --- Convolution / Deconvolution lowering ---
def _conv_spec(nd: int) -> str:
    sp = ", ".join(str(i) for i in range(nd))
    return f"[b, f, {sp}]x[o, i, {sp}]->[b, f, {sp}]"


def _add_channel_bias(b, y, bias):
    return y if bias is None else b.add(y, b.broadcast_in_dim(bias, y.shape, [1]))


def _convolve(b, x, w, out_shape, stride, pads, lhs_dilation, rhs_dilation, groups):
    """stablehlo.convolution; negative pads (crops) become a slice of a non-negative one."""
    nd = x.ndim - 2
    cg, og = x.shape[1] // groups, out_shape[1] // groups
    if groups > 1 and cg > 1:
        # IREE 3.13's Vulkan path miscompiles feature_group_count > 1 unless depthwise
        # (wrong values, no error): one convolution per group instead
        parts = []
        for g in range(groups):
            xg = b.slice(x, [0, g * cg] + [0] * nd, (x.shape[0], (g + 1) * cg) + x.shape[2:])
            wg = b.slice(w, [g * og] + [0] * (w.ndim - 1), ((g + 1) * og,) + w.shape[1:])
            parts.append(_convolve(b, xg, wg, (out_shape[0], og) + tuple(out_shape[2:]), stride, pads,
                                   lhs_dilation, rhs_dilation, 1))
        return b.concatenate(parts, 1)
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    if pos == list(pads):
        return b.convolution(x, w, out_shape, stride, pads, lhs_dilation, rhs_dilation, groups, _conv_spec(nd))
    full = list(out_shape[:2])
    for i, (lo, hi) in enumerate(pads):
        full.append(out_shape[2 + i] + max(-lo, 0) + max(-hi, 0))  # only unit stride reaches here
    y = b.convolution(x, w, full, stride, pos, lhs_dilation, rhs_dilation, groups, _conv_spec(nd))
    start = [0, 0] + [max(-lo, 0) for lo, _ in pads]
    return b.slice(y, start, [s + o for s, o in zip(start, out_shape)])


@lowers(Convolution)
def _conv_lower(ctx, p: ConvolutionParam, x, w, bias=None):
    nd = len(p.kernel)
    pads = [(q, q) for q in p.spatial("pad", 0)]
    y = _convolve(ctx.b, x, w, ctx.out_shapes[0], p.spatial("stride", 1), pads, (1,) * nd,
                  p.spatial("dilate", 1), p.num_group)
    return _add_channel_bias(ctx.b, y, bias)


def transposed_conv(b, x, w, out_shape, kernel, stride, dilate, pad, groups: int):
    """MXNet Deconvolution: weight (C_in, C_out/g, k...) -> a stride-dilated input convolved
    with the spatially flipped kernel, in/out channels swapped within each group."""
    nd = len(kernel)
    cin, cout = x.shape[1], out_shape[1]
    sp = tuple(range(3, 3 + nd))
    w = b.reshape(w, (groups, cin // groups, cout // groups) + tuple(kernel))
    w = b.reshape(b.transpose(w, (0, 2, 1) + sp), (cout, cin // groups) + tuple(kernel))
    w = b.reverse(w, list(range(2, 2 + nd)))
    pads = []
    for xi, oi, k, s, d, q in zip(x.shape[2:], out_shape[2:], kernel, stride, dilate, pad):
        lo = d * (k - 1) - q
        pads.append((lo, oi - s * (xi - 1) - 1 + q))   # high side absorbs adj / target_shape
    return _convolve(b, x, w, out_shape, (1,) * nd, pads, stride, dilate, groups)


def _deconv_pad(p: DeconvolutionParam, in_sp) -> tuple[int, ...]:
    """DeconvolutionParam::InferPad: target_shape overrides pad (adj follows from out shape)."""
    if p.target_shape and any(p.target_shape):
        stride, dilate = p.spatial("stride", 1), p.spatial("dilate", 1)
        return tuple((s * (x - 1) + d * (k - 1) + 1 - t + 1) // 2
                     for x, k, s, d, t in zip(in_sp, p.kernel, stride, dilate, p.target_shape))
    return p.spatial("pad", 0)


@lowers(Deconvolution)
def _deconv_lower(ctx, p: DeconvolutionParam, x, w, bias=None):
    y = transposed_conv(ctx.b, x, w, ctx.out_shapes[0], p.kernel, p.spatial("stride", 1),
                        p.spatial("dilate", 1), _deconv_pad(p, x.shape[2:]), p.num_group)
    return _add_channel_bias(ctx.b, y, bias)


# --- Pooling lowering ---
def _pool_counts(x: int, out: int, k: int, s: int, q: int, include_pad: bool):
    """Divisor of avg pooling per output position along one axis, as MXNet's pool.h: the window
    clipped to [-pad, x+pad) (or to [0, x) without count_include_pad)."""
    counts = []
    for o in range(out):
        start = o * s - q
        end = min(start + k, x + q)
        counts.append(end - start if include_pad else min(end, x) - max(start, 0))
    return counts


@lowers(Pooling)
def _pool_lower(ctx, p: PoolingParam, x):
    b = ctx.b
    if p.pooling_convention == "same" and not p.global_pool:
        raise AotexecError(f"Pooling with pooling_convention='same' (1-D max pooling in MXNet 1.9) is not "
                           f"lowered yet (node '{ctx.node.name}')")
    out, in_sp = ctx.out_shapes[0], x.shape[2:]
    kernel, stride, pad = p.window(x.shape)
    window, strides = (1, 1) + tuple(kernel), (1, 1) + tuple(stride)
    # high padding: `pad`, plus what the full convention's last window overhangs
    pads = [(0, 0), (0, 0)] + [(q, max((o - 1) * s + k - xi - q, 0))
                               for xi, o, k, s, q in zip(in_sp, out[2:], kernel, stride, pad)]
    # crop the tail no window reads: IREE 3.13 miscompiles e.g. a 2x2/2 window over 3x3 -> 1x1
    used = [min(xi, (o - 1) * s + k - q) for xi, o, k, s, q in zip(in_sp, out[2:], kernel, stride, pad)]
    if tuple(used) != in_sp:
        x = b.slice(x, [0] * x.ndim, x.shape[:2] + tuple(used))
    if p.pool_type == "max":
        return [b.reduce_window(x, "max", window, strides, pads, out), None]
    if p.pool_type == "lp":
        # pool_utils.h: x^p summed, then the p-th root; p = 1, 2, 3 exact (no abs, as MXNet)
        pv = p.p_value
        powers = {1: lambda v: v, 2: lambda v: b.mul(v, v), 3: lambda v: b.mul(b.mul(v, v), v)}
        roots = {1: lambda v: v, 2: b.sqrt, 3: lambda v: b.unary("cbrt", v)}
        y = b.reduce_window(powers.get(pv, lambda v: b.pow(v, float(pv)))(x), "add", window, strides, pads, out)
        return roots.get(pv, lambda v: b.pow(v, 1.0 / pv))(y)
    y = b.reduce_window(x, "add", window, strides, pads, out)
    if p.pool_type == "sum":
        return y
    include_pad = p.count_include_pad is None or p.count_include_pad
    per_axis = [_pool_counts(xi, o, k, s, q, include_pad)
                for xi, o, k, s, q in zip(in_sp, out[2:], kernel, stride, pad)]
    if all(c == per_axis[i][0] for i, cs in enumerate(per_axis) for c in cs):
        return b.div(y, float(prod(cs[0] for cs in per_axis)))
    div = None
    for i, cs in enumerate(per_axis):
        c = b.broadcast_in_dim(b.constant(np.asarray(cs, dtype=x.dtype), (len(cs),), x.dtype), out, [2 + i])
        div = c if div is None else b.mul(div, c)
    return b.div(y, div)


# --- LeakyReLU lowering ---
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_LAMBDA = 1.0507009873554804934193349852946


@lowers(LeakyReLU)
def _leaky_relu_lower(ctx, p: LeakyReLUParam, x, gamma=None):
    b = ctx.b
    t = p.act_type
    if t == "gelu":  # erf form, as MXNet's mshadow_op::gelu
        return b.mul(b.mul(x, 0.5), b.add(b.op("chlo.erf", [b.mul(x, 1 / math.sqrt(2))], x.shape), 1.0))
    expm1 = lambda v: b.unary("exponential_minus_one", v)  # noqa: E731
    if t == "leaky":
        neg = b.mul(x, p.slope)
    elif t == "rrelu":
        if ctx.is_train:   # a slope ~ U(lower, upper) per element, kept in the hidden 'mask' output
            u = uniform(b, ctx.rng_state, ctx.node_index, x.shape, x.dtype)
            slope = b.add(b.mul(u, p.upper_bound - p.lower_bound), p.lower_bound)
            return [b.select(b.compare(x, 0.0, "GT"), x, b.mul(x, slope)), slope]
        neg = b.mul(x, (p.lower_bound + p.upper_bound) / 2)
    elif t == "prelu":
        g = b.reshape(gamma, ()) if gamma.shape == (1,) else gamma
        neg = b.mul(x, b.broadcast_in_dim(g, x.shape, [] if g.ndim == 0 else [1]))
    elif t == "elu":
        neg = b.mul(expm1(x), p.slope)
    elif t == "selu":
        neg = b.mul(expm1(x), _SELU_ALPHA)
    else:
        raise ValueError(f"unknown act_type {t}")
    y = b.select(b.compare(x, 0.0, "GT"), x, neg)
    if t == "selu":
        y = b.mul(y, _SELU_LAMBDA)
    return [y, None] if t == "rrelu" else y


# --- BatchNorm lowering ---
def batch_norm_stats(b, x, axis: int):
    """Batch mean and biased variance over all axes but ``axis`` (also what the moving
    averages are updated with)."""
    others = [i for i in range(x.ndim) if i != axis]
    n = float(prod(x.shape[i] for i in others))
    mean = b.div(b.reduce(x, others), n)
    xc = b.sub(x, b.broadcast_in_dim(mean, x.shape, [axis]))
    return mean, b.div(b.reduce(b.mul(xc, xc), others), n)


@lowers(BatchNorm)
def _batch_norm_lower(ctx, p: BatchNormParam, x, gamma, beta, moving_mean, moving_var):
    """Outputs [out, mean, inv_std]: MXNet 1.9.1 (native and oneDNN) writes 1/sqrt(var + eps)
    to the 'var' output, batch stats in training, moving stats otherwise."""
    b = ctx.b
    axis = p.axis % x.ndim
    if ctx.is_train and not p.use_global_stats:
        mean, var = batch_norm_stats(b, x, axis)
    else:
        mean, var = moving_mean, moving_var
    inv_std = b.rsqrt(b.add(var, p.eps))
    return [_batch_norm_normalize(b, p, x, gamma, beta, mean, inv_std), mean, inv_std]


def _batch_norm_normalize(b, p: BatchNormParam, x, gamma, beta, mean, inv_std):
    axis = p.axis % x.ndim
    bc = lambda v: b.broadcast_in_dim(v, x.shape, [axis])  # noqa: E731
    scale = inv_std if p.fix_gamma else b.mul(inv_std, gamma)
    return b.add(b.mul(b.sub(x, bc(mean)), bc(scale)), bc(beta))


@rematerializes(BatchNorm, lambda p: () if p.use_global_stats else (1, 2))
def _batch_norm_remat(ctx, p: BatchNormParam, x, gamma, beta, moving_mean, moving_var, mean=None, inv_std=None):
    """Recomputed in backward from forward's batch statistics (two reductions over x fewer;
    the same operations as forward, so the same values)."""
    if mean is None:                      # use_global_stats: nothing kept, nothing reduced
        return _batch_norm_lower(ctx, p, x, gamma, beta, moving_mean, moving_var)
    return [_batch_norm_normalize(ctx.b, p, x, gamma, beta, mean, inv_std), None, None]


# --- Dropout / LRN / UpSampling lowering ---
Dropout.random = True
Dropout.random_when = lambda p, is_train: p.p > 0 and (is_train or p.mode == "always")
LeakyReLU.random = True
LeakyReLU.random_when = lambda p, is_train: p.act_type == "rrelu" and is_train
_GOLDEN64 = 0x9E3779B97F4A7C15


def uniform(b, rng_state, node_index: int, shape, dtype):
    """U[0, 1) of ``shape`` from the (seed, counter) state: the state plus a per-node offset
    keys a first draw whose 128 bits seed the values' stream (so streams of consecutive
    counters do not overlap)."""
    # the offset is added as ui32 halves: IREE 3.13's Vulkan backend cannot legalize ui64 arithmetic
    h = (node_index + 1) * _GOLDEN64
    off = b.constant(np.asarray([[h & 0xFFFFFFFF, (h >> 32) & 0xFFFFFFFF], [0, 0]], dtype=np.uint32), (2, 2), "uint32")
    halves = b.op("stablehlo.bitcast_convert", [rng_state], (2, 2), "uint32")
    state = b.op("stablehlo.bitcast_convert", [b.add(halves, off)], (2,), "uint64")
    _, key = rng_bits(b, state, (2,), "uint64")
    _, bits = rng_bits(b, key, shape, "uint32")
    return b.mul(b.convert(b._bin("shift_right_logical", bits, 8), dtype), 1.0 / (1 << 24))   # [0, 1)


def dropout_mask(b, rng_state, node_index: int, shape, p: float, dtype):
    """Bernoulli(1 - p) / (1 - p) of ``shape``."""
    u = uniform(b, rng_state, node_index, shape, dtype)
    keep = b.compare(u, float(p), "GE")
    return b.select(keep, b.full_like(u, 1.0 / (1.0 - p)), b.full_like(u, 0.0))


@lowers(Dropout)
def _dropout_lower(ctx, p: DropoutParam, x):
    """Training (or mode='always'): y = x * mask, mask = Bernoulli(1-p)/(1-p), shared along ``axes``;
    output 1 keeps the mask for the gradient."""
    if p.p <= 0 or not (ctx.is_train or p.mode == "always"):
        return [x, None]
    b = ctx.b
    axes = {a % x.ndim for a in p.axes}
    mshape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    mask = dropout_mask(b, ctx.rng_state, ctx.node_index, mshape, p.p, x.dtype)
    if axes:
        mask = b.broadcast_in_dim(b.reshape(mask, tuple(d for i, d in enumerate(mshape) if i not in axes)),
                                  x.shape, [i for i in range(x.ndim) if i not in axes])
    return [b.mul(x, mask), mask]


@lowers(LRN)
def _lrn_lower(ctx, p: LRNParam, x):
    """out = x * (knorm + alpha/nsize * sum of x^2 over nsize channels around c)^-beta."""
    b = ctx.b
    n = p.nsize
    window = (1, n) + (1,) * (x.ndim - 2)
    pads = [(0, 0), (n // 2, n - 1 - n // 2)] + [(0, 0)] * (x.ndim - 2)
    s = b.reduce_window(b.mul(x, x), "add", window, (1,) * x.ndim, pads, x.shape)
    norm = b.add(b.mul(s, p.alpha / n), p.knorm)
    return [b.mul(x, b.pow(norm, -p.beta)), None]


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


# --- Embedding lowering ---
@lowers(Embedding)
def _embedding_lower(ctx, p: EmbeddingParam, ids, w):
    """Ids arrive as float: clip to [0, input_dim-1] (MXNet's take clip mode), then gather rows."""
    b = ctx.b
    if ids.dtype.kind == "f":
        ids = b.clamp(0.0, ids, float(p.input_dim - 1))
        idx = b.convert(ids, "int32")
    else:
        idx = b.clamp(0, b.convert(ids, "int32"), p.input_dim - 1)
    return b.gather_rows(w, idx, 0)


# ---------------------------------------------------------------- gradient rules
from .registry import differentiable  # noqa: E402
from ..emitter import rng_bits, scatter_add_rows  # noqa: E402


@differentiable(FullyConnected, ("ograd0", "in0", "in1"))
def _fc_grad(ctx, p: FullyConnectedParam, g, x, w):
    """MXNet's _backward_FullyConnected: [d data, d weight, d bias]."""
    b = ctx.b
    x2 = b.reshape(x, (x.shape[0], prod(x.shape[1:]))) if p.flatten else \
        b.reshape(x, (prod(x.shape[:-1]), x.shape[-1]))
    g2 = b.reshape(g, (x2.shape[0], p.num_hidden))
    dx = b.reshape(b.dot_general(g2, w, contract=([1], [0])), x.shape)
    dw = b.dot_general(g2, x2, contract=([0], [0]))
    grads = [dx, dw]
    if not p.no_bias:
        grads.append(b.reduce(g2, [0], "add"))
    return grads


def activation_grad(b, act_type: str, g, y):
    """d act / d x from the output y (MXNet computes these from the output too)."""
    if act_type == "relu":
        return b.select(b.compare(y, 0.0, "GT"), g, b.full_like(g, 0.0))
    if act_type == "sigmoid":
        return b.mul(g, b.mul(y, b.sub(b.full_like(y, 1.0), y)))
    if act_type == "tanh":
        return b.mul(g, b.sub(b.full_like(y, 1.0), b.mul(y, y)))
    if act_type == "softrelu":   # y = log(1 + e^x): dy/dx = 1 - e^-y
        return b.mul(g, b.sub(b.full_like(y, 1.0), b.exp(b.neg(y))))
    raise ValueError(f"activation_grad: {act_type} needs the input")


@differentiable(Activation, lambda p: ["ograd0", "in0" if p.act_type in ("softsign", "log_sigmoid", "mish") else "out0"])
def _activation_grad(ctx, p: ActivationParam, g, v):
    b = ctx.b
    if p.act_type == "softsign":   # v is x: d/dx x/(1+|x|) = 1/(1+|x|)^2
        d = b.add(b.abs(v), 1.0)
        return [b.div(g, b.mul(d, d))]
    if p.act_type == "log_sigmoid":   # v is x: 1 - sigmoid(x)
        return [b.mul(g, b.sub(b.full_like(v, 1.0), b.logistic(v)))]
    if p.act_type == "mish":   # v is x
        sp = activation(b, "softrelu", v)
        t = b.tanh(sp)
        dt = b.mul(b.sub(b.full_like(t, 1.0), b.mul(t, t)), b.logistic(v))
        return [b.mul(g, b.add(t, b.mul(v, dt)))]
    return [activation_grad(b, p.act_type, g, v)]


# --- Convolution / Deconvolution gradients ---
def _conv_weight_grad(b, x, g, kernel, stride, dilate, pad, groups: int):
    """d weight (F, C/groups, k...) of a convolution of data x (N, C, ...) giving g (N, F, o...):
    dw[f, c, j] = sum_{n, o} g[n, f, o] * xpad[n, c, o*s + j*d], a convolution of x (batch and
    feature swapped) with g as kernel: window stride = dilation, kernel dilation = stride."""
    nd = len(kernel)
    sp = tuple(range(2, 2 + nd))
    need = [(k - 1) * d + (o - 1) * s + 1 for k, d, s, o in zip(kernel, dilate, stride, g.shape[2:])]
    xp = b.pad(x, 0.0, [0, 0] + list(pad),
               [0, 0] + [max(n - q - xi, 0) for n, q, xi in zip(need, pad, x.shape[2:])])
    if tuple(xp.shape[2:]) != tuple(need):
        xp = b.slice(xp, [0] * x.ndim, tuple(xp.shape[:2]) + tuple(need))
    cg, og = x.shape[1] // groups, g.shape[1] // groups
    parts = []
    for gi in range(groups):
        xg = xp if groups == 1 else b.slice(xp, [0, gi * cg] + [0] * nd, (xp.shape[0], (gi + 1) * cg) + xp.shape[2:])
        gg = g if groups == 1 else b.slice(g, [0, gi * og] + [0] * nd, (g.shape[0], (gi + 1) * og) + g.shape[2:])
        y = b.convolution(b.transpose(xg, (1, 0) + sp), b.transpose(gg, (1, 0) + sp), (cg, og) + tuple(kernel),
                          tuple(dilate), [(0, 0)] * nd, (1,) * nd, tuple(stride), 1, _conv_spec(nd))
        parts.append(b.transpose(y, (1, 0) + sp))
    return b.concatenate(parts, 0)


def _channel_sum(b, g):
    """The bias gradient. Where the weight gradient made no fenced layout copy of g (which
    ``Emitter.reduce`` sums instead, see there), over the batch first, then space: one
    reduction over all of them, fused with the weight gradient's contraction, made IREE
    3.13's llvm-cpu codegen fail at random (invalid vector.contract; 1 compile in 3 of the
    same module: train_step of a 3-channel conv-BatchNorm net with its BatchNorm recomputed)."""
    dims = [i for i in range(g.ndim) if i != 1]
    if g.ndim < 3 or b.has_fenced_view(g):
        return b.reduce(g, dims, "add")
    return b.reduce(b.reduce(g, [0], "add"), [d - 1 for d in dims[1:]], "add")


@differentiable(Convolution, ("ograd0", "in0", "in1"))
def _conv_grad(ctx, p: ConvolutionParam, g, x, w):
    """[d data (a transposed convolution of g), d weight, d bias]."""
    b = ctx.b
    stride, dilate, pad = p.spatial("stride", 1), p.spatial("dilate", 1), p.spatial("pad", 0)
    dx = transposed_conv(b, g, w, x.shape, p.kernel, stride, dilate, pad, p.num_group) if ctx.wants(0) else None
    dw = _conv_weight_grad(b, x, g, p.kernel, stride, dilate, pad, p.num_group) if ctx.wants(1) else None
    return [dx, dw] if p.no_bias else [dx, dw, _channel_sum(b, g)]


def _deconv_data_grad(b, g, w, x_shape, kernel, stride, dilate, pad, groups):
    """A convolution of g with the deconvolution's weight; the high pad drops what adj added."""
    pads = []
    for xi, oi, k, s, d, q in zip(x_shape[2:], g.shape[2:], kernel, stride, dilate, pad):
        adj = oi - (s * (xi - 1) + d * (k - 1) + 1 - 2 * q)
        pads.append((q, max(q - adj, 0)))
    return _convolve(b, g, w, x_shape, stride, pads, (1,) * len(kernel), dilate, groups)


@differentiable(Deconvolution, ("ograd0", "in0", "in1"))
def _deconv_grad(ctx, p: DeconvolutionParam, g, x, w):
    b = ctx.b
    stride, dilate = p.spatial("stride", 1), p.spatial("dilate", 1)
    pad = _deconv_pad(p, x.shape[2:])
    dx = _deconv_data_grad(b, g, w, x.shape, p.kernel, stride, dilate, pad, p.num_group) if ctx.wants(0) else None
    # y[o*s + j*d - q] += x[i] w[j]: the weight gradient of a convolution of g by x
    dw = _conv_weight_grad(b, g, x, p.kernel, stride, dilate, pad, p.num_group) if ctx.wants(1) else None
    return [dx, dw] if p.no_bias else [dx, dw, _channel_sum(b, g)]


# --- Pooling gradient ---
def _pool_geometry(p: PoolingParam, xshape, out):
    """Forward's (kernel, stride, pad, used input extent, high pad) per spatial axis."""
    kernel, stride, pad = p.window(xshape)
    in_sp = xshape[2:]
    used = [min(xi, (o - 1) * s + k - q) for xi, o, k, s, q in zip(in_sp, out[2:], kernel, stride, pad)]
    hi = [max((o - 1) * s + k - xi - q, 0) for xi, o, k, s, q in zip(in_sp, out[2:], kernel, stride, pad)]
    return kernel, stride, pad, used, hi


def _spread_windows(b, t, kernel, stride, padded_sp):
    """sum over the windows covering each (padded) input position of t (shape out):
    t dilated by the stride, then a unit-stride window sum."""
    nd = len(kernel)
    dil = [(o - 1) * s + 1 for o, s in zip(t.shape[2:], stride)]
    tp = b.pad(t, 0.0, [0, 0] + [k - 1 for k in kernel], [0, 0] + [L - D for L, D in zip(padded_sp, dil)],
               [0, 0] + [s - 1 for s in stride])
    return b.reduce_window(tp, "add", (1, 1) + tuple(kernel), (1,) * (nd + 2), [(0, 0)] * (nd + 2),
                           tuple(t.shape[:2]) + tuple(padded_sp))


def _max_pool_scatter_tiled(b, xp, g, kernel):
    """Non-overlapping windows tiling xp: split each spatial axis into (out, kernel), mark the
    first maximum of each window (smallest row-major offset), and route g there."""
    nd = len(kernel)
    out = g.shape
    split = tuple(out[:2]) + tuple(d for o, k in zip(out[2:], kernel) for d in (o, k))
    inner = [3 + 2 * i for i in range(nd)]
    outer = [0, 1] + [2 + 2 * i for i in range(nd)]
    xs = b.reshape(xp, split)
    y = b.reduce(xs, inner, "max")
    eq = b.compare(xs, b.broadcast_in_dim(y, split, outer), "EQ")
    pos = None     # row-major offset inside the window
    for i, k in enumerate(kernel):
        term = b.iota(split, inner[i], "int32")
        stride_i = int(np.prod(kernel[i + 1:])) if i + 1 < nd else 1
        term = b.mul(term, stride_i) if stride_i != 1 else term
        pos = term if pos is None else b.add(pos, term)
    big = b.full_like(pos, int(np.prod(kernel)))
    first = b.reduce(b.select(eq, pos, big), inner, "min")
    hit = b.compare(pos, b.broadcast_in_dim(first, split, outer), "EQ")
    gs = b.broadcast_in_dim(g, split, outer)
    return b.reshape(b.select(hit, gs, b.full_like(gs, 0.0)), xp.shape)


def _max_pool_scatter(b, xp, g, kernel, stride):
    """Each window's g goes to the first maximum of the (-inf padded) input xp, as MXNet's
    pool.h: per kernel offset, a strided slice compared with the window max picks where g goes;
    the K picks (batch and channel merged, K as features) go back to input positions by one
    transposed convolution with a one-hot kernel.  (IREE 3.13 does not compile select_and_scatter
    with overlapping windows, nor a sum of interior-padded slices.)"""
    nd = len(kernel)
    out = g.shape
    if tuple(kernel) == tuple(stride) and all(L == o * k for L, o, k in zip(xp.shape[2:], out[2:], kernel)):
        return _max_pool_scatter_tiled(b, xp, g, kernel)
    nc = out[0] * out[1]
    y = b.reduce_window(xp, "max", (1, 1) + tuple(kernel), (1, 1) + tuple(stride), [(0, 0)] * (nd + 2), out)
    zero = b.full_like(g, 0.0)
    offsets = list(itertools.product(*[range(k) for k in kernel]))
    taken, picks = None, []
    for off in offsets:
        limit = tuple(out[:2]) + tuple(f + (o - 1) * s + 1 for f, o, s in zip(off, out[2:], stride))
        eq = b.compare(b.slice(xp, [0, 0] + list(off), limit, (1, 1) + tuple(stride)), y, "EQ")
        if taken is None:
            taken = eq
        else:
            eq = b.op("stablehlo.and", [eq, b.op("stablehlo.not", [taken], taken.shape)], eq.shape)
            taken = b.op("stablehlo.or", [taken, eq], eq.shape)
        picks.append(b.reshape(b.select(eq, g, zero), (nc, 1) + tuple(out[2:])))
    m = b.concatenate(picks, 1)                                   # (N*C, K, o...)
    # w[0, j, t] = 1 where t = k-1-j (flipped, as a transposed convolution)
    w = np.zeros((1, len(offsets)) + tuple(kernel), dtype=g.dtype)
    for j, off in enumerate(offsets):
        w[(0, j) + tuple(k - 1 - f for k, f in zip(kernel, off))] = 1
    wv = b.constant(w, w.shape, g.dtype)
    dil = [(o - 1) * s + 1 for o, s in zip(out[2:], stride)]
    pads = [(k - 1, L - d) for k, L, d in zip(kernel, xp.shape[2:], dil)]
    r = b.convolution(m, wv, (nc, 1) + tuple(xp.shape[2:]), (1,) * nd, pads, tuple(stride), (1,) * nd, 1,
                      _conv_spec(nd))
    return b.reshape(r, xp.shape)


@differentiable(Pooling, lambda p: ["ograd0", "in0", "out0"] if p.pool_type == "lp"
                else (["ograd0", "in0"] if p.pool_type == "max" else ["ograd0"]))
def _pool_grad(ctx, p: PoolingParam, g, x=None, y=None):
    b = ctx.b
    xshape, out = tuple(ctx.fwd_in_shapes[0]), tuple(ctx.fwd_out_shapes[0])
    kernel, stride, pad, used, hi = _pool_geometry(p, xshape, out)
    nd = len(kernel)
    padded = [q + u + h for q, u, h in zip(pad, used, hi)]
    crop = lambda v: b.slice(v, [0] * v.ndim, tuple(v.shape[:2]) + tuple(used)) \
        if tuple(v.shape[2:]) != tuple(used) else v  # noqa: E731
    if p.pool_type == "max":
        # IREE 3.13 on Vulkan miscompiles this rule fused with a producing convolution (LeNet's conv
        # data gradient arrives shifted by a row): keep g a materialized tensor
        g = b.op("stablehlo.optimization_barrier", [g], g.shape)
        dxp = _max_pool_scatter(b, b.pad(crop(x), -math.inf, [0, 0] + list(pad), [0, 0] + list(hi)), g,
                                kernel, stride)
    elif p.pool_type == "lp":
        pv = p.p_value
        t = g if pv == 1 else b.div(g, y if pv == 2 else b.pow(y, float(pv - 1)))
        dxp = _spread_windows(b, t, kernel, stride, padded)
    else:
        t = g
        if p.pool_type == "avg":
            include_pad = p.count_include_pad is None or p.count_include_pad
            per_axis = [_pool_counts(xi, o, k, s, q, include_pad)
                        for xi, o, k, s, q in zip(xshape[2:], out[2:], kernel, stride, pad)]
            for i, cs in enumerate(per_axis):
                c = b.broadcast_in_dim(b.constant(np.asarray(cs, dtype=g.dtype), (len(cs),), g.dtype), out, [2 + i])
                t = b.div(t, c)
        dxp = _spread_windows(b, t, kernel, stride, padded)
    dx = b.slice(dxp, [0, 0] + list(pad), tuple(out[:2]) + tuple(q + u for q, u in zip(pad, used)))
    if p.pool_type == "lp" and p.p_value != 1:
        xc = crop(x)
        dx = b.mul(dx, xc if p.p_value == 2 else b.pow(xc, float(p.p_value - 1)))
    if tuple(used) != tuple(xshape[2:]):
        dx = b.pad(dx, 0.0, [0] * (nd + 2), [0, 0] + [xi - u for xi, u in zip(xshape[2:], used)])
    return [dx]


# --- LeakyReLU gradient ---
@differentiable(LeakyReLU, lambda p: ["ograd0", "in0", "in1"] if p.act_type == "prelu" else
                ["ograd0", "in0", "out1"] if p.act_type == "rrelu" else ["ograd0", "in0"])
def _leaky_relu_grad(ctx, p: LeakyReLUParam, g, x, gamma=None):
    b = ctx.b
    t = p.act_type
    pos = b.compare(x, 0.0, "GT")
    zero = b.full_like(x, 0.0)
    if t == "rrelu":   # gamma: the slopes forward drew (its 'mask' output)
        return [b.select(pos, g, b.mul(g, gamma))]
    if t == "gelu":   # 0.5 (1 + erf(x/sqrt2)) + x exp(-x^2/2) / sqrt(2 pi)
        cdf = b.mul(b.add(b.op("chlo.erf", [b.mul(x, 1 / math.sqrt(2))], x.shape), 1.0), 0.5)
        pdf = b.mul(b.exp(b.mul(b.mul(x, x), -0.5)), 1 / math.sqrt(2 * math.pi))
        return [b.mul(g, b.add(cdf, b.mul(x, pdf)))]
    if t == "leaky":
        return [b.select(pos, g, b.mul(g, p.slope))]
    if t == "elu":
        return [b.select(pos, g, b.mul(g, b.mul(b.exp(x), p.slope)))]
    if t == "selu":
        return [b.mul(b.select(pos, g, b.mul(g, b.mul(b.exp(x), _SELU_ALPHA))), _SELU_LAMBDA)]
    if t == "prelu":
        gs = b.reshape(gamma, ()) if gamma.shape == (1,) else gamma
        gb = b.broadcast_in_dim(gs, x.shape, [] if gs.ndim == 0 else [1])
        dx = b.select(pos, g, b.mul(g, gb))
        gx = b.mul(g, b.select(pos, zero, x))
        dgamma = b.reduce(gx, [i for i in range(x.ndim) if not (gs.ndim == 1 and i == 1)], "add")
        return [dx, b.reshape(dgamma, gamma.shape)]
    raise AotexecError(f"LeakyReLU {t} has no gradient rule in aotexec (node '{ctx.node.name}')")


# --- BatchNorm gradient (and the moving-stat update, done in backward as MXNet 1.9.1) ---
@differentiable(BatchNorm, ("ograd0", "in0", "in1", "in3", "in4", "out1", "out2"), aux_updates=2)
def _batch_norm_grad(ctx, p: BatchNormParam, g, x, gamma, moving_mean, moving_var, mean, inv_std):
    """out1/out2 hold the statistics forward normalized with (batch ones in training, the moving
    ones with use_global_stats) as mean and 1/sqrt(var + eps)."""
    b = ctx.b
    axis = p.axis % x.ndim
    others = [i for i in range(x.ndim) if i != axis]
    n = float(prod(x.shape[i] for i in others))
    bc = lambda v: b.broadcast_in_dim(v, x.shape, [axis])  # noqa: E731
    xc = b.sub(x, bc(mean))
    xhat = b.mul(xc, bc(inv_std))
    dbeta = b.reduce(g, others, "add")
    dgamma_raw = b.reduce(b.mul(g, xhat), others, "add")
    scale = inv_std if p.fix_gamma else b.mul(inv_std, gamma)
    if p.use_global_stats:
        dx = b.mul(g, bc(scale))
        # unchanged; a computed copy, not the input itself (the runtime copies results into the
        # aux arrays, and Vulkan rejects a copy of a buffer onto itself)
        new_mean, new_var = b.add(moving_mean, 0.0), b.add(moving_var, 0.0)
    else:
        inner = b.sub(b.sub(b.mul(g, n), bc(dbeta)), b.mul(xhat, bc(dgamma_raw)))
        dx = b.mul(inner, bc(b.div(scale, n)))
        # the biased batch variance, from forward's 1/sqrt(var + eps) rather than another pass
        # over x (a reduction fused with xhat's producer, which IREE's SPIR-V codegen could not
        # fit in workgroup memory at batch 8 x 8 channels x 16 x 16)
        var = b.max(b.sub(b.div(1.0, b.mul(inv_std, inv_std)), p.eps), 0.0)
        m = p.momentum
        new_mean = b.add(b.mul(moving_mean, m), b.mul(mean, 1.0 - m))
        new_var = b.add(b.mul(moving_var, m), b.mul(var, 1.0 - m))
    dgamma = b.full_like(gamma, 0.0) if p.fix_gamma else dgamma_raw
    return [dx, dgamma, dbeta, new_mean, new_var]


# --- Dropout gradient ---
@differentiable(Dropout, lambda p: ["ograd0", "out1"] if p.p > 0 else ["ograd0"])
def _dropout_grad(ctx, p: DropoutParam, g, mask=None):
    return [g if mask is None else ctx.b.mul(g, mask)]


# --- LRN gradient ---
@differentiable(LRN, ("ograd0", "in0"))
def _lrn_grad(ctx, p: LRNParam, g, x):
    """dx = g norm^-beta - 2 alpha beta / n * x * sum_{j: x in window(j)} g_j x_j norm_j^(-beta-1)."""
    b = ctx.b
    n = p.nsize
    window = (1, n) + (1,) * (x.ndim - 2)
    unit = (1,) * x.ndim
    s = b.reduce_window(b.mul(x, x), "add", window, unit, [(0, 0), (n // 2, n - 1 - n // 2)] + [(0, 0)] * (x.ndim - 2),
                        x.shape)
    norm = b.add(b.mul(s, p.alpha / n), p.knorm)
    t = b.mul(b.mul(g, x), b.pow(norm, -p.beta - 1.0))
    u = b.reduce_window(t, "add", window, unit, [(0, 0), (n - 1 - n // 2, n // 2)] + [(0, 0)] * (x.ndim - 2),
                        x.shape)
    return [b.sub(b.mul(g, b.pow(norm, -p.beta)), b.mul(b.mul(x, u), 2.0 * p.alpha * p.beta / n))]


# --- UpSampling gradient ---
@differentiable(UpSampling, lambda p: ["ograd0", "in0", "in1"] if p.sample_type == "bilinear" else ["ograd0"])
def _upsampling_grad(ctx, p: UpSamplingParam, g, x=None, w=None):
    b = ctx.b
    if p.sample_type == "bilinear":
        k, s = 2 * p.scale - p.scale % 2, p.scale
        q = int(math.ceil((p.scale - 1) / 2))
        c = x.shape[1]
        dx = _deconv_data_grad(b, g, w, x.shape, (k, k), (s, s), (1, 1), (q, q), c)
        dw = _conv_weight_grad(b, g, x, (k, k), (s, s), (1, 1), (q, q), c)
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


# --- Embedding gradient ---
@differentiable(Embedding, ("ograd0", "in0"))
def _embedding_grad(ctx, p: EmbeddingParam, g, ids):
    """The weight gets the head-gradient rows added at the (clipped) ids; ids get none."""
    b = ctx.b
    if ids.dtype.kind == "f":
        idx = b.convert(b.clamp(0.0, ids, float(p.input_dim - 1)), "int32")
    else:
        idx = b.clamp(0, b.convert(ids, "int32"), p.input_dim - 1)
    return [None, scatter_add_rows(b, (p.input_dim, p.output_dim), idx, g, 0)]
