"""Mirroring (recomputation in backward): fewer saved activations, same results."""
from __future__ import annotations

import pytest

import aotexec as ax
from aotexec import pipeline
from aotexec.base import AotexecError
from aotexec.runtime.executor import bind_typing
from contexts import CONTEXTS
from golden import all_cases
from test_backward_golden import check, replay

NETS = [c for c in all_cases() if c.id in ("net_lenet_train", "net_resblock_train")]


def _saved(case, mirror) -> int:
    s = ax.sym.load_json(case.symbol_json)
    t = bind_typing(s, {k: tuple(v) for k, v in case.meta["shapes"].items()}, {})
    req = case.meta["grad_req"]
    reqs = {n: (req if isinstance(req, str) else req[n]) for n in s.list_arguments()}
    return pipeline.saved_activation_bytes(s, t, reqs, mirror)


@pytest.mark.parametrize("case", NETS, ids=[c.id for c in NETS])
def test_mxnet_mirroring_keeps_results(case, monkeypatch):
    monkeypatch.setenv("MXNET_BACKWARD_DO_MIRROR", "1")
    ex, outs = replay(case, ax.cpu())
    assert "_mirror" in ex.debug_str()          # the executed graph shows the recomputed nodes
    check(case, ex, outs)


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("case", NETS, ids=[c.id for c in NETS])
def test_dots_policy_saves_activations_and_keeps_results(case, ctx):
    # LeNet's activations all feed max pools, whose outputs dots keeps: nothing to save there
    assert _saved(case, "dots") < _saved(case, "none") or case.id == "net_lenet_train" and \
        _saved(case, "dots") == _saved(case, "none")
    ex, outs = replay(case, ctx, mirror="dots")
    check(case, ex, outs)


def test_dots_policy_keeps_only_matrix_products_and_outputs():
    data = ax.sym.Variable("data")
    x = ax.sym.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    x = ax.sym.BatchNorm(x, name="bn")
    x = ax.sym.Activation(x, act_type="relu", name="relu")
    net = ax.sym.SoftmaxOutput(ax.sym.FullyConnected(x, num_hidden=3, name="fc"), name="softmax")
    t = bind_typing(net, {"data": (2, 3, 5, 5), "softmax_label": (2,)}, {})
    reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in net.list_arguments()}
    saved = {(e.node.name, e.index) for e in pipeline.training_plan(net, t, reqs, "dots").residuals}
    plain = {e.node.name for e in pipeline.training_plan(net, t, reqs, "none").residuals}
    # bn's output and relu recomputed from conv's output; bn's batch statistics kept
    assert saved == {("conv", 0), ("bn", 1), ("bn", 2), ("softmax", 0)}, saved
    assert {"conv", "bn", "relu", "softmax"} <= plain, plain
    names = {n.name for n in pipeline.training_plan(net, t, reqs, "dots").typing.graph.nodes}
    assert {"bn_mirror", "relu_mirror"} <= names


