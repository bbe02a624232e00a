"""Common subexpressions merged at bind (``passes.common_expr``), as MXNet 1.9.1's
eliminate_common_expr_pass: the executed graph (``get_optimized_symbol``) against the node
lists MXNet 1.9.1 printed for the same symbols, outputs and gradients against the graph bound
with MXNET_ELIMINATE_COMMON_EXPR=0, output names kept."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax

S = ax.sym


def _cases():
    a, b, c = S.var("a"), S.var("b"), S.var("c")
    with ax.name.NameManager():
        d = a + 1
        return {"scalars": (a + 1) + (a + 2), "pair": (a + b) + (a + b), "nested": ((a + b) + c) + ((a + b) + c),
                "outputs": S.Group([a * d, a * d]), "outputs_plus": S.Group([a * d + b, a * d + b]),
                "dropout": S.Dropout(a) + S.Dropout(a)}


# MXNet 1.9.1: ex.get_optimized_symbol().get_internals().list_outputs() and ex.output_dict keys
MXNET = {
    "scalars": (["a", "_plusscalar1_output", "_plusscalar2_output", "_plus0_output"], ["_plus0_output"]),
    "pair": (["a", "b", "_plus1_output", "_plus3_output"], ["_plus3_output"]),
    "nested": (["a", "b", "_plus4_output", "c", "_plus5_output", "_plus8_output"], ["_plus8_output"]),
    "outputs": (["a", "_plusscalar0_output", "_mul0_output", "_mul0_0_copy_output"], ["_mul0_output", "_mul1_output"]),
    "outputs_plus": (["a", "_plusscalar0_output", "_mul2_output", "b", "_plus9_output", "_plus9_0_copy_output"],
                     ["_plus9_output", "_plus10_output"]),
    "dropout": (["a", "dropout0_output", "dropout1_output", "_plus11_output"], ["_plus11_output"]),
}


@pytest.mark.parametrize("name", list(MXNET))
def test_executed_graph_as_mxnet(name, monkeypatch):
    sym = _cases()[name]
    shapes = {n: (2, 3) for n in sym.list_arguments()}
    ex = sym.simple_bind(ax.cpu(), **shapes)
    internals, outputs = MXNET[name]
    assert ex.get_optimized_symbol().get_internals().list_outputs() == internals
    assert list(ex.output_dict) == outputs
    if name == "dropout":
        return
    monkeypatch.setenv("MXNET_ELIMINATE_COMMON_EXPR", "0")
    plain = sym.simple_bind(ax.cpu(), **shapes)
    assert len(plain.get_optimized_symbol().get_internals().list_outputs()) == len(sym.get_internals().list_outputs())
    rng = np.random.default_rng(1)
    values = {n: rng.uniform(-1, 1, (2, 3)).astype(np.float32) for n in shapes}
    for e in (ex, plain):
        outs = e.forward(is_train=True, **values)
        e.backward([ax.nd.array(np.full((2, 3), 0.5 + i, np.float32)) for i in range(len(outs))])
    for got, want in zip(ex.outputs, plain.outputs):
        np.testing.assert_allclose(got.asnumpy(), want.asnumpy(), rtol=1e-6)
    for n in shapes:
        np.testing.assert_allclose(ex.grad_dict[n].asnumpy(), plain.grad_dict[n].asnumpy(), rtol=1e-6)
    assert ex.outputs[0] is not ex.outputs[-1] or len(ex.outputs) == 1     # repeated outputs: own arrays


def test_user_symbol_unchanged():
    sym = _cases()["pair"]
    before = sym.tojson()
    sym.simple_bind(ax.cpu(), a=(2, 3), b=(2, 3))
    assert sym.tojson() == before
