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
