"""Gradient fusion (passes.fuse_gradients): BatchNorm's backward node takes the gradient of the
ReLU after it where that is all it reads; MXNet's own graph stays what debug_str and the monitor
show. Numerics of the fused rule: tests/test_kernels.py (against float64 numpy, both with the
kernel's sums and with IREE's)."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from aotexec import pipeline
from aotexec.runtime.executor import bind_typing

SHAPES = {"data": (2, 3, 6, 6), "softmax_label": (2,)}


def _net(act: str = "relu", bn_read_twice: bool = False):
    x = ax.sym.Convolution(ax.sym.Variable("data"), kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    bn = ax.sym.BatchNorm(x, fix_gamma=False, name="bn")
    y = ax.sym.Activation(bn, act_type=act, name="act")
    if bn_read_twice:                       # bn's output gradient is a sum: nothing to fuse
        y = y + bn
    return ax.sym.SoftmaxOutput(ax.sym.FullyConnected(y, num_hidden=3, name="fc"), name="softmax")


def _backward_ops(net, fuse: bool, mirror: str = "none") -> dict[str, str]:
    t = bind_typing(net, SHAPES, {})
    reqs = {n: ("null" if n in SHAPES else "write") for n in net.list_arguments()}
    g = pipeline.training_plan(net, t, reqs, mirror, fuse=fuse).typing.graph
    return {n.name: n.op.name for n in g.nodes if n.op is not None and n.op.forward_op is not None}


@pytest.mark.parametrize("mirror", ["none", "dots"])
def test_batchnorm_and_relu_gradients_become_one_node(mirror):
    fused = _backward_ops(_net(), True, mirror)
    assert fused["bn_backward"] == "_backward_BatchNorm_relu"
    assert "act_backward" not in fused
    plain = _backward_ops(_net(), False, mirror)
    assert plain["bn_backward"] == "_backward_BatchNorm" and plain["act_backward"] == "_backward_Activation"


@pytest.mark.parametrize("net", [_net("sigmoid"), _net(bn_read_twice=True)], ids=["sigmoid", "bn-read-twice"])
def test_no_fusion_where_the_pattern_does_not_hold(net):
    ops = _backward_ops(net, True)
    assert ops["bn_backward"] == "_backward_BatchNorm" and ops["act_backward"] == "_backward_Activation"


def test_debug_str_and_the_monitor_show_mxnets_nodes():
    net = _net()
    ex = net.simple_bind(ax.cpu(), grad_req={n: ("null" if n in SHAPES else "write") for n in net.list_arguments()},
                         **SHAPES)
    text = ex.debug_str()
    assert "_backward_Activation" in text and "_backward_BatchNorm_relu" not in text
    rng = np.random.default_rng(0)
    for k, a in ex.arg_dict.items():
        a[:] = rng.standard_normal(a.shape).astype(np.float32) if k != "softmax_label" else 1
    seen = []
    ex.set_monitor_callback(lambda name, arr: seen.append(name), monitor_all=True)
    ex.forward(is_train=True)
    ex.backward()
    assert any(name.startswith("act_backward") for name in seen), seen
