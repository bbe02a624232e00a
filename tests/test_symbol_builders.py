"""Golden graphs rebuilt with ax.sym give MXNet's node names, argument order and JSON attrs."""
from __future__ import annotations

import json

import pytest

import aotexec as ax
from golden import GOLDEN

S = ax.sym


def lenet():
    x = S.Variable("data")
    x = S.Convolution(x, kernel=(3, 3), num_filter=4, name="conv1")
    x = S.Activation(x, act_type="tanh", name="tanh1")
    x = S.Pooling(x, kernel=(2, 2), pool_type="max", stride=(2, 2), name="pool1")
    x = S.Convolution(x, kernel=(3, 3), num_filter=6, name="conv2")
    x = S.Activation(x, act_type="tanh", name="tanh2")
    x = S.Pooling(x, kernel=(2, 2), pool_type="max", stride=(2, 2), name="pool2")
    x = S.Flatten(x, name="flatten")
    x = S.FullyConnected(x, num_hidden=10, name="fc1")
    x = S.Activation(x, act_type="tanh", name="tanh3")
    x = S.FullyConnected(x, num_hidden=3, name="fc2")
    return S.SoftmaxOutput(x, name="softmax")


def resblock():
    data = S.Variable("data")
    x = S.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), no_bias=True, name="conv1")
    x = S.BatchNorm(x, fix_gamma=False, name="bn1")
    x = S.Activation(x, act_type="relu", name="relu1")
    x = S.Convolution(x, kernel=(3, 3), num_filter=4, pad=(1, 1), no_bias=True, name="conv2")
    x = S.BatchNorm(x, fix_gamma=False, name="bn2")
    x = S.Activation(x + data, act_type="relu", name="relu2")
    x = S.Pooling(x, global_pool=True, kernel=(1, 1), pool_type="avg", name="gap")
    x = S.FullyConnected(x, num_hidden=3, name="fc")
    return S.SoftmaxOutput(x, name="softmax")


def mlp(hidden=(8, 6, 3)):
    x = S.Variable("data")
    for i, h in enumerate(hidden, 1):
        x = S.FullyConnected(x, num_hidden=h, name=f"fc{i}")
        if i < len(hidden):
            x = S.Activation(x, act_type="relu", name=f"relu{i}")
    return S.SoftmaxOutput(x, name="softmax")


def dropout_mlp():
    x = S.FullyConnected(S.Variable("data"), num_hidden=6, name="fc1")
    x = S.Dropout(S.Activation(x, act_type="relu", name="relu1"), p=0.5, name="drop1")
    return S.SoftmaxOutput(S.FullyConnected(x, num_hidden=3, name="fc2"), name="softmax")


def shared_weights():
    w = S.Variable("shared_weight")
    x = S.FullyConnected(S.Variable("data"), weight=w, bias=S.Variable("b1"), num_hidden=4, name="layer1")
    x = S.Activation(x, act_type="tanh", name="act")
    return S.FullyConnected(x, weight=w, bias=S.Variable("b2"), num_hidden=4, name="layer2")


def group_multi_output():
    fc = S.FullyConnected(S.Variable("data"), num_hidden=3, name="fc")
    return S.Group([fc, S.relu(fc) * 2.0, S.sum(fc, axis=1)])


def mixed_heads():
    data = S.Variable("data")
    sm = S.SoftmaxOutput(S.FullyConnected(data, num_hidden=3, name="fc1"), name="softmax")
    return S.Group([sm, S.FullyConnected(data, num_hidden=2, name="fc2")])


def aggregate():
    a = S.Variable("a")
    return a * a + a


def scalar_ops():
    v = [S.Variable(n) for n in "abcde"]
    return S.Group([v[0] + 2.5, v[1] * -1.5, 3.0 / v[2], 2.0 - v[3], v[4] ** 3])


def identity_blockgrad():
    return S.Group([S.identity(S.Variable("a")), S.BlockGrad(S.Variable("b")), S.stop_gradient(S.Variable("c"))])


def reduce_all():
    a, b, c, d = (S.Variable(n) for n in "abcd")
    return S.Group([S.sum(a), S.mean(b, axis=1), S.max(c, axis=(1, 2), keepdims=True), S.min(d, axis=0)])


def concat():
    a, b, c, d, e = (S.Variable(n) for n in "abcde")
    return S.Group([S.Concat(a, b, c, dim=1, name="cat1"), S.Concat(d, e, dim=0, name="cat0")])


def upsampling():
    return S.UpSampling(S.Variable("data"), scale=2, sample_type="nearest", name="up")


BUILDERS = {
    "net_lenet_train": lenet, "net_lenet_infer": lenet, "net_resblock_train": resblock,
    "net_resblock_infer": resblock, "net_mlp_train": mlp, "net_mlp_infer": mlp,
    "net_dropout_infer": dropout_mlp, "net_shared_weights_train": shared_weights,
    "grad_group_multi_output": group_multi_output, "grad_mixed_loss_and_nonloss_heads": mixed_heads,
    "grad_aggregate_a_mul_a_plus_a": aggregate, "op_scalar_ops": scalar_ops,
    "op_identity_BlockGrad_stop_gradient": identity_blockgrad, "op_reduce_all": reduce_all,
    "op_Concat_dim1_dim0": concat, "op_UpSampling_nearest": upsampling,
}


def _nodes(text):
    doc = json.loads(text)
    return [(n["op"], n["name"], n.get("attrs", {}), n["inputs"]) for n in doc["nodes"]], doc["heads"]


@pytest.mark.parametrize("case", sorted(BUILDERS))
def test_python_built_graph_equals_mxnet_json(case):
    with ax.name.NameManager():
        sym = BUILDERS[case]()
    golden = (GOLDEN / case / "symbol.json").read_text()
    assert _nodes(sym.tojson()) == _nodes(golden)
    assert sym.list_arguments() == ax.sym.load_json(golden).list_arguments()


def test_name_manager_restarts_automatic_names():
    with ax.name.NameManager():
        a = S.Variable("a")
        assert (a + a).name == "_plus0" and (a + a).name == "_plus1"
    with ax.name.NameManager():
        assert (a * 2).name == "_mulscalar0"
