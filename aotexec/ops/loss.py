"""Softmax family and loss heads: softmax, log_softmax, SoftmaxActivation,
SoftmaxOutput, Linear/Logistic/MAE RegressionOutput, MakeLoss, softmax_cross_entropy, smooth_l1.

Mirrors MXNet 1.9.1 src/operator/softmax_output.cc, regression_output.cc,
make_loss.cc, nn/softmax.cc, loss_binary_op.cc; smooth_l1 from
tensor/elemwise_binary_scalar_op_extended.cc.  Loss heads (``is_loss``) need no head gradient.
Each op's parameters, shape rule, lowering and gradient stand together.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Optional

import numpy as np

from ..base import AotexecError
from .elemwise import ScalarParam
from .registry import OpDef, define, differentiable, lowers
from .rules import dtype_of_first, known, merge, prod, same_dtype, same_shape, shape_str


# --- softmax family ---
def softmax_values(b, x, axis: int, temperature: float | None = None, log: bool = False):
    """Numerically stable (log-)softmax along ``axis``; float16 computes in float32 (MXNet
    accumulates float16 softmax in float32; IREE 3.13's llvm-cpu also failed to link the fused
    float16 form: undefined fmaxf)."""
    if np.dtype(x.dtype) == np.float16:
        return b.convert(softmax_values(b, b.convert(x, "float32"), axis, temperature, log), x.dtype)
    axis = axis % x.ndim
    if temperature is not None and temperature != 1.0:
        x = b.div(x, temperature)
    keep = [i for i in range(x.ndim) if i != axis]
    m = b.broadcast_in_dim(b.reduce(x, [axis], "max"), x.shape, keep)
    z = b.sub(x, m)
    e = b.exp(z)
    s = b.broadcast_in_dim(b.reduce(e, [axis], "add"), x.shape, keep)
    return b.sub(z, b.log(s)) if log else b.div(e, s)


def _softmax_grad_values(b, g, y, axis: int, log: bool):
    """softmax: y (g - sum(g y)); log_softmax: g - exp(y) sum(g), along ``axis``."""
    keep = [i for i in range(y.ndim) if i != axis]
    if log:
        s = b.broadcast_in_dim(b.reduce(g, [axis], "add"), y.shape, keep)
        return b.sub(g, b.mul(b.exp(y), s))
    s = b.broadcast_in_dim(b.reduce(b.mul(g, y), [axis], "add"), y.shape, keep)
    return b.mul(y, b.sub(g, s))


def _softmax_op_grad(ctx, p: SoftmaxParam, g, y, log: bool):
    # with use_length the positions past the length have y = 0, so y (g - sum(g y)) is 0 there
    # and the sum runs over the valid positions only, as MXNet's masked rule; length gets none
    d = _softmax_grad_values(ctx.b, g, y, p.axis % y.ndim, log)
    if p.temperature is not None and p.temperature != 1.0:
        d = ctx.b.div(d, p.temperature)
    return [d]


@dataclass(frozen=True)
class SoftmaxParam:
    axis: int = -1
    temperature: Optional[float] = None
    dtype: Optional[str] = None
    use_length: Optional[bool] = False


def _softmax_shape(p: SoftmaxParam, ins, outs):
    """data and output alike; with use_length, length is data's shape without ``axis``."""
    data = merge(ins[0], outs[0])
    if not p.use_length:
        return [data], [data]
    length = ins[1]
    if known(data):
        axis = p.axis % len(data)
        length = merge(length, tuple(d for i, d in enumerate(data) if i != axis))
    return [data, length], [data]


def _softmax_inputs(p: SoftmaxParam) -> list[str]:
    return ["data", "length"] if p.use_length else ["data"]


softmax = define("softmax", params=SoftmaxParam, inputs=_softmax_inputs, infer_shape=_softmax_shape,
                 infer_type=dtype_of_first, inplace=True)


@lowers(softmax)
def _softmax_lower(ctx, p: SoftmaxParam, x, length=None):
    if length is None:
        return softmax_values(ctx.b, x, p.axis, p.temperature)
    # MXNet's masked softmax: positions at or past ``length`` along the axis output 0
    b = ctx.b
    axis = p.axis % x.ndim
    keep = [i for i in range(x.ndim) if i != axis]
    pos = b.iota(x.shape, axis, "int32")
    valid = b.compare(pos, b.broadcast_in_dim(b.convert(length, "int32"), x.shape, keep), "LT")
    xm = b.select(valid, x, b.full_like(x, -math.inf))
    y = softmax_values(b, xm, axis, p.temperature)
    return b.select(valid, y, b.full_like(y, 0.0))      # a zero length gives 0, not 0/0


