"""Executor.reshape: MXNet's rules, memory sharing and messages (golden exec_reshape_*, err_reshape_*)."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from contexts import CONTEXTS
from golden import cases, ids

RESHAPE = [c for c in cases("executor") if c.meta["scenario"] == "reshape"]
ERRORS = [c for c in cases("error") if c.meta["scenario"] == "reshape"]


def _shares(a, b) -> bool:
    """Writing into a changes b (then restore)."""
    old = b.asnumpy()
    a[:] = np.full(a.shape, 12345.0, np.float32)
    seen = bool(np.all(b.asnumpy().ravel()[: a.size] == 12345.0))
    b[:] = old
    return seen


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("case", RESHAPE, ids=ids(RESHAPE))
def test_reshape_matches_mxnet(case, ctx):
    meta, exp, inp, vals = case.meta, case.expected_json, case.inputs(), case.expected()
    tol = dict(rtol=meta.get("rtol", 1e-4), atol=meta.get("atol", 1e-5))
    s = ax.sym.load_json(case.symbol_json)
    args = {n: ax.nd.array(inp[n], ctx=ctx) for n in meta["arg_names"]}
    grads = {n: ax.nd.zeros(inp[n].shape, ctx=ctx) for n in meta["arg_names"]} if meta["grad_req"] != "null" else None
    aux = {n: ax.nd.array(inp[n], ctx=ctx) for n in meta["aux_names"]}
    ex = s.bind(ctx, args=args, args_grad=grads, grad_req=meta["grad_req"], aux_states=aux)
    for i, o in enumerate(ex.forward(is_train=False)):
        np.testing.assert_allclose(o.asnumpy(), vals[f"output_{i}"], **tol)
    execs = {}
    for r in meta["reshapes"]:
        exr = ex.reshape(partial_shaping=r["partial_shaping"], allow_up_sizing=r["allow_up_sizing"],
                         **{k: tuple(v) for k, v in r["kwargs"].items()})
        want = exp["reshapes"][r["name"]]
        assert {n: list(a.shape) for n, a in exr.arg_dict.items()} == want["arg_shapes"]
        outs = exr.forward(is_train=r["train"], **{f: inp[f"{r['name']}__{f}"] for f in r["feed"]})
        for i, o in enumerate(outs):
            np.testing.assert_allclose(o.asnumpy(), vals[f"{r['name']}__output_{i}"], **tol)
        for n, shared in want["arg_shares_memory_with_original"].items():
            assert _shares(exr.arg_dict[n], ex.arg_dict[n]) == shared, n
        execs[r["name"]] = exr
    w = meta["weight_write"]
    execs[w["via"]].arg_dict[w["arg"]][:] = inp[w["value"]]
    feed = {f: inp[f] for f in meta["reshapes"][0]["feed"]}
    for i, o in enumerate(ex.forward(is_train=False, **feed)):
        np.testing.assert_allclose(o.asnumpy(), vals[f"after_write__output_{i}"], **tol)
    for r in meta["reshapes"][1:]:
        outs = execs[r["name"]].forward(is_train=False, **{f: inp[f"{r['name']}__{f}"] for f in r["feed"]})
        for i, o in enumerate(outs):
            np.testing.assert_allclose(o.asnumpy(), vals[f"after_write__{r['name']}__output_{i}"], **tol)


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("case", ERRORS, ids=ids(ERRORS))
def test_reshape_errors_match_mxnet(case, ctx):
    meta, exp = case.meta, case.expected_json
    s = ax.sym.load_json(case.symbol_json)
    ex = s.simple_bind(ctx, grad_req=meta.get("grad_req", "null"), **{k: tuple(v) for k, v in meta["bind_shapes"].items()})
    with pytest.raises(ax.MXNetError) as info:
        ex.reshape(partial_shaping=meta["partial_shaping"], allow_up_sizing=meta["allow_up_sizing"],
                   **{k: tuple(v) for k, v in meta["reshape_kwargs"].items()})
    assert exp["message_key"] in str(info.value)
    assert str(info.value) in exp["message"]


def test_reshape_shares_gradients_after_backward():
    data = ax.sym.Variable("data")
    net = ax.sym.MakeLoss(ax.sym.sum(ax.sym.FullyConnected(data, num_hidden=2, name="fc")))
    ex = net.simple_bind(ax.cpu(), data=(4, 3))
    small = ex.reshape(data=(2, 3))
    small.arg_dict["fc_weight"][:] = np.ones((2, 3))
    small.forward(is_train=True, data=np.ones((2, 3)))
    small.backward()
    np.testing.assert_allclose(ex.grad_dict["fc_weight"].asnumpy(), np.full((2, 3), 2.0))
