"""Neural-network layers: FullyConnected, Convolution, Deconvolution, Pooling,
Activation, LeakyReLU, BatchNorm, Dropout, LRN, UpSampling, Embedding.

Each op mirrors MXNet 1.9.1 ``src/operator/nn/*`` (parameters, defaults,
input/aux/output names, shape rules).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

from .params import Shape
from .registry import define
from .rules import (dtype_of_first, first_input_shape, forward, known, merge, prod,
                    same_dtype, same_shape)


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
    if data is not None and known(data):
        k = prod(data[1:]) if p.flatten else data[-1]
        ins[1] = (p.num_hidden, k)
        if not p.no_bias:
            ins[2] = (p.num_hidden,)
        out = (data[0], p.num_hidden) if p.flatten else tuple(data[:-1]) + (p.num_hidden,)
    elif data is not None and p.flatten and data[0] >= 0:
        out = merge(out, (data[0], p.num_hidden))
    if out is not None and data is not None and p.flatten and out[0] >= 0 and data[0] < 0:
        ins[0] = (out[0],) + tuple(data[1:])
    return ins, [out]


FullyConnected = define(
    "FullyConnected", params=FullyConnectedParam,
    inputs=lambda p: ["data", "weight"] if p.no_bias else ["data", "weight", "bias"],
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


Convolution = define(
    "Convolution", params=ConvolutionParam,
    inputs=lambda p: ["data", "weight"] if p.no_bias else ["data", "weight", "bias"],
    infer_shape=_conv_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class DeconvolutionParam:
    kernel: Shape
    num_filter: int
    stride: Shape = ()
    dilate: Shape = ()
    pad: Shape = ()
    adj: Shape = ()
    target_shape: Shape = ()
    num_group: int = 1
    workspace: int = 512
    no_bias: bool = True
    cudnn_tune: Optional[str] = None
    cudnn_off: bool = False
    layout: Optional[str] = None

    spatial = ConvolutionParam.spatial


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


Deconvolution = define(
    "Deconvolution", params=DeconvolutionParam,
    inputs=lambda p: ["data", "weight"] if p.no_bias else ["data", "weight", "bias"],
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


Activation = define("Activation", params=ActivationParam, infer_shape=same_shape, infer_type=same_dtype)


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
    return res, [s] + list(outs[1:])


LeakyReLU = define(
    "LeakyReLU", params=LeakyReLUParam,
    inputs=lambda p: ["data", "gamma"] if p.act_type == "prelu" else ["data"],
    outputs=lambda p: ["output", "mask"] if p.act_type == "rrelu" else ["output"],
    num_visible=lambda p: 1, infer_shape=_lrelu_shape, infer_type=same_dtype)


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
    import numpy as np
    t = np.dtype(p.dtype)
    return [ins[0] if ins[0] is not None else t, t], [t]


Embedding = define("Embedding", params=EmbeddingParam, inputs=["data", "weight"],
                   no_grad_inputs=("data",), infer_shape=_embedding_shape, infer_type=_embedding_type)


# ---------------------------------------------------------------- lowering rules
from .registry import lowers  # noqa: E402


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