@differentiable(softmax, ("ograd0", "out0"))
def _softmax_grad(ctx, p: SoftmaxParam, g, y):
    return _softmax_op_grad(ctx, p, g, y, log=False)


# softmin: softmax of -x (softmax.cc, negate=true); its gradient the negated softmax rule
softmin = define("softmin", params=SoftmaxParam, infer_shape=same_shape, infer_type=same_dtype, inplace=True)


@lowers(softmin)
def _softmin_lower(ctx, p: SoftmaxParam, x):
    return softmax_values(ctx.b, ctx.b.neg(x), p.axis, p.temperature)


@differentiable(softmin, ("ograd0", "out0"))
def _softmin_grad(ctx, p: SoftmaxParam, g, y):
    return [ctx.b.neg(_softmax_op_grad(ctx, p, g, y, log=False)[0])]


# MXNet 1.9.1's log_softmax takes no length input even with use_length (and then fails)
log_softmax = define("log_softmax", params=SoftmaxParam, infer_shape=same_shape, infer_type=same_dtype,
                     inplace=True)


@lowers(log_softmax)
def _log_softmax_lower(ctx, p: SoftmaxParam, x):
    if p.use_length:
        raise AotexecError(f"log_softmax with use_length=True takes no length input in MXNet 1.9.1 (which fails "
                           f"on it too); use softmax(data, length, use_length=True) (node '{ctx.node.name}')")
    return softmax_values(ctx.b, x, p.axis, p.temperature, log=True)


@differentiable(log_softmax, ("ograd0", "out0"))
def _log_softmax_grad(ctx, p: SoftmaxParam, g, y):
    return _softmax_op_grad(ctx, p, g, y, log=True)


@dataclass(frozen=True)
class SoftmaxActivationParam:
    mode: Literal["instance", "channel"] = "instance"


SoftmaxActivation = define("SoftmaxActivation", params=SoftmaxActivationParam, listed_inputs=False,
                           infer_shape=same_shape, infer_type=same_dtype)


@lowers(SoftmaxActivation)
def _softmax_activation_lower(ctx, p: SoftmaxActivationParam, x):
    if p.mode == "channel":
        return softmax_values(ctx.b, x, 1)
    b = ctx.b
    flat = b.reshape(x, (x.shape[0], prod(x.shape[1:])))
    return b.reshape(softmax_values(b, flat, 1), x.shape)


@differentiable(SoftmaxActivation, ("ograd0", "out0"))
def _softmax_activation_grad(ctx, p: SoftmaxActivationParam, g, y):
    b = ctx.b
    if p.mode == "channel":
        return [_softmax_grad_values(b, g, y, 1, log=False)]
    flat = (y.shape[0], prod(y.shape[1:]))
    d = _softmax_grad_values(b, b.reshape(g, flat), b.reshape(y, flat), 1, log=False)
    return [b.reshape(d, y.shape)]


# --- loss heads ---
@dataclass(frozen=True)
class SoftmaxOutputParam:
    grad_scale: float = 1.0
    ignore_label: float = -1.0
    multi_output: bool = False
    use_ignore: bool = False
    preserve_shape: bool = False
    normalization: Literal["null", "batch", "valid"] = "null"
    out_grad: bool = False
    smooth_alpha: float = 0.0


def _softmax_output_shape(p: SoftmaxOutputParam, ins, outs):
    """MXNet's SoftmaxOutputShape: a label of the data's shape holds probabilities; otherwise
    class ids shaped like the data without its class axis (multi_output: (N, rest), (N, d2..)
    or (N, 1, d2..))."""
    data, label = ins
    if data is None:
        return ins, outs
    if label != data:
        if p.multi_output:
            flat = (data[0], prod(data[2:]) if known(data[2:]) else -1)
            forms = (flat, (data[0],) + tuple(data[2:]), (data[0], 1) + tuple(data[2:]))
            if label is None:
                label = flat
            elif label not in forms:
                raise ValueError(f"Expecting {shape_str(forms[0])} or {shape_str(forms[1])}. "
                                 f"But got {shape_str(label)}")
        else:
            label = merge(label, tuple(data[:-1]))
    return [data, label], [data]


