"""partial_forward runs one node per call and ends with forward's outputs (cpu and vulkan)."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from contexts import CONTEXTS


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_partial_forward_steps_through_the_graph(ctx):
    data = ax.sym.Variable("data")
    net = ax.sym.FullyConnected(data, num_hidden=4, name="fc1")
    net = ax.sym.Activation(net, act_type="tanh", name="act")
    net = ax.sym.SoftmaxOutput(ax.sym.FullyConnected(net, num_hidden=3, name="fc2"), name="softmax")
    ex = net.simple_bind(ctx, grad_req="null", data=(2, 5))
    rng = np.random.default_rng(0)
    for name, arr in ex.arg_dict.items():
        arr[:] = rng.uniform(-1, 1, arr.shape).astype(np.float32)
    want = ex.forward(is_train=False)[0].asnumpy()
    seen = []
    ex.outputs[0][:] = np.zeros((2, 3), np.float32)
    step = 0
    while True:
        left = ex.partial_forward(is_train=False, step=step)
        seen.append(left)
        if left == 0:
            break
        step += 1
    assert seen == [3, 2, 1, 0]
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ax.MXNetError, match="out of range"):
        ex.partial_forward(step=9)
    ex2 = net.simple_bind(ctx, grad_req="null", data=(2, 5))
    with pytest.raises(ax.MXNetError, match="run the earlier steps first"):
        ex2.partial_forward(step=2)