def test_dots_policy_keeps_strided_pooling():
    """A strided max pool's output is kept (recomputing it reads its input, four times the
    size, and its windows); the ReLU before it is recomputed for the pool's gradient."""
    data = ax.sym.Variable("data")
    x = ax.sym.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    x = ax.sym.Activation(x, act_type="relu", name="relu")
    x = ax.sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max", name="pool")
    x = ax.sym.Convolution(x, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv2")
    net = ax.sym.MakeLoss(ax.sym.sum(x))
    t = bind_typing(net, {"data": (2, 3, 8, 8)}, {})
    reqs = {n: ("null" if n == "data" else "write") for n in net.list_arguments()}
    saved = {e.node.name for e in pipeline.training_plan(net, t, reqs, "dots").residuals}
    assert {"conv", "pool"} <= saved and "relu" not in saved, saved


def test_dots_policy_cuts_chains_of_residual_adds():
    """Recomputing a chain of ResNet v1 blocks' outputs would make each reader of the last one
    read every block's convolution output: an add whose recomputation would read more than
    ``MAX_SOURCES`` of them is kept, and the chain restarts from it."""
    from aotexec.passes.mirror import MAX_SOURCES
    blocks = MAX_SOURCES + 2
    x = ax.sym.Variable("data")
    for i in range(blocks):
        y = ax.sym.BatchNorm(ax.sym.Convolution(x, kernel=(1, 1), num_filter=4, name=f"conv{i}"), name=f"bn{i}")
        x = ax.sym.Activation(x + y if i else y, act_type="relu", name=f"relu{i}")
    net = ax.sym.MakeLoss(ax.sym.sum(x))
    t = bind_typing(net, {"data": (2, 4, 3, 3)}, {})
    reqs = {n: ("null" if n == "data" else "write") for n in net.list_arguments()}
    plan = pipeline.training_plan(net, t, reqs, "dots")
    adds = [e.node for e in plan.residuals if e.node.op is not None and e.node.op.name == "elemwise_add"]
    assert len(adds) == 1, [e.node.name for e in plan.residuals]     # block MAX_SOURCES's add: reads 4
    kept = {id(e.node) for e in plan.residuals}
    for n in plan.typing.graph.nodes:      # no recomputation reads more than MAX_SOURCES kept activations
        if n.mirror_of is not None:
            assert sum(id(e.node) in kept and e.node.op is not None and e.node.op.name != "BatchNorm"
                       for e in n.inputs) <= 2

def test_recomputed_batch_norm_reads_forward_statistics():
    """BatchNorm recomputed in backward normalizes with the batch mean and 1/std forward
    computed: backward has no more reductions than without mirroring (each batch statistic
    recomputed would be a pass over the data)."""
    data = ax.sym.Variable("data")
    x = ax.sym.Convolution(data, kernel=(1, 1), num_filter=4, name="conv", no_bias=True)
    x = ax.sym.Activation(ax.sym.BatchNorm(x, fix_gamma=False, name="bn"), act_type="relu", name="relu")
    net = ax.sym.MakeLoss(ax.sym.sum(ax.sym.FullyConnected(x, num_hidden=3, name="fc")))
    t = bind_typing(net, {"data": (2, 3, 5, 5)}, {})
    reqs = {n: ("null" if n == "data" else "write") for n in net.list_arguments()}
    plan = pipeline.training_plan(net, t, reqs, "dots")
    bn_copy = next(n for n in plan.typing.graph.nodes if n.name == "bn_mirror")
    assert [(e.node.name, e.index) for e in bn_copy.inputs[5:]] == [("bn", 1), ("bn", 2)]

    def reductions(mirror: str) -> int:
        text, _ = pipeline.entry_points(net, t, ["backward"], reqs, mirror, None, channels_last=False)
        return text.count("stablehlo.reduce")
    assert reductions("dots") == reductions("none") > 0


def test_force_mirroring_attribute_recomputes_one_node():
    data = ax.sym.Variable("data")
    fc = ax.sym.FullyConnected(data, num_hidden=8, name="fc")
    act = ax.sym.Activation(fc, act_type="tanh", name="act")
    net = ax.sym.MakeLoss(ax.sym.sum(ax.sym.square(act)))
    t = bind_typing(net, {"data": (4, 5)}, {})
    reqs = {n: "write" for n in net.list_arguments()}
    keep = pipeline.training_plan(net, t, reqs, mirror=False).residuals
    assert any(e.node.name == "act" for e in keep)
    act._set_attr(force_mirroring="True")   # MXNet honours it even with mirroring off
    forced = pipeline.training_plan(net, t, reqs, mirror=False).residuals
    assert not any(e.node.name == "act" for e in forced) and any(e.node.name == "fc" for e in forced)


def test_unknown_policy_is_a_clear_error():
    net = ax.sym.FullyConnected(ax.sym.Variable("data"), num_hidden=2, name="fc")
    with pytest.raises(AotexecError, match="mirror must be a bool or one of"):
        net.simple_bind(ax.cpu(), data=(1, 3), mirror="sometimes")


def test_dots_recomputes_for_each_reader():
    """A recomputed value read by two distant backward nodes (relu0's output: conv1's weight
    gradient, then relu0's own gradient) is recomputed once per reader, so nothing recomputed
    stays alive in between; the memory plan shrinks accordingly."""
    from aotexec.debug_str import full_graph
    from aotexec.passes.plan_memory import plan_memory
    x = ax.sym.Variable("data")
    for i in range(2):
        x = ax.sym.Convolution(x, kernel=(3, 3), num_filter=4, pad=(1, 1), name=f"conv{i}")
        x = ax.sym.Activation(ax.sym.BatchNorm(x, name=f"bn{i}"), act_type="relu", name=f"relu{i}")
    net = ax.sym.SoftmaxOutput(ax.sym.FullyConnected(x, num_hidden=3, name="fc"), name="softmax")
    t = bind_typing(net, {"data": (2, 3, 6, 6), "softmax_label": (2,)}, {})
    reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in net.list_arguments()}
    # unfused: relu0's own gradient is a reader (passes.fuse_gradients folds it into bn0's)
    g = pipeline.training_plan(net, t, reqs, "dots", fuse=False).typing.graph
    copies = [n for n in g.nodes if n.mirror_of is not None]
    assert {"relu0_mirror", "relu0_mirror_1"} <= {n.name for n in copies}
    readers: dict[int, set[int]] = {id(n): set() for n in copies}      # backward nodes reading a copy
    for n in g.nodes:
        for e in n.inputs:
            if id(e.node) in readers and n.mirror_of is None:
                readers[id(e.node)].add(id(n))
    assert all(len(r) <= 1 for r in readers.values())
    wrt = [n for n, r in reqs.items() if r != "null"]
    assert plan_memory(full_graph(net, t, wrt, "dots")[1]).total_bytes < \
        plan_memory(full_graph(net, t, wrt, "none")[1]).total_bytes