SoftmaxOutput = define(
    "SoftmaxOutput", "Softmax", params=SoftmaxOutputParam, inputs=["data", "label"],
    is_loss=True, no_grad_inputs=("label",),
    infer_shape=_softmax_output_shape, infer_type=same_dtype, inplace=True, mirror_kept=True)


@lowers(SoftmaxOutput)
def _softmax_output_lower(ctx, p: SoftmaxOutputParam, x, label):
    b = ctx.b
    if p.multi_output:
        return softmax_values(b, x, 1)
    if p.preserve_shape:
        return softmax_values(b, x, x.ndim - 1)
    flat = b.reshape(x, (x.shape[0], prod(x.shape[1:])))
    return b.reshape(softmax_values(b, flat, 1), x.shape)


@differentiable(SoftmaxOutput, lambda p: ["out0", "in1", "ograd0"] if p.out_grad else ["out0", "in1"])
def _softmax_output_grad(ctx, p: SoftmaxOutputParam, y, label, og=None):
    """(softmax - onehot(label)) * grad_scale / normalizer, as softmax_output-inl.h: the head
    gradient is ignored unless out_grad; smooth_alpha spreads alpha over the other classes."""
    b = ctx.b
    if tuple(label.shape) == tuple(y.shape):       # probabilities as the label
        grad = b.mul(b.sub(y, label), p.grad_scale) if p.grad_scale != 1.0 else b.sub(y, label)
        return [grad if og is None else b.mul(grad, og), None]
    axis = 1 if p.multi_output else y.ndim - 1
    if not p.multi_output and not p.preserve_shape and y.ndim > 2:
        axis = 1  # flattened to (N, prod(rest)) in forward; label is (N,)
    yv = y if (p.multi_output or y.ndim == 2 or p.preserve_shape) else b.reshape(y, (y.shape[0], prod(y.shape[1:])))
    others = [i for i in range(yv.ndim) if i != axis]
    lab = b.reshape(label, tuple(d for i, d in enumerate(yv.shape) if i != axis))
    ids = b.convert(lab, "int32")
    classes = b.iota(yv.shape, axis, "int32")
    onehot = b.convert(b.compare(classes, b.broadcast_in_dim(ids, yv.shape, others), "EQ"), yv.dtype)
    if p.smooth_alpha > 0:
        k = yv.shape[axis]
        onehot = b.add(b.mul(onehot, 1.0 - p.smooth_alpha - p.smooth_alpha / (k - 1)), p.smooth_alpha / (k - 1))
    grad = b.sub(yv, onehot)
    # MXNet compares labels with the ignore label as ints (static_cast<int>)
    keep = b.compare(ids, b.full_like(ids, int(p.ignore_label)), "NE")
    if p.use_ignore:
        grad = b.select(b.broadcast_in_dim(keep, yv.shape, others), grad, b.full_like(grad, 0.0))
    scale = p.grad_scale
    if p.normalization == "batch":
        # label.size(0): N with multi_output, else the size of the label MXNet flattens to 1-D
        scale /= yv.shape[0] if p.multi_output else prod(lab.shape)
    elif p.normalization == "valid":
        # labels != ignore_label are counted whether or not use_ignore is set
        valid = b.reduce(b.convert(keep, yv.dtype), list(range(lab.ndim)), "add")
        grad = b.div(grad, b.broadcast_in_dim(b.max(valid, 1.0), yv.shape, []))
    if p.multi_output and p.normalization != "valid":
        scale /= float(prod(y.shape[2:]))   # multi_output also averages over the spatial positions
    grad = b.mul(grad, scale) if scale != 1.0 else grad
    grad = b.reshape(grad, y.shape)
    return [grad if og is None else b.mul(grad, og), None]


# --- regression outputs: (out - label) (or its sign) * grad_scale / outputs per sample ---
@dataclass(frozen=True)
class RegressionOutputParam:
    grad_scale: float = 1.0


def _regression_shape(p, ins, outs):
    data = merge(ins[0], outs[0])
    label = ins[1]
    if known(data) and label is None:
        # MXNet allows a 1-D label for (N, 1) data and infers it so (regression_output-inl.h)
        label = (data[0],) if len(data) == 2 and data[1] == 1 else data
    elif label is not None and known(data) and prod(label) != prod(data):
        raise ValueError(f"label shape {label} does not match data shape {data}")
    return [data, label], [data]


