"""Normalization: BatchNorm and LRN (MXNet 1.9.1 src/operator/nn/batch_norm.cc, lrn.cc):
parameters, shape rule, lowering, recomputation, gradient and (BatchNorm) channels-last
rule per op."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from .nhwc import ChannelsLast, LayoutQuery, first_nhwc
from .registry import define, differentiable, lays_out, lowers, rematerializes
from .rules import prod, same_dtype, same_shape


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
    """MXNet's BatchNormShape: everything follows the data's (partial) shape, nothing flows back."""
    data = ins[0]
    if data is None:
        return ins, outs
    axis = p.axis + len(data) if p.axis < 0 else p.axis
    if not 0 <= axis < len(data):
        raise ValueError(f"Channel axis out of range: {p.axis}")
    c = (data[axis],)
    return [data, c, c, c, c], [data, c, c]


BatchNorm = define(
    "BatchNorm", params=BatchNormParam,
    inputs=["data", "gamma", "beta", "moving_mean", "moving_var"],
    aux=["moving_mean", "moving_var"], outputs=["output", "mean", "var"],
    num_visible=lambda p: 3 if p.output_mean_var else 1,
    aux_init={"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'},
    infer_shape=_bn_shape, infer_type=same_dtype, train_mode=True, mirror_kept=True,
    inference_params=lambda p: dataclasses.replace(p, use_global_stats=True))


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


# --- BatchNorm gradient (and the moving-stat update, done in backward as MXNet 1.9.1) ---
@differentiable(BatchNorm, ("ograd0", "in0", "in1", "in3", "in4", "out1", "out2"), aux_updates=2, inplace=True)
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



# --- BatchNorm channels-last (passes.layout): an NHWC value's channel axis is 3
def _axis3(q: LayoutQuery) -> ChannelsLast:
    return ChannelsLast("axis3", first_nhwc(q.num_outputs), params=dataclasses.replace(q.params, axis=3))


@lays_out(BatchNorm)
def _batch_norm_layout(q: LayoutQuery) -> ChannelsLast | None:
    return _axis3(q) if q.four_d(0) and q.params.axis % 4 == 1 and q.nhwc[0] else None


@lays_out(BatchNorm.backward)
def _batch_norm_grad_layout(q: LayoutQuery) -> ChannelsLast | None:
    return _axis3(q) if q.params.axis % 4 == 1 and q.nhwc[0] and q.nhwc[1] else None

# --- BatchNorm_v1 (src/operator/batch_norm_v1.cc): BatchNorm's defaults and math; its 'var'
# output is the variance itself (BatchNorm's holds 1/sqrt(var + eps))
@dataclass(frozen=True)
class BatchNormV1Param(BatchNormParam):
    pass


BatchNorm_v1 = define(
    "BatchNorm_v1", params=BatchNormV1Param,
    inputs=["data", "gamma", "beta", "moving_mean", "moving_var"],
    aux=["moving_mean", "moving_var"], outputs=["output", "mean", "var"],
    num_visible=lambda p: 3 if p.output_mean_var else 1,
    aux_init={"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'},
    infer_shape=_bn_shape, infer_type=same_dtype, train_mode=True, mirror_kept=True,
    inference_params=lambda p: dataclasses.replace(p, use_global_stats=True))


def _variance(b, p: BatchNormParam, inv_std):
    return b.sub(b.div(1.0, b.mul(inv_std, inv_std)), p.eps)


@lowers(BatchNorm_v1)
def _batch_norm_v1_lower(ctx, p: BatchNormParam, x, gamma, beta, moving_mean, moving_var):
    y, mean, inv_std = _batch_norm_lower(ctx, p, x, gamma, beta, moving_mean, moving_var)
    return [y, mean, _variance(ctx.b, p, inv_std)]


@rematerializes(BatchNorm_v1, lambda p: () if p.use_global_stats else (1, 2))
def _batch_norm_v1_remat(ctx, p: BatchNormParam, x, gamma, beta, moving_mean, moving_var, mean=None, var=None):
    if mean is None:
        return _batch_norm_v1_lower(ctx, p, x, gamma, beta, moving_mean, moving_var)
    inv_std = ctx.b.rsqrt(ctx.b.add(var, p.eps))
    return [_batch_norm_normalize(ctx.b, p, x, gamma, beta, mean, inv_std), None, None]


@differentiable(BatchNorm_v1, ("ograd0", "in0", "in1", "in3", "in4", "out1", "out2"), aux_updates=2, inplace=True)
def _batch_norm_v1_grad(ctx, p: BatchNormParam, g, x, gamma, moving_mean, moving_var, mean, var):
    inv_std = ctx.b.rsqrt(ctx.b.add(var, p.eps))
    return _batch_norm_grad(ctx, p, g, x, gamma, moving_mean, moving_var, mean, inv_std)


lays_out(BatchNorm_v1)(_batch_norm_layout)
lays_out(BatchNorm_v1.backward)(_batch_norm_grad_layout)


# --- LRN (src/operator/nn/lrn.cc) ---
@dataclass(frozen=True)
class LRNParam:
    nsize: int
    alpha: float = 1e-4
    beta: float = 0.75
    knorm: float = 2.0


LRN = define("LRN", params=LRNParam, outputs=["output", "tmp_norm"], num_visible=lambda p: 1,
             infer_shape=same_shape, infer_type=same_dtype)


@lowers(LRN)
def _lrn_lower(ctx, p: LRNParam, x):
    """out = x * (knorm + alpha/nsize * sum of x^2 over nsize channels around c)^-beta."""
    b = ctx.b
    n = p.nsize
    window = (1, n) + (1,) * (x.ndim - 2)
    pads = [(0, 0), (n // 2, n - 1 - n // 2)] + [(0, 0)] * (x.ndim - 2)
    s = b.reduce_window(b.mul(x, x), "add", window, (1,) * x.ndim, pads, x.shape)
    norm = b.add(b.mul(s, p.alpha / n), p.knorm)
    return [b.mul(x, b.pow(norm, -p.beta)), norm]      # tmp_norm: what MXNet's monitor shows


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
