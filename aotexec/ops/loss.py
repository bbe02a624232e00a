"""Softmax family and loss heads: softmax, log_softmax, SoftmaxActivation,
SoftmaxOutput, Linear/Logistic/MAE RegressionOutput, MakeLoss.

Mirrors MXNet 1.9.1 src/operator/softmax_output.cc, regression_output.cc,
make_loss.cc, nn/softmax.cc.  Loss heads (``is_loss``) need no head gradient.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from .registry import OPS, define
from .rules import known, merge, prod, same_dtype, same_shape


@dataclass(frozen=True)
class SoftmaxParam:
    axis: int = -1
    temperature: Optional[float] = None
    dtype: Optional[str] = None
    use_length: Optional[bool] = False


softmax = define("softmax", params=SoftmaxParam, infer_shape=same_shape, infer_type=same_dtype)
log_softmax = define("log_softmax", params=SoftmaxParam, infer_shape=same_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class SoftmaxActivationParam:
    mode: Literal["instance", "channel"] = "instance"


SoftmaxActivation = define("SoftmaxActivation", params=SoftmaxActivationParam,
                           infer_shape=same_shape, infer_type=same_dtype)


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
    data = merge(ins[0], outs[0])
    label = ins[1]
    if known(data):
        if p.multi_output:
            want = (data[0], prod(data[2:]))
            if label is not None and len(label) == len(data) - 1:
                want = (data[0],) + tuple(data[2:])
        else:
            want = tuple(data[:-1])
        label = merge(label, want)
    return [data, label], [data]


SoftmaxOutput = define(
    "SoftmaxOutput", "Softmax", params=SoftmaxOutputParam, inputs=["data", "label"],
    is_loss=True, no_grad_inputs=("label",),
    infer_shape=_softmax_output_shape, infer_type=same_dtype)


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


for _name in ("LinearRegressionOutput", "LogisticRegressionOutput", "MAERegressionOutput"):
    define(_name, params=RegressionOutputParam, inputs=["data", "label"], is_loss=True,
           no_grad_inputs=("label",), infer_shape=_regression_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class MakeLossParam:
    grad_scale: float = 1.0
    valid_thresh: float = 0.0
    normalization: Literal["null", "batch", "valid"] = "null"


MakeLoss = define("MakeLoss", params=MakeLossParam, is_loss=True,
                  infer_shape=same_shape, infer_type=same_dtype)
# make_loss (lower case) is a distinct MXNet op: an identity whose gradient is ones.
make_loss = define("make_loss", is_loss=True, infer_shape=same_shape, infer_type=same_dtype)


# ---------------------------------------------------------------- lowering rules
from .registry import lowers  # noqa: E402


def softmax_values(b, x, axis: int, temperature: float | None = None, log: bool = False):
    """Numerically stable (log-)softmax along ``axis``."""
    axis = axis % x.ndim
    if temperature is not None and temperature != 1.0:
        x = b.div(x, temperature)
    keep = [i for i in range(x.ndim) if i != axis]
    m = b.broadcast_in_dim(b.reduce(x, [axis], "max"), x.shape, keep)
    z = b.sub(x, m)
    e = b.exp(z)
    s = b.broadcast_in_dim(b.reduce(e, [axis], "add"), x.shape, keep)
    return b.sub(z, b.log(s)) if log else b.div(e, s)


@lowers(softmax)
def _softmax_lower(ctx, p: SoftmaxParam, x):
    return softmax_values(ctx.b, x, p.axis, p.temperature)


@lowers(log_softmax)
def _log_softmax_lower(ctx, p: SoftmaxParam, x):
    return softmax_values(ctx.b, x, p.axis, p.temperature, log=True)


@lowers(SoftmaxActivation)
def _softmax_activation_lower(ctx, p: SoftmaxActivationParam, x):
    if p.mode == "channel":
        return softmax_values(ctx.b, x, 1)
    b = ctx.b
    flat = b.reshape(x, (x.shape[0], prod(x.shape[1:])))
    return b.reshape(softmax_values(b, flat, 1), x.shape)


@lowers(SoftmaxOutput)
def _softmax_output_lower(ctx, p: SoftmaxOutputParam, x, label):
    b = ctx.b
    if p.multi_output:
        return softmax_values(b, x, 1)
    if p.preserve_shape:
        return softmax_values(b, x, x.ndim - 1)
    flat = b.reshape(x, (x.shape[0], prod(x.shape[1:])))
    return b.reshape(softmax_values(b, flat, 1), x.shape)


@lowers(OPS["LinearRegressionOutput"], OPS["MAERegressionOutput"], MakeLoss, make_loss)
def _identity_loss_lower(ctx, p, x, label=None):
    return x   # forward is the identity; the loss lives in the gradient


@lowers(OPS["LogisticRegressionOutput"])
def _logistic_regression_lower(ctx, p: RegressionOutputParam, x, label):
    return ctx.b.logistic(x)


# ---------------------------------------------------------------- gradient rules
from .registry import differentiable  # noqa: E402


@differentiable(SoftmaxOutput, ("out0", "in1"))
def _softmax_output_grad(ctx, p: SoftmaxOutputParam, y, label):
    """(softmax - onehot(label)) * grad_scale / normalizer; the head gradient is ignored (MXNet)."""
    b = ctx.b
    axis = 1 if p.multi_output else y.ndim - 1
    if not p.multi_output and not p.preserve_shape and y.ndim > 2:
        axis = 1  # flattened to (N, prod(rest)) in forward; label is (N,)
    yv = y if (p.multi_output or y.ndim == 2 or p.preserve_shape) else b.reshape(y, (y.shape[0], prod(y.shape[1:])))
    lab = b.reshape(label, tuple(d for i, d in enumerate(yv.shape) if i != axis))
    ids = b.convert(lab, "int32")
    classes = b.iota(yv.shape, axis, "int32")
    onehot = b.compare(classes, b.broadcast_in_dim(ids, yv.shape, [i for i in range(yv.ndim) if i != axis]), "EQ")
    grad = b.sub(yv, b.convert(onehot, yv.dtype))
    keep = None
    if p.use_ignore:
        keep = b.compare(lab, p.ignore_label, "NE")
        grad = b.select(b.broadcast_in_dim(keep, yv.shape, [i for i in range(yv.ndim) if i != axis]),
                        grad, b.full_like(grad, 0.0))
    scale = p.grad_scale
    if p.normalization == "batch":
        scale /= yv.shape[0]
    elif p.normalization == "valid":
        n = float(prod(lab.shape))
        if keep is not None:
            valid = b.reduce(b.convert(keep, yv.dtype), list(range(lab.ndim)), "add")
            grad = b.div(grad, b.broadcast_in_dim(b.max(valid, 1.0), yv.shape, []))
        else:
            scale /= n
    if p.multi_output and p.normalization == "null":
        scale /= float(prod(y.shape[2:]))   # MXNet 1.9.1 averages over the spatial positions
    grad = b.mul(grad, scale) if scale != 1.0 else grad
    return [b.reshape(grad, y.shape), None]