def _regression_grad(kind: str):
    def rule(ctx, p: RegressionOutputParam, y, label):
        """regression_output-inl.h: grad_scale / num_output with num_output = label.Size() / label.shape[0];
        the head gradient is ignored."""
        b = ctx.b
        lab = b.reshape(label, y.shape)
        d = b.sub(y, lab)
        if kind == "mae":
            zero = b.full_like(d, 0.0)
            d = b.sub(b.convert(b.compare(d, zero, "GT"), d.dtype), b.convert(b.compare(d, zero, "LT"), d.dtype))
        num_output = prod(label.shape) // label.shape[0] if label.ndim else 1
        scale = p.grad_scale / max(num_output, 1)
        return [b.mul(d, scale) if scale != 1.0 else d, None]
    return rule


def _regression_output(name: str, kind: str, lower) -> OpDef:
    op = define(name, params=RegressionOutputParam, inputs=["data", "label"], is_loss=True,
                no_grad_inputs=("label",), infer_shape=_regression_shape, infer_type=same_dtype)
    lowers(op)(lower)
    differentiable(op, ("out0", "in1"))(_regression_grad(kind))
    return op


def _identity_loss_lower(ctx, p, x, label=None):
    return x   # forward is the identity; the loss lives in the gradient


def _logistic_regression_lower(ctx, p: RegressionOutputParam, x, label):
    return ctx.b.logistic(x)


LinearRegressionOutput = _regression_output("LinearRegressionOutput", "linear", _identity_loss_lower)
LogisticRegressionOutput = _regression_output("LogisticRegressionOutput", "logistic", _logistic_regression_lower)
MAERegressionOutput = _regression_output("MAERegressionOutput", "mae", _identity_loss_lower)


# --- SVMOutput (src/operator/svm_output-inl.h): the identity forward, the hinge loss's gradient ---
@dataclass(frozen=True)
class SVMOutputParam:
    margin: float = 1.0
    regularization_coefficient: float = 1.0
    use_linear: bool = False


def _svm_shape(p: SVMOutputParam, ins, outs):
    data = ins[0]
    if data is None:
        return ins, outs
    return [data, merge(ins[1], tuple(data[:-1]))], [data]


SVMOutput = define("SVMOutput", stateful=True, params=SVMOutputParam, inputs=["data", "label"], is_loss=True,
                   no_grad_inputs=("label",), infer_shape=_svm_shape, infer_type=same_dtype)
lowers(SVMOutput)(_identity_loss_lower)


@differentiable(SVMOutput, ("out0", "in1"))
def _svm_grad(ctx, p: SVMOutputParam, y, label):
    """MXNet's L1_SVM / L2_SVM: with s = +1 for the label's class and -1 for the others, where
    s y < margin the gradient is -s reg (linear) or -2 s reg (margin - s y) (squared); the head
    gradient is ignored."""
    b = ctx.b
    y2 = b.reshape(y, (y.shape[0], prod(y.shape[1:])))
    ids = b.convert(b.reshape(label, (y.shape[0],)), "int32")
    own = b.compare(b.iota(y2.shape, 1, "int32"), b.broadcast_in_dim(ids, y2.shape, [0]), "EQ")
    s = b.select(own, b.full_like(y2, 1.0), b.full_like(y2, -1.0))
    t = b.mul(s, y2)
    reg = p.regularization_coefficient
    g = b.mul(s, -reg) if p.use_linear else b.mul(b.mul(s, -2.0 * reg), b.sub(p.margin, t))
    g = b.select(b.compare(t, p.margin, "LT"), g, b.full_like(g, 0.0))
    return [b.reshape(g, y.shape), None]


# --- MakeLoss / make_loss: the gradient is a constant, the head gradient is ignored ---
@dataclass(frozen=True)
class MakeLossParam:
    grad_scale: float = 1.0
    valid_thresh: float = 0.0
    normalization: Literal["null", "batch", "valid"] = "null"


MakeLoss = define("MakeLoss", stateful=True, params=MakeLossParam, is_loss=True,
                  infer_shape=same_shape, infer_type=same_dtype, inplace=True)
# make_loss (lower case) is a distinct MXNet op: an identity whose gradient is ones.
make_loss = define("make_loss", is_loss=True, infer_shape=same_shape, infer_type=same_dtype)
lowers(MakeLoss, make_loss)(_identity_loss_lower)


