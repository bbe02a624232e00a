"""Monitor callbacks: MXNet's names, order and values (golden exec_monitor_*), on cpu and vulkan."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from contexts import CONTEXTS
from golden import cases, ids

MONITOR = [c for c in cases("executor") if c.meta["scenario"] == "monitor"]


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("case", MONITOR, ids=ids(MONITOR))
@pytest.mark.parametrize("monitor_all", [False, True])
def test_monitor_sequence_matches_mxnet(case, ctx, monitor_all):
    meta, exp = case.meta, case.expected_json
    key = "monitor_all_true" if monitor_all else "monitor_all_false"
    inp, vals = case.inputs(), case.expected()
    s = ax.sym.load_json(case.symbol_json)
    args = {n: ax.nd.array(inp[n], ctx=ctx) for n in meta["arg_names"]}
    grads = {n: ax.nd.zeros(inp[n].shape, ctx=ctx) for n in meta["arg_names"]}
    aux = {n: ax.nd.array(inp[n], ctx=ctx) for n in meta["aux_names"]}
    ex = s.bind(ctx, args=args, args_grad=grads, grad_req="write", aux_states=aux)
    calls = []
    ex.set_monitor_callback(lambda name, arr: calls.append((name, arr.shape, arr.asnumpy())), monitor_all=monitor_all)
    ex.forward(is_train=True)
    assert [[n, list(sh)] for n, sh, _ in calls] == exp[key]["forward"]
    first = {}
    for n, _, v in calls:
        first.setdefault(n, v)
    for name in meta["value_names"]:
        k = f"{key}__{name}"
        if k in vals:
            np.testing.assert_allclose(first[name], vals[k], rtol=meta["rtol"], atol=meta["atol"])
    if meta["backward_recorded"][key]:
        calls.clear()
        ex.backward()
        assert [[n, list(sh)] for n, sh, _ in calls] == exp[key]["backward"]


def test_monitor_off_uses_the_fast_build_again():
    x = ax.sym.Variable("x")
    net = ax.sym.relu(x, name="r")
    ex = net.simple_bind(ax.cpu(), grad_req="null", x=(2, 2))
    seen = []
    ex.set_monitor_callback(lambda n, a: seen.append(n))
    ex.forward(x=np.ones((2, 2)))
    assert seen == ["r_output"]
    ex.set_monitor_callback(None)
    ex.forward(x=np.ones((2, 2)))
    assert seen == ["r_output"]


def test_mon_monitor_helper_collects_stats_every_interval():
    x = ax.sym.Variable("x")
    net = ax.sym.FullyConnected(x, num_hidden=3, name="fc")
    ex = net.simple_bind(ax.cpu(), grad_req="null", x=(2, 4))
    ex.arg_dict["fc_weight"][:] = np.ones((3, 4))
    mon = ax.mon.Monitor(2, pattern="fc_.*")
    mon.install(ex)
    rows = []
    for _ in range(4):
        mon.tic()
        ex.forward(x=np.full((2, 4), 0.5))
        rows.append(mon.toc())
    assert [len(r) > 0 for r in rows] == [True, False, True, False]
    stats = dict((k, float(v)) for _, k, v in rows[0])
    np.testing.assert_allclose(stats["fc_output"], 2.0, rtol=1e-6)   # every output is 4 * 0.5 * 1
    np.testing.assert_allclose(stats["fc_weight"], 1.0, rtol=1e-6)
