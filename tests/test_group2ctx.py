"""Model parallelism with group2ctx / ctx_group: a graph split over cpu and vulkan gives the
same outputs and gradients as on one device (copies at group boundaries)."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from contexts import VULKAN_MISSING


def _net():
    data = ax.sym.Variable("data")
    with ax.AttrScope(ctx_group="stage1"):
        x = ax.sym.FullyConnected(data, num_hidden=6, name="fc1")
        x = ax.sym.Activation(x, act_type="tanh", name="act1")
    with ax.AttrScope(ctx_group="stage2"):
        x = ax.sym.FullyConnected(x, num_hidden=4, name="fc2")
        x = ax.sym.BatchNorm(x, fix_gamma=False, name="bn")
        x = ax.sym.SoftmaxOutput(x, name="softmax")
    return x


@pytest.mark.skipif(VULKAN_MISSING is not None, reason=VULKAN_MISSING or "")
def test_split_over_cpu_and_vulkan_matches_one_device():
    net = _net()
    rng = np.random.default_rng(0)
    shapes = {"data": (5, 3)}
    values = {}
    single = net.simple_bind(ax.cpu(), **shapes)
    for name, arr in list(single.arg_dict.items()) + list(single.aux_dict.items()):
        v = rng.integers(0, 4, arr.shape) if name == "softmax_label" else rng.uniform(0.5, 1.5, arr.shape)
        values[name] = v.astype(np.float32)
    placed = net.simple_bind(ax.cpu(), group2ctx={"stage1": ax.cpu(), "stage2": ax.vulkan()}, **shapes)
    assert type(placed).__name__ == "PlacedExecutor"
    for ex in (single, placed):
        ex.copy_params_from({k: v for k, v in values.items() if k in ex.arg_dict},
                            {k: v for k, v in values.items() if k in ex.aux_dict})
    for train in (False, True):
        outs = [ex.forward(is_train=train)[0].asnumpy() for ex in (single, placed)]
        np.testing.assert_allclose(outs[1], outs[0], rtol=1e-4, atol=1e-5)
    for ex in (single, placed):
        ex.backward()
    for name in single.grad_dict:
        if single.grad_dict[name] is not None:
            np.testing.assert_allclose(placed.grad_dict[name].asnumpy(), single.grad_dict[name].asnumpy(),
                                       rtol=1e-3, atol=1e-4, err_msg=name)   # BN backward cancels: f32 noise
    for name in single.aux_dict:
        np.testing.assert_allclose(placed.aux_dict[name].asnumpy(), single.aux_dict[name].asnumpy(), rtol=1e-4, atol=1e-5)
    # the stage2 segment really runs on Vulkan
    segments = placed._plan(True).segments
    assert {str(s.ctx) for s in segments} == {"cpu(0)", "vulkan(0)"}