@differentiable(MakeLoss, lambda p: ["out0"] if p.normalization == "valid" else [])
def _make_loss_grad(ctx, p: MakeLossParam, y=None):
    """grad_scale, divided by the batch size (normalization 'batch') or by the number of outputs
    above valid_thresh (at least 1, 'valid'), as make_loss-inl.h."""
    b = ctx.b
    shape, dtype = tuple(ctx.fwd_in_shapes[0]), ctx.fwd_in_dtypes[0]
    if p.normalization == "valid":
        valid = b.reduce(b.convert(b.compare(y, p.valid_thresh, "GT"), y.dtype), list(range(y.ndim)), "add")
        return [b.div(b.full_like(y, p.grad_scale), b.broadcast_in_dim(b.max(valid, 1.0), shape, []))]
    scale = p.grad_scale / (shape[0] if p.normalization == "batch" and shape else 1)
    c = b.constant(scale, (), dtype)
    return [b.broadcast_in_dim(c, shape, []) if shape else c]


@differentiable(make_loss, [])
def _make_loss_lower_grad(ctx, p, *unused):
    """make_loss's gradient is ones_like(data) (elemwise_unary_op_basic.cc)."""
    shape, dtype = tuple(ctx.fwd_in_shapes[0]), ctx.fwd_in_dtypes[0]
    c = ctx.b.constant(1.0, (), dtype)
    return [ctx.b.broadcast_in_dim(c, shape, []) if shape else c]


# --- softmax_cross_entropy (loss_binary_op-inl.h): sum over the batch of -log(max(p_label, 1e-8));
# an ordinary op (its gradient is scaled by the head gradient), the label gets none
def _softmax_cross_entropy_shape(p, ins, outs):
    data, label = ins
    if data is not None and len(data) != 2:
        raise ValueError(f"SoftmaxCrossEntropy only accept 2D data, got {data}")
    if label is not None and len(label) != 1:
        raise ValueError(f"SoftmaxCrossEntropy only accept 1D label, got {label}")
    if known(data):
        label = merge(label, (data[0],))
    return [data, label], [(1,)]


softmax_cross_entropy = define("softmax_cross_entropy", inputs=["data", "label"], no_grad_inputs=("label",),
                               infer_shape=_softmax_cross_entropy_shape, infer_type=same_dtype)


def _label_hits(b, x, label):
    """i1 (N, K): column == label of the row (labels as C casts them)."""
    ids = b.broadcast_in_dim(b.convert(label, "int32"), x.shape, [0])
    return b.compare(b.iota(x.shape, 1, "int32"), ids, "EQ")


@lowers(softmax_cross_entropy)
def _softmax_cross_entropy_lower(ctx, p, x, label):
    b = ctx.b
    probs = softmax_values(b, x, 1)
    picked = b.reduce(b.select(_label_hits(b, x, label), probs, b.full_like(probs, 0.0)), [1])
    return b.reshape(b.reduce(b.neg(b.log(b.max(picked, 1e-8))), [0]), (1,))


@differentiable(softmax_cross_entropy, ("ograd0", "in0", "in1"))
def _softmax_cross_entropy_grad(ctx, p, g, x, label):
    """(softmax(x) - onehot(label)) times the (1,) head gradient (the 1e-8 floor is not
    differentiated, as MXNet's)."""
    b = ctx.b
    d = b.sub(softmax_values(b, x, 1), b.convert(_label_hits(b, x, label), x.dtype))
    return [b.mul(d, b.broadcast_in_dim(b.reshape(g, ()), x.shape, [])), None]


# --- smooth_l1 (mshadow_op.h smooth_l1_loss): 0.5 (sigma x)^2 where |x| <= 1/sigma^2, else
# |x| - 0.5/sigma^2; ``scalar`` is sigma
smooth_l1 = define("smooth_l1", params=ScalarParam, infer_shape=same_shape, infer_type=same_dtype, inplace=True)


def _smooth_l1_outside(b, x, sigma: float):
    return b.compare(b.abs(x), 1.0 / (sigma * sigma), "GT")


@lowers(smooth_l1)
def _smooth_l1_lower(ctx, p: ScalarParam, x):
    b, s2 = ctx.b, p.scalar * p.scalar
    quad = b.mul(b.mul(x, x), 0.5 * s2)
    return b.select(_smooth_l1_outside(b, x, p.scalar), b.sub(b.abs(x), 0.5 / s2), quad)


@differentiable(smooth_l1, ("ograd0", "in0"))
def _smooth_l1_grad(ctx, p: ScalarParam, g, x):
    """g sign(x) outside, g sigma^2 x inside."""
    b = ctx.b
    d = b.select(_smooth_l1_outside(b, x, p.scalar), b.unary("sign", x), b.mul(x, p.scalar * p.scalar))
    return [b.mul(g, d)]