def _conv_bn_net(blocks: int = 2):
    x = ax.sym.Variable("data")
    for i in range(blocks):
        x = ax.sym.Convolution(x, kernel=(3, 3), num_filter=4, pad=(1, 1), name=f"conv{i}")
        x = ax.sym.Activation(ax.sym.BatchNorm(x, name=f"bn{i}"), act_type="relu", name=f"relu{i}")
    return ax.sym.SoftmaxOutput(ax.sym.FullyConnected(x, num_hidden=3, name="fc"), name="softmax")


def test_auto_policy_recomputes_only_where_the_plan_shrinks(monkeypatch):
    """The default (``auto``) recomputes conv-BatchNorm-ReLU blocks (their plan shrinks by
    more than AUTO_GAIN) and leaves an MLP alone (a ReLU output is saved either way)."""
    monkeypatch.delenv("MXNET_BACKWARD_DO_MIRROR", raising=False)
    mlp = ax.sym.load_json(next(c for c in all_cases() if c.id == "net_mlp_train").symbol_json)
    for net, shapes, recomputes in ((_conv_bn_net(), {"data": (2, 3, 6, 6), "softmax_label": (2,)}, True),
                                    (mlp, None, False)):
        if shapes is None:
            case = next(c for c in all_cases() if c.id == "net_mlp_train")
            shapes = {k: tuple(v) for k, v in case.meta["shapes"].items()}
        ex = net.simple_bind(ax.cpu(), grad_req="write", **shapes)
        text = ex.debug_str()
        assert ("_mirror" in text) is recomputes
        plain = net.simple_bind(ax.cpu(), grad_req="write", mirror=False, **shapes).debug_str()
        assert "_mirror" not in plain
        assert (text == plain) is not recomputes


@pytest.mark.parametrize("env, policy", [(None, "auto"), ("0", "none"), ("1", "mxnet")])
def test_environment_variable_picks_the_policy(monkeypatch, env, policy):
    from aotexec.options import Options, mirror_policy
    if env is None:
        monkeypatch.delenv("MXNET_BACKWARD_DO_MIRROR", raising=False)
    else:
        monkeypatch.setenv("MXNET_BACKWARD_DO_MIRROR", env)
    assert Options.from_env(mirror=None).mirror == policy
    assert mirror_policy("dots") == "dots" and mirror_policy(False) == "none"


def test_artifact_records_the_policy_its_modules_run(tmp_path, monkeypatch):
    """A training artifact compiled with the default policy recomputes as a bound executor
    would, and its runtime executor's debug_str shows that graph whatever the environment."""
    import numpy as np
    monkeypatch.delenv("MXNET_BACKWARD_DO_MIRROR", raising=False)
    net = _conv_bn_net()
    shapes = {"data": (2, 3, 6, 6), "softmax_label": (2,)}
    reqs = {n: ("null" if n in shapes else "write") for n in net.list_arguments()}
    art = ax.compile(net, shapes, grad_req=reqs, out=tmp_path / "a")
    assert art.manifest["mirror"] == "auto"
    monkeypatch.setenv("MXNET_BACKWARD_DO_MIRROR", "0")       # at load time: no effect on the artifact
    ex = art.simple_bind(ax.cpu(), grad_req=reqs, **shapes)
    assert "bn1_mirror" in ex.debug_str()
    ref = net.simple_bind(ax.cpu(), grad_req=reqs, mirror="auto", **shapes)
    rng = np.random.default_rng(0)
    for name, arr in ex.arg_dict.items():
        v = rng.integers(0, 3, arr.shape) if name == "softmax_label" else rng.standard_normal(arr.shape)
        arr[:] = v
        ref.arg_dict[name][:] = v
    for e in (ex, ref):
        e.forward(is_train=True)
        e.backward()
    for name in ("conv0_weight", "bn1_gamma", "fc_weight"):
        np.testing.assert_allclose(ex.grad_dict[name].asnumpy(), ref.grad_dict[name].asnumpy(), rtol=1e-5, atol=1e-6)


def test_resnet8_trains_without_recomputation_like_with_it():
    """The benchmark ResNet-8 (b16) with mirror=False: IREE 3.13 rejects its backward with
    column reductions in row blocks (Emitter.reduce), so build compiles it again with whole
    ones; its gradients are the default policy's (recomputed BatchNorm / ReLU)."""
    import sys
    from pathlib import Path
    import numpy as np
    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    import nets
    s = nets.symbol(ax.sym, "resnet8")
    args, aux = nets.shapes_of(s, "resnet8")
    data, label, params, auxv = nets.inputs_and_params("resnet8", args, aux)
    req = {n: ("null" if n in ("data", "softmax_label") else "write") for n in args}
    grads = {}
    for mirror in (False, None):
        ex = s.simple_bind(ax.cpu(), grad_req=req, data=data.shape, softmax_label=label.shape, mirror=mirror)
        ex.copy_params_from(params, auxv)
        ex.forward(is_train=True, data=data, softmax_label=label)
        ex.backward()
        grads[mirror] = {n: g.asnumpy() for n, g in ex.grad_dict.items() if g is not None}
    for n, g in grads[None].items():
        np.testing.assert_allclose(grads[False][n], g, rtol=1e-4, atol=1e-5, err_msg=n)
