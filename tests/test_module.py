"""``ax.mod.Module`` against MXNet 1.9.1's Module (tests/data/rnn_cells/module_sgd*, written by
tools/make_rnn_cells_reference.py): three SGD steps with momentum and weight decay give MXNet's
parameters; binding rules, reshaping on a new batch size, checkpoints and MXNet's errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from zoo_params import relative_error

DATA = Path(__file__).parent / "data" / "rnn_cells"


def _reference() -> dict[str, np.ndarray]:
    with np.load(DATA / "module_sgd.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _mlp_module(**kwargs) -> ax.mod.Module:
    return ax.mod.Module(ax.sym.load(str(DATA / "module_sgd-symbol.json")), **kwargs)


def _start_params(ref) -> dict[str, np.ndarray]:
    return {k[4:]: v for k, v in ref.items() if k.startswith("arg:")}


def test_sgd_steps_match_mxnet():
    ref = _reference()
    mod = _mlp_module()
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    mod.set_params(_start_params(ref), {})
    mod.init_optimizer(optimizer="sgd", optimizer_params=(("learning_rate", 0.5), ("momentum", 0.9), ("wd", 1e-3)))
    for step in range(3):
        batch = ax.io.DataBatch(data=[ax.nd.array(ref[f"batch{step}:data"])],
                                label=[ax.nd.array(ref[f"batch{step}:label"])])
        mod.forward_backward(batch)
        mod.update()
    args, aux = mod.get_params()
    assert aux == {}
    for name, value in args.items():
        err = relative_error(value.asnumpy(), ref[f"final:{name}"].astype(np.float64), 1e-6)
        assert err <= 1e-5, f"{name}: relative error {err:.2e}"


def test_new_batch_size_reshapes_and_keeps_parameters():
    ref = _reference()
    mod = _mlp_module()
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))], for_training=False)
    mod.set_params(_start_params(ref), {})
    x = np.random.default_rng(0).uniform(-1, 1, (7, 5)).astype(np.float32)
    mod.forward(ax.io.DataBatch(data=[ax.nd.array(x)], label=[ax.nd.zeros((7,))]))
    assert mod.output_shapes == [("softmax_output", (7, 3))]
    p = _start_params(ref)
    hidden = np.maximum(x @ p["fc1_weight"].T + p["fc1_bias"], 0)
    logits = hidden @ p["fc2_weight"].T + p["fc2_bias"]
    expected = np.exp(logits - logits.max(1, keepdims=True))
    expected /= expected.sum(1, keepdims=True)
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_grad_req_rules():
    mod = _mlp_module()
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))], inputs_need_grad=True,
             grad_req="null")
    mod.init_params()
    mod.forward_backward(ax.io.DataBatch(data=[ax.nd.ones((4, 5))], label=[ax.nd.zeros((4,))]))
    assert mod.get_input_grads() == [None]
    fixed = _mlp_module(fixed_param_names=["fc1_weight"])
    fixed.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    assert fixed._exec.grad_dict.get("fc1_weight") is None
    assert fixed._exec.grad_dict["fc2_weight"] is not None


def test_init_params_patterns_and_missing():
    mod = _mlp_module()
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    ax.random.seed(11)
    mod.init_params(ax.init.Uniform(0.2))
    args, _ = mod.get_params()
    assert np.all(args["fc1_bias"].asnumpy() == 0)
    w = args["fc1_weight"].asnumpy()
    assert 0 < np.abs(w).max() <= 0.2 and np.unique(w).size == w.size
    ax.random.seed(11)
    mod.init_params(ax.init.Uniform(0.2), force_init=True)
    np.testing.assert_array_equal(mod.get_params()[0]["fc1_weight"].asnumpy(), w)
    with pytest.warns(UserWarning, match="already initialized"):
        mod.init_params()
    with pytest.raises(RuntimeError, match="fc2_bias is not presented"):
        mod.set_params({k: v for k, v in args.items() if k != "fc2_bias"}, {})
    with pytest.raises(ValueError, match='Find name "extra"'):
        mod.set_params({**args, "extra": np.zeros(1)}, {})


def test_checkpoint_round_trip(tmp_path):
    ref = _reference()
    mod = _mlp_module()
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    mod.set_params(_start_params(ref), {})
    mod.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    batch = ax.io.DataBatch(data=[ax.nd.array(ref["batch0:data"])], label=[ax.nd.array(ref["batch0:label"])])
    mod.forward_backward(batch)
    mod.update()
    prefix = str(tmp_path / "mlp")
    mod.save_checkpoint(prefix, 3, save_optimizer_states=True)
    loaded = ax.mod.Module.load(prefix, 3, load_optimizer_states=True)
    loaded.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    loaded.init_optimizer(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    for m in (mod, loaded):
        m.forward_backward(batch)
        m.update()
    for name, value in mod.get_params()[0].items():
        np.testing.assert_array_equal(loaded.get_params()[0][name].asnumpy(), value.asnumpy(), err_msg=name)


def test_mxnet_errors():
    sym = ax.sym.load(str(DATA / "module_sgd-symbol.json"))
    with pytest.raises(ValueError, match="input with name 'x' is not found in symbol.list_arguments"):
        ax.mod.Module(sym, data_names=["x"])
    with pytest.warns(UserWarning, match="label_names"):
        ax.mod.Module(sym, label_names=["y"])
    with pytest.raises(ax.AotexecError, match="one context"):
        ax.mod.Module(sym, context=[ax.cpu(0), ax.cpu(1)])
    mod = ax.mod.Module(sym)
    with pytest.raises(AssertionError, match="call bind before"):
        mod.init_params()
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    with pytest.warns(UserWarning, match="Already bound"):
        mod.bind(data_shapes=[("data", (4, 5))])


def test_fit_score_predict_match_mxnet():
    """Module.fit over an NDArrayIter (the last batch of 4 padded from the start), two epochs of
    SGD with momentum, accuracy and cross-entropy; then score and predict (padding dropped)."""
    with np.load(DATA / "module_fit.npz", allow_pickle=False) as z:
        ref = {k: z[k] for k in z.files}
    train = ax.io.NDArrayIter(ref["x"], ref["y"], batch_size=4)
    mod = _mlp_module()
    seen = {}
    mod.fit(train, eval_metric=["acc", "ce"], optimizer="sgd",
            optimizer_params=(("learning_rate", 0.2), ("momentum", 0.9)),
            arg_params=_start_params(ref), aux_params={}, num_epoch=2,
            batch_end_callback=lambda p: seen.__setitem__(p.epoch, dict(p.eval_metric.get_name_value())))
    for name, value in mod.get_params()[0].items():
        np.testing.assert_allclose(value.asnumpy(), ref[f"final:{name}"], rtol=1e-5, atol=1e-6, err_msg=name)
    for epoch in (0, 1):
        for name in ("accuracy", "cross-entropy"):
            assert seen[epoch][name] == pytest.approx(float(ref[f"train{epoch}:{name}"]), rel=1e-5), (epoch, name)
    score = dict(mod.score(train, ["acc", "ce"]))
    assert score == pytest.approx({n: float(ref[f"score:{n}"]) for n in ("accuracy", "cross-entropy")}, rel=1e-5)
    predicted = mod.predict(train)
    assert predicted.shape == (10, 3)
    np.testing.assert_allclose(predicted.asnumpy(), ref["predict"], rtol=1e-5, atol=1e-7)


def test_ndarray_iter_batches():
    x, y = np.arange(10, dtype=np.float32).reshape(5, 2), np.arange(5)
    pad = ax.io.NDArrayIter(x, y, batch_size=2)
    assert [d.shape for d in pad.provide_data] == [(2, 2)] and pad.provide_label[0].name == "softmax_label"
    batches = list(pad)
    assert [b.label[0].asnumpy().tolist() for b in batches] == [[0, 1], [2, 3], [4, 0]]
    assert [b.pad for b in batches] == [0, 0, 1] and batches[0].data[0].dtype == np.float32
    assert len(list(ax.io.NDArrayIter(x, y, batch_size=2, last_batch_handle="discard"))) == 2
    roll = ax.io.NDArrayIter(x, y, batch_size=2, last_batch_handle="roll_over")
    first = [b.label[0].asnumpy().tolist() for b in roll]
    roll.reset()
    second = [b.label[0].asnumpy().tolist() for b in roll]
    assert first == [[0, 1], [2, 3]] and second == [[4, 0], [1, 2], [3, 4]]      # MXNet's order
    with pytest.raises(ValueError, match="same number of samples"):
        ax.io.NDArrayIter(x, np.arange(4))


def test_metrics():
    acc = ax.metric.create("acc")
    acc.update([ax.nd.array([0, 1, 2])], [ax.nd.array([[0.9, 0.1, 0], [0.2, 0.7, 0.1], [0.5, 0.4, 0.1]])])
    assert acc.get() == ("accuracy", pytest.approx(2 / 3))
    mse = ax.metric.create("mse")
    mse.update([np.array([1.0, 2.0])], [np.array([1.5, 2.0])])
    mse.update([np.array([0.0])], [np.array([1.0])])
    assert mse.get()[1] == pytest.approx((0.125 + 1.0) / 2)      # per-batch means, as MXNet 1.x
    custom = ax.metric.create(lambda label, pred: float(np.abs(label - pred).sum()))
    custom.update([np.ones(3)], [np.zeros(3)])
    assert custom.get() == ("custom(<lambda>)", 3.0)
    with pytest.raises(ax.AotexecError, match="unknown metric"):
        ax.metric.create("f7")
