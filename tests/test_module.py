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
