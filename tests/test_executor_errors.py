"""The golden error cases about binding, forward and backward give MXNet's exception and message."""
from __future__ import annotations

import pytest

import aotexec as ax
from contexts import CONTEXTS
from golden import cases, ids

ERRORS = [c for c in cases("error") if c.meta["scenario"] in ("backward_no_head_grads", "forward_bad_kwarg",
                                                               "bind_missing")]
EXC = {"MXNetError": ax.MXNetError, "ValueError": ValueError, "TypeError": TypeError}


def _run(case, ctx):
    meta = case.meta
    s = ax.sym.load_json(case.symbol_json)
    shapes = {k: tuple(v) for k, v in meta["bind_shapes"].items()}
    if meta["scenario"] == "backward_no_head_grads":
        ex = s.simple_bind(ctx, grad_req="write", **shapes)
        ex.forward(is_train=True)
        ex.backward()
    elif meta["scenario"] == "forward_bad_kwarg":
        ex = s.simple_bind(ctx, grad_req="null", **shapes)
        ex.forward(is_train=False, **{k: ax.nd.zeros(v, ctx=ctx) for k, v in meta["forward_kwargs"].items()})
    elif meta["scenario"] == "bind_missing":
        arg_shapes, _, aux_shapes = s.infer_shape(**shapes)
        zeros = {n: ax.nd.zeros(sh, ctx=ctx) for n, sh in zip(s.list_arguments(), arg_shapes) if n not in meta["omit_args"]}
        args = zeros if meta["args_form"] == "dict" else [zeros.get(n) for n in s.list_arguments()]
        aux = {n: ax.nd.zeros(sh, ctx=ctx) for n, sh in zip(s.list_auxiliary_states(), aux_shapes)} or None
        s.bind(ctx, args=args, aux_states=aux, grad_req="null")


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("case", ERRORS, ids=ids(ERRORS))
def test_error_case_matches_mxnet(case, ctx):
    exp = case.expected_json
    with pytest.raises(EXC[exp["exception_type"]]) as info:
        _run(case, ctx)
    assert exp["message_key"] in str(info.value)
    if exp["exception_type"] == "MXNetError":
        assert isinstance(info.value, RuntimeError)
    if exp["raises"] and exp["exception_type"] in ("ValueError", "TypeError"):
        assert str(info.value) == exp["message"]


def test_wrong_length_argument_list_is_mxnets_value_error():
    """MXNet 1.9.1 (symbol.py, _get_ndarray_inputs): 'Length of %s does not match the number of arguments'."""
    fc = ax.sym.FullyConnected(ax.sym.Variable("data"), num_hidden=2, name="fc")
    with pytest.raises(ValueError, match=r"^Length of args does not match the number of arguments"):
        fc.bind(ax.cpu(), [ax.nd.zeros((1, 3))])
    with pytest.raises(ValueError, match=r"^Length of args_grad does not match the number of arguments"):
        fc.bind(ax.cpu(), [ax.nd.zeros((1, 3)), ax.nd.zeros((2, 3)), ax.nd.zeros((2,))], args_grad=[ax.nd.zeros((1, 3))])
