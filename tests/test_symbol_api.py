"""Symbol API conveniences and bad-input errors (MXNet 1.x behaviour)."""
from __future__ import annotations

import copy
import json
import pickle
import re

import numpy as np
import pytest

import aotexec as ax

S = ax.sym


def test_unknown_op_in_json_names_op_and_node():
    doc = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                     {"op": "FancyOp", "name": "fancy1", "inputs": [[0, 0, 0]]}],
           "arg_nodes": [0], "heads": [[1, 0, 0]]}
    with pytest.raises(ax.MXNetError, match="FancyOp.*fancy1"):
        S.load_json(json.dumps(doc))


def test_missing_required_parameter_names_it():
    with pytest.raises(ax.MXNetError, match="Required parameter num_hidden of int is not presented.*fc9"):
        S.FullyConnected(S.Variable("x"), name="fc9")
    doc = {"nodes": [{"op": "null", "name": "x", "inputs": []},
                     {"op": "Convolution", "name": "c1", "attrs": {"kernel": "(3, 3)"}, "inputs": [[0, 0, 0]]}],
           "heads": [[1, 0, 0]]}
    with pytest.raises(ax.MXNetError, match="num_filter.*c1"):
        S.load_json(json.dumps(doc))


def test_bad_parameter_value_and_unknown_parameter():
    """MXNet 1.9.1's (dmlc's) messages, read from mxnet 1.9.1: the attributes given in the
    operator's description, an enum's names sorted, 1.9.1's five activation types."""
    with pytest.raises(ax.MXNetError, match=re.escape(
            "Invalid Parameter format for num_hidden expect int but value='many', "
            'in operator FullyConnected(name="fc", num_hidden="many")')):
        S.FullyConnected(S.Variable("x"), num_hidden="many", name="fc")
    with pytest.raises(ax.MXNetError, match="Cannot find argument 'bogus'"):
        S.FullyConnected(S.Variable("x"), num_hidden=2, bogus=1)
    with pytest.raises(ax.MXNetError, match=re.escape(
            "Invalid Input: 'mish', valid values are: {'relu', 'sigmoid', 'softrelu', 'softsign', 'tanh'}, "
            'in operator Activation(name="a", act_type="mish")')):
        S.Activation(S.Variable("x"), act_type="mish", name="a")


@pytest.mark.parametrize("text,match", [
    ("{not json", "malformed symbol JSON"),
    ("[]", "expected an object"),
    ('{"nodes": [{"op": "null"}], "heads": []}', "needs 'op' and 'name'"),
    ('{"nodes": [{"op": "relu", "name": "r", "inputs": [[5, 0, 0]]}], "heads": [[0, 0, 0]]}', "not an earlier node"),
    ('{"nodes": [{"op": "null", "name": "x", "inputs": []}], "heads": [[3, 0, 0]]}', "bad head"),
])
def test_malformed_json_is_a_clear_error(text, match):
    with pytest.raises(ax.MXNetError, match=match):
        S.load_json(text)


def test_contradictory_shapes_name_node_and_shapes():
    a, b = S.Variable("a"), S.Variable("b")
    # MXNet 1.9.1's words (elemwise_op_common.h, ElemwiseAttr)
    with pytest.raises(ax.MXNetError, match=r"Error in operator _plus0: Incompatible attr in node _plus0 at 1-th "
                                            r"input: expected \[4,3\], got \[2,3\]"):
        with ax.name.NameManager():
            (a + b).infer_shape(a=(4, 3), b=(2, 3))


def test_pre_1_0_json_with_param_and_attr_keys():
    old = {"nodes": [{"op": "null", "name": "data", "param": {}, "inputs": [], "backward_source_id": -1},
                     {"op": "null", "name": "fc_weight", "param": {}, "inputs": [], "backward_source_id": -1},
                     {"op": "null", "name": "fc_bias", "param": {}, "inputs": [], "backward_source_id": -1},
                     {"op": "FullyConnected", "name": "fc", "param": {"no_bias": "False", "num_hidden": "7"},
                      "attr": {"ctx_group": "stage1"}, "inputs": [[0, 0], [1, 0], [2, 0]], "backward_source_id": -1}],
           "arg_nodes": [0, 1, 2], "heads": [[3, 0]]}
    s = S.load_json(json.dumps(old))
    assert s.list_arguments() == ["data", "fc_weight", "fc_bias"]
    assert s.infer_shape(data=(2, 5))[1] == [(2, 7)]


def test_python_operators_fluent_methods_and_reflected_scalars():
    with ax.name.NameManager():
        x, y = S.Variable("x"), S.Variable("y")
        ops = [(x % y).name, (2 / x).name, (1 - x).name, (2 ** x).name, (-x).name, abs(x).name,
               (x == 1).name, (x < y).name, x.split(num_outputs=2)[0].name, x.astype("float16").name]
    # MXNet 1.9.1's names (its fluent split is op.split, astype op.cast)
    assert ops == ["_mod0", "_rdivscalar0", "_rminusscalar0", "_rpowerscalar0", "_mulscalar0", "abs0",
                   "_equal_scalar0", "_lesser0", "split0", "cast0"]
    r = x.reshape((0, -1)).sum(axis=1)
    assert r.infer_shape(x=(2, 3, 4))[1] == [(2,)]
    assert x.astype("float16").infer_type(x=np.float32)[1] == [np.float16]


