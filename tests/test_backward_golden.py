"""Forward + backward of every golden op / net case (categories A, B, C) against MXNet 1.9.1:
outputs, gradients (write / add / null, dict forms), head-gradient forms, aux updates."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from golden import cases, ids
from contexts import CONTEXTS

TRAIN = [c for c in cases("op", "net", categories="ABC") if c.meta["backward"]]


def replay(case, ctx, fused: bool = False, mirror=None):
    """The golden README's replay procedure."""
    meta = case.meta
    s = ax.sym.load_json(case.symbol_json)
    inp = case.inputs()
    req = meta["grad_req"]
    req_of = (lambda n: req) if isinstance(req, str) else (lambda n: req[n])
    args = {n: ax.nd.array(inp[n], ctx=ctx) for n in meta["arg_names"]}
    aux = {n: ax.nd.array(inp[n], ctx=ctx) for n in meta["aux_names"]}
    grads = {n: ax.nd.array(inp["grad_init_" + n], ctx=ctx) if req_of(n) == "add" else ax.nd.zeros(inp[n].shape, ctx=ctx)
             for n in meta["arg_names"] if req_of(n) != "null"}
    ex = s.bind(ctx, args=args, args_grad=grads, grad_req=req, aux_states=aux, mirror=mirror)
    outs = None
    for _ in range(meta["repeat"]):
        hg = None
        if meta["head_grads"]:
            hgl = [ax.nd.array(inp[f"head_grad_{i}"], ctx=ctx) for i in range(len(meta["output_names"]))]
            how = meta.get("head_grads_as", "list")
            hg = hgl if how == "list" else dict(zip(meta["output_names"], hgl)) if how == "dict" else hgl[0]
        if fused:
            outs = ex.forward_backward(hg)
        else:
            outs = ex.forward(is_train=meta["is_train"])
            ex.backward(hg) if hg is not None else ex.backward()
    return ex, outs


def check(case, ex, outs):
    meta, exp = case.meta, case.expected()
    tol = dict(rtol=meta["rtol"], atol=meta["atol"])
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), exp[f"output_{i}"], err_msg=f"output {i}", **tol)
    for key in exp:
        if key.startswith("grad_"):
            name = key[5:]
            np.testing.assert_allclose(ex.grad_dict[name].asnumpy(), exp[key], err_msg=f"gradient of {name}", **tol)
        if key.startswith("aux_"):
            name = key[4:]
            np.testing.assert_allclose(ex.aux_dict[name].asnumpy(), exp[key], err_msg=f"aux {name}", **tol)
    req = meta["grad_req"]
    if isinstance(req, dict):
        for n, r in req.items():
            if r == "null":
                assert ex.grad_dict.get(n) is None


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("case", TRAIN, ids=ids(TRAIN))
def test_backward_matches_mxnet(case, ctx):
    ex, outs = replay(case, ctx)
    check(case, ex, outs)


FUSED = [c for c in TRAIN if c.meta["category"] == "C" or c.id.startswith("grad_")]


@pytest.mark.parametrize("case", FUSED, ids=ids(FUSED))
def test_fused_forward_backward_matches_mxnet(case):
    ex, outs = replay(case, ax.cpu(), fused=True)
    check(case, ex, outs)


def test_backward_without_training_forward_takes_the_gradient_at_the_arguments():
    """MXNet 1.9.1 runs backward() after bind or forward(is_train=False) too (its own
    test_executor.test_bind and test_symbol.test_zero_prop2 do): the gradient at the current
    arguments, the same as after forward(is_train=True)."""
    data = ax.sym.Variable("data")
    net = ax.sym.MakeLoss(ax.sym.sum(ax.sym.FullyConnected(data, num_hidden=2, name="fc")))
    ex = net.simple_bind(ax.cpu(), data=(2, 3))
    ex.arg_dict["data"][:] = np.arange(6).reshape(2, 3)
    ex.arg_dict["fc_weight"][:] = np.ones((2, 3))
    ex.backward()
    without = {k: v.asnumpy() for k, v in ex.grad_dict.items()}
    ex.forward(is_train=False)
    ex.backward()
    after_inference = {k: v.asnumpy() for k, v in ex.grad_dict.items()}
    ex.forward(is_train=True)
    ex.backward()
    for k, v in ex.grad_dict.items():
        np.testing.assert_allclose(without[k], v.asnumpy())
        np.testing.assert_allclose(after_inference[k], v.asnumpy())