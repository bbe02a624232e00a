"""debug_str in MXNet's layout (golden exec_debug_str_*), and its closing lines' behaviour."""
from __future__ import annotations

import re

import pytest

import aotexec as ax
from contexts import CONTEXTS
from golden import cases, ids

DEBUG = [c for c in cases("executor") if c.meta["scenario"] == "debug_str"]


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("case", DEBUG, ids=ids(DEBUG))
@pytest.mark.parametrize("req", ["null", "write"])
def test_debug_str_matches_mxnet(case, req, ctx):
    s = ax.sym.load_json(case.symbol_json)
    ex = s.simple_bind(ctx, grad_req=req, **{k: tuple(v) for k, v in case.meta["bind_shapes"].items()})
    assert ex.debug_str() == case.expected_json["grad_req_" + req]


def _mb(text: str) -> int:
    lines = text.rstrip("\n").splitlines()
    # the closing line MXNet 1.9.1 prints (memonger parses it), from the golden case
    assert lines[-1] == DEBUG[0].expected_json["grad_req_write"].rstrip("\n").splitlines()[-1]
    return int(re.fullmatch(r"Total (\d+) MB allocated", lines[-2]).group(1))


def test_allocated_mb_behaves_like_mxnet():
    data = ax.sym.Variable("data")
    x = ax.sym.Activation(ax.sym.FullyConnected(data, num_hidden=1024, name="fc1"), act_type="relu", name="r1")
    x = ax.sym.Activation(ax.sym.FullyConnected(x, num_hidden=1024, name="fc2"), act_type="relu", name="r2")
    net = ax.sym.FullyConnected(x, num_hidden=1024, name="fc3")
    shapes = {"data": (512, 512)}
    null = _mb(net.simple_bind(ax.cpu(), grad_req="null", **shapes).debug_str())
    blocked = _mb(ax.sym.BlockGrad(net).simple_bind(ax.cpu(), grad_req="write", **shapes).debug_str())
    write = _mb(net.simple_bind(ax.cpu(), grad_req="write", **shapes).debug_str())
    assert null == blocked
    # inference keeps two 512x1024 float32 activations at its peak: fc2 reads r1 (fc1's
    # storage, ReLUs run in place) while writing its own output; fc3's output is the executor's
    assert null == (2 * 512 * 1024 * 4) >> 20
    assert write > null
