"""Normalization: BatchNorm, LRN, LayerNorm, GroupNorm, InstanceNorm, L2Normalization (MXNet
1.9.1 src/operator/nn/batch_norm.cc, lrn.cc, layer_norm.cc, group_norm.cc, instance_norm.cc,
l2_normalization.cc): parameters, shape rule, lowering, recomputation, gradient and (BatchNorm)
channels-last rule per op."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, Optional

from ..kernels import stats as kernel_stats
from .nhwc import ChannelsLast, LayoutQuery, first_nhwc
from .activation import Activation
from .registry import define, differentiable, fused_gradient, lays_out, lowers, rematerializes
from .rules import known, merge, prod, same_dtype, same_shape


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


def _define_batch_norm(name: str, params: type):
    return define(
        name, params=params,
        inputs=["data", "gamma", "beta", "moving_mean", "moving_var"],
        aux=["moving_mean", "moving_var"], outputs=["output", "mean", "var"],
        num_visible=lambda p: 3 if p.output_mean_var else 1,
        aux_init={"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'},
        infer_shape=_bn_shape, infer_type=same_dtype, train_mode=True, mirror_kept=True,
        inference_params=lambda p: dataclasses.replace(p, use_global_stats=True))


BatchNorm = _define_batch_norm("BatchNorm", BatchNormParam)


def batch_norm_stats(b, x, axis: int):
    """Batch mean and biased variance over all axes but ``axis`` (also what the moving
    averages are updated with)."""
    if axis == x.ndim - 1:
        stats = kernel_stats.batch_stats(b, x)
        if stats is not None:
            return stats
    others = [i for i in range(x.ndim) if i != axis]
    n = prod(x.shape[i] for i in others)
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
    sums = kernel_stats.grad_sums(b, g, x, mean) if p.axis % x.ndim == x.ndim - 1 else None
    return _batch_norm_grad_from(ctx, p, g, x, gamma, moving_mean, moving_var, mean, inv_std, sums)


@fused_gradient(BatchNorm, Activation, lambda q: q.act_type == "relu",
                ("ograd0", "in0", "in1", "in2", "in3", "in4", "out1", "out2"), "_backward_BatchNorm_relu",
                inplace=True)
def _batch_norm_relu_grad(ctx, p: BatchNormParam, dz, x, gamma, beta, moving_mean, moving_var, mean, inv_std):
    """BatchNorm's gradient from the gradient ``dz`` of the ReLU after it: the ReLU's mask is
    recomputed from x wherever it is needed, so its gradient g is never stored (IREE 3.13 stores
    a value two dispatches read: the kernel's sums and the dx pass, 8 -> 5 passes over the map)."""
    b = ctx.b
    scale = inv_std if p.fix_gamma else b.mul(inv_std, gamma)
    sums = kernel_stats.grad_sums(b, dz, x, mean, (scale, beta)) if p.axis % x.ndim == x.ndim - 1 else None
    y = _batch_norm_normalize(b, p, x, gamma, beta, mean, inv_std)    # forward's operations: the same mask
    g = b.select(b.compare(y, 0.0, "GT"), dz, b.full_like(dz, 0.0))
    return _batch_norm_grad_from(ctx, p, g, x, gamma, moving_mean, moving_var, mean, inv_std, sums)


def _batch_norm_grad_from(ctx, p: BatchNormParam, g, x, gamma, moving_mean, moving_var, mean, inv_std, sums):
    """[dx, dgamma, dbeta, new moving mean, new moving var] from the output gradient ``g``;
    ``sums``: (sum g, sum g * (x - mean)) when a kernel computed them."""
    b = ctx.b
    axis = p.axis % x.ndim
    others = [i for i in range(x.ndim) if i != axis]
    n = prod(x.shape[i] for i in others)
    bc = lambda v: b.broadcast_in_dim(v, x.shape, [axis])  # noqa: E731
    xc = b.sub(x, bc(mean))
    xhat = b.mul(xc, bc(inv_std))
    if sums is not None:
        dbeta, dgamma_raw = sums[0], b.mul(sums[1], inv_std)
    else:
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
    # dx summed over all but the channel axis (a bias gradient before this BatchNorm): with batch
    # statistics exactly zero, sum(xhat) being zero (MXNet's sum is rounding noise around it);
    # with global ones, scale * sum(g)
    b.know_channel_sums(dx, axis, (lambda: b.mul(dbeta, scale)) if p.use_global_stats else
                        (lambda: b.full_like(dbeta, 0.0)))
    dgamma = b.full_like(gamma, 0.0) if p.fix_gamma else dgamma_raw
    return [dx, dgamma, dbeta, new_mean, new_var]


# --- BatchNorm channels-last (passes.layout): an NHWC value's channel axis is 3
def _axis3(q: LayoutQuery) -> ChannelsLast:
    return ChannelsLast("axis3", first_nhwc(q.num_outputs), params=dataclasses.replace(q.params, axis=3))


@lays_out(BatchNorm)
def _batch_norm_layout(q: LayoutQuery) -> ChannelsLast | None:
    return _axis3(q) if q.four_d(0) and q.params.axis % 4 == 1 and q.nhwc[0] else None


@lays_out(BatchNorm.backward)
@lays_out(BatchNorm.fused_gradients[0][2])
def _batch_norm_grad_layout(q: LayoutQuery) -> ChannelsLast | None:
    return _axis3(q) if q.params.axis % 4 == 1 and q.nhwc[0] and q.nhwc[1] else None

# --- BatchNorm_v1 (src/operator/batch_norm_v1.cc): BatchNorm's defaults and math; its 'var'
# output is the variance itself (BatchNorm's holds 1/sqrt(var + eps))
@dataclass(frozen=True)
class BatchNormV1Param(BatchNormParam):
    pass


BatchNorm_v1 = _define_batch_norm("BatchNorm_v1", BatchNormV1Param)


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


# --- per-sample moments (LayerNorm, GroupNorm, InstanceNorm): statistics over ``axes`` of
# every row, a gradient that reads forward's statistics rather than recomputing them
def _others(ndim: int, axes) -> list[int]:
    return [i for i in range(ndim) if i not in axes]


def _moments(b, x, axes: list[int]):
    """(x - mean, mean, biased variance); the statistics have x's shape without ``axes``."""
    n = prod(x.shape[i] for i in axes)
    mean = b.div(b.reduce(x, axes), n)
    xc = b.sub(x, b.broadcast_in_dim(mean, x.shape, _others(x.ndim, axes)))
    return xc, mean, b.div(b.reduce(b.mul(xc, xc), axes), n)


def _moments_input_grad(b, x, gh, mean, inv_std, axes: list[int]):
    """dx = inv_std (gh - mean(gh) - xhat mean(gh xhat)) for y = xhat (gh: the gradient of xhat),
    and xhat, over ``axes`` (stats shaped like x without them)."""
    keep = _others(x.ndim, axes)
    n = prod(x.shape[i] for i in axes)
    bc = lambda v: b.broadcast_in_dim(v, x.shape, keep)  # noqa: E731
    xhat = b.mul(b.sub(x, bc(mean)), bc(inv_std))
    m1 = b.div(b.reduce(gh, axes), n)
    m2 = b.div(b.reduce(b.mul(gh, xhat), axes), n)
    return b.mul(b.sub(b.sub(gh, bc(m1)), b.mul(xhat, bc(m2))), bc(inv_std)), xhat


def _affine(b, y, gamma, beta, dim: int):
    """y * gamma + beta, gamma and beta along ``dim``."""
    return b.add(b.mul(y, b.broadcast_in_dim(gamma, y.shape, [dim])), b.broadcast_in_dim(beta, y.shape, [dim]))


def _rows(x, lead: int):
    """x's shape with the dims from ``lead`` on merged (GroupNorm, InstanceNorm)."""
    return tuple(x.shape[:lead]) + (prod(x.shape[lead:]),)


# --- LayerNorm (src/operator/nn/layer_norm.cc): mean and std (sqrt(var + eps)) keep ``axis`` as 1
@dataclass(frozen=True)
class LayerNormParam:
    axis: int = -1
    eps: float = 1e-5
    output_mean_var: bool = False


def _layer_norm_shape(p: LayerNormParam, ins, outs):
    data = merge(ins[0], outs[0])
    if not known(data):
        return [data] + list(ins[1:]), [data] + list(outs[1:])
    ax = p.axis % len(data)
    c = (data[ax],)
    moments = tuple(1 if i == ax else d for i, d in enumerate(data))
    return [data, merge(ins[1], c), merge(ins[2], c)], [data, moments, moments]


LayerNorm = define("LayerNorm", params=LayerNormParam, inputs=["data", "gamma", "beta"],
                   outputs=["output", "mean", "std"], num_visible=lambda p: 3 if p.output_mean_var else 1,
                   infer_shape=_layer_norm_shape, infer_type=same_dtype)


@lowers(LayerNorm)
def _layer_norm_lower(ctx, p: LayerNormParam, x, gamma, beta):
    b, ax = ctx.b, p.axis % x.ndim
    xc, mean, var = _moments(b, x, [ax])
    std = b.sqrt(b.add(var, p.eps))
    y = b.div(xc, b.broadcast_in_dim(std, x.shape, _others(x.ndim, [ax])))
    kept = ctx.out_shapes[1]
    return [_affine(b, y, gamma, beta, ax), b.reshape(mean, kept), b.reshape(std, kept)]


@differentiable(LayerNorm, ("ograd0", "in0", "in1", "out1", "out2"))
def _layer_norm_grad(ctx, p: LayerNormParam, g, x, gamma, mean, std):
    """MXNet's rule: the mean and std outputs pass no gradient back."""
    b, ax = ctx.b, p.axis % x.ndim
    red = tuple(d for i, d in enumerate(x.shape) if i != ax)
    gh = b.mul(g, b.broadcast_in_dim(gamma, x.shape, [ax]))
    dx, xhat = _moments_input_grad(b, x, gh, b.reshape(mean, red), b.div(1.0, b.reshape(std, red)), [ax])
    others = _others(x.ndim, [ax])
    return [dx, b.reduce(b.mul(g, xhat), others), b.reduce(g, others)]


# --- GroupNorm (src/operator/nn/group_norm.cc): MXNet 1.9.1's gamma and beta hold one value
# per group (num_groups,), not per channel; mean and std are (N, num_groups)
@dataclass(frozen=True)
class GroupNormParam:
    num_groups: int = 1
    eps: float = 1e-5
    output_mean_var: bool = False


def _group_norm_shape(p: GroupNormParam, ins, outs):
    data = merge(ins[0], outs[0])
    if not known(data):
        return [data] + list(ins[1:]), [data] + list(outs[1:])
    if len(data) < 3 or data[1] % p.num_groups:
        raise ValueError(f"GroupNorm needs a 3-D or larger input whose {data[1] if len(data) > 1 else 0} "
                         f"channels divide into {p.num_groups} groups, got {data}")
    g = (p.num_groups,)
    return [data, merge(ins[1], g), merge(ins[2], g)], [data, (data[0], p.num_groups), (data[0], p.num_groups)]


GroupNorm = define("GroupNorm", params=GroupNormParam, inputs=["data", "gamma", "beta"],
                   outputs=["output", "mean", "std"], num_visible=lambda p: 3 if p.output_mean_var else 1,
                   infer_shape=_group_norm_shape, infer_type=same_dtype)


def _groups(b, x, p: GroupNormParam):
    return b.reshape(x, (x.shape[0], p.num_groups, prod(x.shape[1:]) // p.num_groups))


@lowers(GroupNorm)
def _group_norm_lower(ctx, p: GroupNormParam, x, gamma, beta):
    b = ctx.b
    xc, mean, var = _moments(b, _groups(b, x, p), [2])
    std = b.sqrt(b.add(var, p.eps))
    y = b.div(xc, b.broadcast_in_dim(std, xc.shape, [0, 1]))
    return [b.reshape(_affine(b, y, gamma, beta, 1), x.shape), mean, std]


@differentiable(GroupNorm, ("ograd0", "in0", "in1", "out1", "out2"))
def _group_norm_grad(ctx, p: GroupNormParam, g, x, gamma, mean, std):
    b = ctx.b
    xg, gg = _groups(b, x, p), _groups(b, g, p)
    gh = b.mul(gg, b.broadcast_in_dim(gamma, gg.shape, [1]))
    dx, xhat = _moments_input_grad(b, xg, gh, mean, b.div(1.0, std), [2])
    return [b.reshape(dx, x.shape), b.reduce(b.mul(gg, xhat), [0, 2]), b.reduce(gg, [0, 2])]


# --- InstanceNorm (src/operator/instance_norm-inl.h): per (sample, channel) over the spatial
# dims; its hidden outputs are mean and var (not std), (N, C)
@dataclass(frozen=True)
class InstanceNormParam:
    eps: float = 1e-3


def _instance_norm_shape(p: InstanceNormParam, ins, outs):
    data = merge(ins[0], outs[0])
    if not known(data):
        return [data] + list(ins[1:]), [data] + list(outs[1:])
    if len(data) < 3:
        raise ValueError(f"InstanceNorm only supports input tensors of rank >= 3, got {data}")
    c = (data[1],)
    return [data, merge(ins[1], c), merge(ins[2], c)], [data, tuple(data[:2]), tuple(data[:2])]


InstanceNorm = define("InstanceNorm", stateful=True, params=InstanceNormParam, inputs=["data", "gamma", "beta"],
                      outputs=["output", "mean", "var"], num_visible=lambda p: 1,
                      infer_shape=_instance_norm_shape, infer_type=same_dtype)


@lowers(InstanceNorm)
def _instance_norm_lower(ctx, p: InstanceNormParam, x, gamma, beta):
    b = ctx.b
    xc, mean, var = _moments(b, b.reshape(x, _rows(x, 2)), [2])
    y = b.mul(xc, b.broadcast_in_dim(b.rsqrt(b.add(var, p.eps)), xc.shape, [0, 1]))
    return [b.reshape(_affine(b, y, gamma, beta, 1), x.shape), mean, var]


@differentiable(InstanceNorm, ("ograd0", "in0", "in1", "out1", "out2"))
def _instance_norm_grad(ctx, p: InstanceNormParam, g, x, gamma, mean, var):
    b = ctx.b
    xr, gr = b.reshape(x, _rows(x, 2)), b.reshape(g, _rows(x, 2))
    gh = b.mul(gr, b.broadcast_in_dim(gamma, gr.shape, [1]))
    dx, xhat = _moments_input_grad(b, xr, gh, mean, b.rsqrt(b.add(var, p.eps)), [2])
    return [b.reshape(dx, x.shape), b.reduce(b.mul(gr, xhat), [0, 2]), b.reduce(gr, [0, 2])]


# --- L2Normalization (src/operator/l2_normalization-inl.h): x / sqrt(sum(x^2) + eps) per sample
# ('instance'), per position over channels ('channel') or per channel over positions ('spatial')
@dataclass(frozen=True)
class L2NormalizationParam:
    eps: float = 1e-10
    mode: Literal["channel", "instance", "spatial"] = "instance"


def _l2_axes(p: L2NormalizationParam, ndim: int) -> list[int]:
    return {"instance": list(range(1, ndim)), "channel": [1], "spatial": list(range(2, ndim))}[p.mode]


def _l2_shape(p: L2NormalizationParam, ins, outs):
    data = merge(ins[0], outs[0])
    if not known(data):
        return [data], [data] + list(outs[1:])
    if p.mode != "instance" and len(data) < 3:
        raise ValueError(f"At lease 3 dimensions required in {p.mode} mode, got {data}")
    norm = {"instance": (data[0],), "channel": (data[0], 1) + tuple(data[2:]), "spatial": tuple(data[:2])}[p.mode]
    return [data], [data, norm]


L2Normalization = define("L2Normalization", stateful=True, params=L2NormalizationParam, outputs=["output", "norm"],
                         num_visible=lambda p: 1, infer_shape=_l2_shape, infer_type=same_dtype)


@lowers(L2Normalization)
def _l2_lower(ctx, p: L2NormalizationParam, x):
    b, axes = ctx.b, _l2_axes(p, x.ndim)
    norm = b.sqrt(b.add(b.reduce(b.mul(x, x), axes), p.eps))
    y = b.div(x, b.broadcast_in_dim(norm, x.shape, _others(x.ndim, axes)))
    return [y, b.reshape(norm, ctx.out_shapes[1])]


@differentiable(L2Normalization, ("ograd0", "out0", "out1"))
def _l2_grad(ctx, p: L2NormalizationParam, g, y, norm):
    """(g - y sum(g y)) / norm, the sum over the normalized axes."""
    b, axes = ctx.b, _l2_axes(p, y.ndim)
    keep = _others(y.ndim, axes)
    bc = lambda v: b.broadcast_in_dim(v, y.shape, keep)  # noqa: E731
    norm = b.reshape(norm, tuple(y.shape[i] for i in keep))
    t = b.reduce(b.mul(g, y), axes)
    return [b.div(b.sub(g, b.mul(y, bc(t))), bc(norm))]