def test_group_indexing_internals_children_len_iter():
    x = S.Variable("x")
    fc = S.FullyConnected(x, num_hidden=3, name="fc")
    g = S.Group([fc, S.relu(fc, name="r")])
    assert len(g) == 2 and [s.name for s in g] == ["fc", "r"]
    assert g["r_output"].name == "r" and g[0].name == "fc"
    assert fc.get_internals().list_outputs() == ["x", "fc_weight", "fc_bias", "fc_output"]
    assert fc.get_children().list_outputs() == ["x", "fc_weight", "fc_bias"]
    assert x.get_children() is None
    with pytest.raises(ax.base.NotImplementedForSymbol):
        bool(x)


def test_composition_deepcopy_pickle():
    data = S.Variable("data")
    net = S.FullyConnected(data, num_hidden=4, name="fc")
    inner = S.Activation(S.Variable("z"), act_type="relu", name="act")
    composed = net(data=inner)
    assert composed.list_arguments() == ["z", "fc_weight", "fc_bias"]
    assert net.list_arguments() == ["data", "fc_weight", "fc_bias"]
    clone = copy.deepcopy(net)
    assert clone.tojson() == net.tojson() and clone._outputs[0].node is not net._outputs[0].node
    again = pickle.loads(pickle.dumps(net))
    assert again.tojson() == net.tojson()


def test_gen_atomic_symbol_is_the_uncomposed_head_op():
    """Expected names and attributes from MXNet 1.9.1 (test_symbol.py's
    test_gen_atomic_symbol_multiple_outputs, run against mxnet 1.9.1 for the values)."""
    rnn = S.RNN(S.var("data"), S.var("param"), S.var("h0"), S.var("h1"), state_size=10, num_layers=2,
                bidirectional=True, state_outputs=True, mode="lstm")
    assert rnn.name == "rnn0"
    atomic = rnn._gen_atomic_symbol()
    assert atomic.list_arguments() == [] and atomic.name == ""
    assert atomic.list_outputs() == ["output", "state_output", "statecell_output"]
    assert atomic.list_attr() == {"state_size": "10", "num_layers": "2", "bidirectional": "True",
                                  "state_outputs": "True", "mode": "lstm"}
    fc = S.FullyConnected(S.var("x"), num_hidden=3, name="fc")._gen_atomic_symbol()
    named = fc(S.var("y"), name="fc2")
    assert named.list_arguments() == ["y", "fc2_weight", "fc2_bias"] and named.list_outputs() == ["fc2_output"]
    unnamed = fc(data=S.var("z"))
    assert unnamed.list_arguments() == ["z", "weight", "bias"] and unnamed.list_outputs() == ["output"]
    ex = unnamed.simple_bind(ax.cpu(), z=(2, 4))
    ex.arg_dict["z"][:] = 1.0
    ex.arg_dict["weight"][:] = 0.5
    ex.arg_dict["bias"][:] = 0.25
    np.testing.assert_allclose(ex.forward()[0].asnumpy(), np.full((2, 3), 2.25, np.float32))
    with pytest.raises(ax.AotexecError, match="only works for nongrouped symbol"):
        S.Group([rnn[0], rnn[1] + 1])._gen_atomic_symbol()
    # the first output's attributes, as nnvm's shallow ListAttrs
    assert S.Group([S.var("a", attr={"x": "1"}), S.var("b")]).list_attr() == {"x": "1"}
    assert S.Group([S.var("b"), S.var("a", attr={"x": "1"})]).list_attr() == {}


def test_variable_attributes_and_attr_scope():
    v = S.Variable("w", shape=(2, 3), dtype="float16", lr_mult=2.0, init='["zero", {}]', __foo__="bar")
    assert v.attr("__shape__") == "(2, 3)" and v.attr("lr_mult") == "2.0" and v.attr("__foo__") == "bar"
    assert v.infer_type()[0] == [np.float16]
    with ax.AttrScope(ctx_group="dev1"):
        fc = S.FullyConnected(S.Variable("d"), num_hidden=2, name="fc")
    assert fc.attr("ctx_group") == "dev1" and fc.list_attr()["__ctx_group__"] == "dev1"
    with pytest.raises(ValueError, match="double underscores"):
        S.Variable("x", mood="happy")


def test_legacy_unknown_shapes_and_np_shape():
    x = S.Variable("x")
    fc = S.FullyConnected(x, num_hidden=3, name="fc")
    arg, out, _ = fc.infer_shape_partial(x=(0, 5))
    assert arg == [(0, 5), (3, 5), (3,)] and out == [(0, 3)]
    with ax.np_shape():
        arg, out, _ = fc.infer_shape_partial(x=(-1, 5))
        assert arg[0] == (-1, 5) and out == [(-1, 3)]
        arg, _, _ = fc.infer_shape_partial()
        assert arg[0] is None


def test_positional_none_is_an_input_left_out():
    """MXNet's generated op signatures put the inputs first: a positional None leaves one out
    (test_bilinear_resize_op's BilinearResize2D(data, None, scale_height=...)), it is no parameter."""
    s = S.contrib.BilinearResize2D(S.Variable("data"), None, scale_height=2.0, scale_width=3.0, mode="odd_scale")
    assert s.list_arguments() == ["data"]
    assert s.infer_shape(data=(1, 2, 4, 5))[1] == [(1, 2, 8, 13)]          # MXNet 1.9.1's
