"""BatchNorm training at sizes past the toy ones, on every context, against numpy.

IREE 3.13's SPIR-V codegen staged whole reduction inputs in workgroup memory when a
reduction was fused with its producer's full-size result or with consumers: from batch
4 x 8 channels x 8 x 8 on, conv + BatchNorm nets failed to compile for Vulkan (16 KiB of
workgroup memory). ``Emitter.reduce`` now makes each reduction its own dispatch there."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from contexts import CONTEXTS

EPS = 1e-3


def _numpy_batchnorm(x, gamma, beta, g):
    """Training forward and the gradients for head gradient ``g`` (axis 1)."""
    axes = (0, 2, 3)
    n = x.size / x.shape[1]
    mean = x.mean(axes, keepdims=True)
    var = x.var(axes, keepdims=True)
    inv_std = 1.0 / np.sqrt(var + EPS)
    xhat = (x - mean) * inv_std
    c = lambda v: v.reshape(1, -1, 1, 1)  # noqa: E731
    y = c(gamma) * xhat + c(beta)
    dbeta = g.sum(axes)
    dgamma = (g * xhat).sum(axes)
    dx = c(gamma) * inv_std / n * (n * g - c(dbeta) - xhat * c(dgamma))
    return y, dx, dgamma, dbeta, mean.ravel(), var.ravel()


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("shape", [(4, 8, 8, 8), (8, 8, 16, 16)])
def test_batchnorm_training_matches_numpy(ctx, shape):
    net = ax.sym.BatchNorm(ax.sym.Variable("data"), fix_gamma=False, eps=EPS, momentum=0.9, name="bn")
    ex = net.simple_bind(ctx, grad_req="write", data=shape)
    rng = np.random.default_rng(1)
    x = rng.normal(0.5, 2.0, shape).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, shape[1]).astype(np.float32)
    beta = rng.uniform(-1, 1, shape[1]).astype(np.float32)
    g = rng.uniform(-1, 1, shape).astype(np.float32)
    ex.arg_dict["bn_gamma"][:] = gamma
    ex.arg_dict["bn_beta"][:] = beta
    ex.aux_dict["bn_moving_mean"][:] = 0.0
    ex.aux_dict["bn_moving_var"][:] = 1.0
    y = ex.forward(is_train=True, data=x)[0].asnumpy()
    ex.backward(ax.nd.array(g, ctx=ctx))
    ry, rdx, rdgamma, rdbeta, mean, var = _numpy_batchnorm(x.astype(np.float64), gamma, beta, g.astype(np.float64))
    np.testing.assert_allclose(y, ry, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ex.grad_dict["data"].asnumpy(), rdx, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(ex.grad_dict["bn_gamma"].asnumpy(), rdgamma, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(ex.grad_dict["bn_beta"].asnumpy(), rdbeta, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(ex.aux_dict["bn_moving_mean"].asnumpy(), 0.1 * mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ex.aux_dict["bn_moving_var"].asnumpy(), 0.9 + 0.1 * var, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_conv_batchnorm_block_trains_on_every_context(ctx):
    """A ResNet-sized conv-BN-ReLU stack compiles and agrees with cpu (checked against
    MXNet by the golden tests) on every context."""
    x = ax.sym.Variable("data")
    for i in range(2):
        x = ax.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=8, name=f"conv{i}")
        x = ax.sym.Activation(ax.sym.BatchNorm(x, fix_gamma=False, name=f"bn{i}"), act_type="relu", name=f"relu{i}")
    net = ax.sym.SoftmaxOutput(ax.sym.FullyConnected(x, num_hidden=4, name="fc"), name="softmax")
    shape = (8, 8, 16, 16)
    rng = np.random.default_rng(2)
    data = rng.uniform(-1, 1, shape).astype(np.float32)
    label = rng.integers(0, 4, shape[0]).astype(np.float32)
    results = []
    for c in (ax.cpu(), ctx):
        ex = net.simple_bind(c, grad_req={n: "null" if n in ("data", "softmax_label") else "write"
                                          for n in net.list_arguments()}, data=shape)
        r = np.random.default_rng(3)
        for name, arr in ex.arg_dict.items():
            if name not in ("data", "softmax_label"):
                arr[:] = r.uniform(-0.5, 0.5, arr.shape).astype(np.float32)
        out = ex.forward(is_train=True, data=data, softmax_label=label)[0].asnumpy()
        ex.backward()
        results.append((out, {n: a.asnumpy() for n, a in ex.grad_dict.items() if a is not None}))
    (o1, g1), (o2, g2) = results
    np.testing.assert_allclose(o2, o1, rtol=1e-4, atol=1e-5)
    for n in g1:
        np.testing.assert_allclose(g2[n], g1[n], rtol=1e-3, atol=1e-4, err_msg=n)


@pytest.mark.parametrize("global_stats", [False, True])
def test_bias_gradient_before_batchnorm_matches_numpy(global_stats):
    """A convolution's bias gradient where its output feeds a BatchNorm comes from BatchNorm's
    own sums (``Emitter.channel_sums``): zero with batch statistics, scale * sum(g) with global
    ones. A 1x1 identity convolution makes BatchNorm's input data + bias for numpy."""
    shape, c = (4, 3, 5, 5), 3
    x = ax.sym.Convolution(ax.sym.Variable("data"), kernel=(1, 1), num_filter=c, name="conv")
    net = ax.sym.BatchNorm(x, fix_gamma=False, eps=EPS, use_global_stats=global_stats, name="bn")
    ex = net.simple_bind(ax.cpu(), grad_req="write", data=shape)
    rng = np.random.default_rng(4)
    data = rng.normal(0.5, 2.0, shape).astype(np.float32)
    bias = np.array([0.1, -0.2, 0.3], np.float32)
    gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
    moving_var = rng.uniform(0.5, 2.0, c).astype(np.float32)
    g = rng.uniform(-1, 1, shape).astype(np.float32)
    ex.arg_dict["conv_weight"][:] = np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)
    ex.arg_dict["conv_bias"][:] = bias
    ex.arg_dict["bn_gamma"][:] = gamma
    ex.arg_dict["bn_beta"][:] = 0.0
    ex.aux_dict["bn_moving_mean"][:] = 0.0
    ex.aux_dict["bn_moving_var"][:] = moving_var
    ex.forward(is_train=True, data=data)
    ex.backward(ax.nd.array(g))
    y = data.astype(np.float64) + bias.reshape(1, c, 1, 1)
    if global_stats:
        dy = g * (gamma / np.sqrt(moving_var + EPS)).reshape(1, c, 1, 1)
    else:
        dy = _numpy_batchnorm(y, gamma, np.zeros(c), g.astype(np.float64))[1]
    np.testing.assert_allclose(ex.grad_dict["conv_bias"].asnumpy(), dy.sum((0, 2, 3)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ex.grad_dict["data"].asnumpy(), dy, rtol=1e-3, atol=1e-4)
