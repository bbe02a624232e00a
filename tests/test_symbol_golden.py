"""Every golden case: names, shape inference and JSON round trip match MXNet 1.9.1."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import aotexec as ax
from golden import all_cases, ids

ALL = all_cases()


def _data_inputs(sym: ax.sym.Symbol) -> set[str]:
    """Variables the user created (not auto-created ``<node>_<input>`` parameters)."""
    g = sym._graph
    auto = {f"{n.name}_{iname}" for n in g.nodes if n.op is not None for iname in n.input_names()}
    return {n.name for n in g.variables() if n.name not in auto}


@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
def test_load_json_lists_mxnet_names(case):
    s = ax.sym.load_json(case.symbol_json)
    assert s.list_arguments() == case.meta["arg_names"]
    assert s.list_auxiliary_states() == case.meta["aux_names"]
    assert s.list_outputs() == case.meta["output_names"]
    if "internal_outputs" in case.meta:
        assert s.get_internals().list_outputs() == case.meta["internal_outputs"]
        assert s.list_inputs() == case.meta["list_inputs"]


@pytest.mark.parametrize("case", [c for c in ALL if "shapes" in c.meta], ids=ids([c for c in ALL if "shapes" in c.meta]))
def test_infer_shape_from_data_inputs(case):
    s = ax.sym.load_json(case.symbol_json)
    shapes = case.meta["shapes"]
    given = {n: tuple(shapes[n]) for n in _data_inputs(s) if n in shapes}
    arg, out, aux = s.infer_shape(**given)
    assert arg == [tuple(shapes[n]) for n in case.meta["arg_names"]]
    assert aux == [tuple(shapes[n]) for n in case.meta["aux_names"]]
    if "output_shapes" in case.meta:
        assert out == [tuple(x) for x in case.meta["output_shapes"]]


@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
def test_tojson_round_trip(case):
    s = ax.sym.load_json(case.symbol_json)
    text = s.tojson()
    again = ax.sym.load_json(text)
    assert again.tojson() == text
    mine, theirs = json.loads(text), json.loads(case.symbol_json)
    for key in ("arg_nodes", "node_row_ptr", "heads"):
        assert mine[key] == theirs[key]
    for a, b in zip(mine["nodes"], theirs["nodes"]):
        assert (a["op"], a["name"], a.get("attrs", {}), a["inputs"]) == (b["op"], b["name"], b.get("attrs", {}), b["inputs"])


INFER = [c for c in ALL if c.meta.get("scenario") == "infer"]


@pytest.mark.parametrize("case", INFER, ids=ids(INFER))
def test_infer_queries(case):
    s = ax.sym.load_json(case.symbol_json)
    exp = case.expected_json
    listing = exp["listing"]
    assert s.list_arguments() == listing["list_arguments"]
    assert s.list_outputs() == listing["list_outputs"]
    assert s.list_auxiliary_states() == listing["list_auxiliary_states"]
    assert s.list_inputs() == listing["list_inputs"]
    assert s.get_internals().list_outputs() == listing["internal_outputs"]
    for q in exp["queries"]:
        method = getattr(s, q["method"])
        if q["method"].startswith("infer_type"):
            kwargs = {k: np.dtype(v) for k, v in q["kwargs"].items()}
        else:
            kwargs = {k: tuple(v) for k, v in q["kwargs"].items()}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = method(**kwargs)
        r = q["result"]
        if "arg_shapes" in r:
            got = {"arg_shapes": res[0], "out_shapes": res[1], "aux_shapes": res[2]}
            for k in got:
                want = r[k]
                assert (got[k] is None) == (want is None), (q, got)
                if want is not None:
                    assert [list(x) for x in got[k]] == want, (q, got)
        else:
            got = {"arg_types": res[0], "out_types": res[1], "aux_types": res[2]}
            for k in got:
                assert [np.dtype(t).name for t in got[k]] == r[k], (q, got)
        if q.get("warnings"):
            assert [str(w.message) for w in caught] == q["warnings"]


ERR_INFER = [c for c in ALL if c.meta.get("scenario") == "infer_shape"]


@pytest.mark.parametrize("case", ERR_INFER, ids=ids(ERR_INFER))
def test_infer_shape_errors(case):
    s = ax.sym.load_json(case.symbol_json)
    exp = case.expected_json
    kwargs = {k: tuple(v) for k, v in case.meta["infer_kwargs"].items()}
    if exp["raises"]:
        with pytest.raises(ax.MXNetError) as info:
            s.infer_shape(**kwargs)
        assert exp["message_key"] in str(info.value)
        assert "fc1" in str(info.value)
        assert isinstance(info.value, RuntimeError)
    else:
        with pytest.warns(UserWarning) as rec:
            res = s.infer_shape(**kwargs)
        assert res == (None, None, None)
        assert str(rec[0].message) == exp["warning_message"]


@pytest.mark.parametrize("case", ALL, ids=ids(ALL))
def test_graphs_lint_clean_before_and_after_the_gradient_pass(case):
    from aotexec.graph import IndexedGraph
    from aotexec.passes.gradient import build_gradient_graph
    s = ax.sym.load_json(case.symbol_json)
    s._graph.lint()
    wrt = [n for n in s.list_arguments()]
    gg = build_gradient_graph(s._outputs, wrt)
    IndexedGraph(gg.heads).lint()
