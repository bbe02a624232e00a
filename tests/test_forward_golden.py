"""Forward pass of every golden op / net case (categories A, B, C) on cpu and vulkan,
compiled and run through IREE, against MXNet 1.9.1's outputs."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from golden import cases, ids
from contexts import CONTEXTS

FORWARD = cases("op", "net", categories="ABC")


def run_forward(case, ctx):
    meta = case.meta
    s = ax.sym.load_json(case.symbol_json)
    inp = case.inputs()
    args = {n: ax.nd.array(inp[n], ctx=ctx) for n in meta["arg_names"]}
    aux = {n: ax.nd.array(inp[n], ctx=ctx) for n in meta["aux_names"]}
    ex = s.bind(ctx, args=args, aux_states=aux, grad_req="null")
    return ex, ex.forward(is_train=meta["is_train"])


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("case", FORWARD, ids=ids(FORWARD))
def test_forward_matches_mxnet(case, ctx):
    meta = case.meta
    ex, outs = run_forward(case, ctx)
    exp = case.expected()
    assert len(outs) == len(meta["output_names"])
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), exp[f"output_{i}"], rtol=meta["rtol"], atol=meta["atol"],
                                   err_msg=f"output {i} ({meta['output_names'][i]})")
    if not meta["is_train"]:
        for n in meta["aux_names"]:
            np.testing.assert_allclose(ex.aux_dict[n].asnumpy(), exp[f"aux_{n}"], rtol=meta["rtol"],
                                       atol=meta["atol"])
