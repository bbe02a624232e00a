"""Mirroring (MXNET_BACKWARD_DO_MIRROR): fewer saved activations, same results."""
from __future__ import annotations

import pytest

import aotexec as ax
from aotexec import build
from aotexec.runtime.executor import bind_typing
from golden import GOLDEN, all_cases
from test_backward_golden import check, replay

NETS = [c for c in all_cases() if c.id in ("net_lenet_train", "net_resblock_train")]


def _saved(case, mirror: bool) -> int:
    s = ax.sym.load_json(case.symbol_json)
    t = bind_typing(s, {k: tuple(v) for k, v in case.meta["shapes"].items()}, {})
    req = case.meta["grad_req"]
    reqs = {n: (req if isinstance(req, str) else req[n]) for n in s.list_arguments()}
    return build.saved_activation_bytes(s, t, reqs, mirror)


@pytest.mark.parametrize("case", NETS, ids=[c.id for c in NETS])
def test_mirroring_saves_activation_bytes_and_keeps_results(case, monkeypatch):
    plain, mirrored = _saved(case, False), _saved(case, True)
    assert mirrored < plain, (plain, mirrored)
    monkeypatch.setenv("MXNET_BACKWARD_DO_MIRROR", "1")
    ex, outs = replay(case, ax.cpu())
    check(case, ex, outs)


def test_force_mirroring_attribute_recomputes_one_node():
    data = ax.sym.Variable("data")
    fc = ax.sym.FullyConnected(data, num_hidden=8, name="fc")
    act = ax.sym.Activation(fc, act_type="tanh", name="act")
    net = ax.sym.MakeLoss(ax.sym.sum(ax.sym.square(act)))
    t = bind_typing(net, {"data": (4, 5)}, {})
    reqs = {n: "write" for n in net.list_arguments()}
    keep = build.training_plan(net, t, reqs, mirror=False).residuals
    assert any(e.node.name == "act" for e in keep)
    act._set_attr(force_mirroring="True")   # MXNet honours it even with mirroring off
    forced = build.training_plan(net, t, reqs, mirror=False).residuals
    assert not any(e.node.name == "act" for e in forced) and any(e.node.name == "fc" for e in forced)
