"""Recurrent ops (RNN in every mode, _rnn_param_concat, SequenceMask / SequenceLast /
SequenceReverse) against MXNet 1.9.1 (tests/data/rnn, written by tools/make_rnn_reference.py in
float64): outputs and gradients within 1e-4 relative, on cpu and vulkan for the Gluon models.

What MXNet's CPU kernels refuse (``use_sequence_length``, LSTM state clipping, training LSTM with
a projection) is checked against tests/rnn_numpy.py (cuDNN's semantics, float64) and central
differences of it; that reference is itself checked against MXNet's files first.  Loops keep the
module's size independent of the sequence length (emitted op counts at 8 and 64 steps)."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from aotexec.base import AotexecError
from contexts import CONTEXTS
from gradcheck import check_numeric_gradient
from rnn_numpy import numeric_grad, param_size, rnn_forward
from zoo_params import relative_error

DATA = Path(__file__).parent / "data" / "rnn"
META = json.loads((DATA / "cases.json").read_text())
CASES = {c["name"]: c for c in META["cases"]}
RTOL = 1e-4


@lru_cache(maxsize=None)
def _arrays(name: str) -> dict[str, np.ndarray]:
    with np.load(DATA / f"{name}.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _close(actual: np.ndarray, expected: np.ndarray, what: str, floor: float = 1e-6) -> None:
    err = relative_error(np.asarray(actual), expected.astype(np.float64), floor)
    assert err <= RTOL, f"{what}: relative error {err:.2e}"


def _run_case(name: str, ctx) -> None:
    case, a = CASES[name], _arrays(name)
    sym = ax.sym.load(str(DATA / f"{name}-symbol.json"))
    args = {k[4:]: v for k, v in a.items() if k.startswith("arg:")}
    grads = {k: ax.nd.zeros(args[k].shape, ctx=ctx) for k in case["grads"]}
    req = {k: ("write" if k in grads else "null") for k in args}
    ex = sym.bind(ctx, {k: ax.nd.array(v, ctx=ctx) for k, v in args.items()}, args_grad=grads or None,
                  grad_req=req if grads else "null")
    outs = ex.forward(is_train=case["train"])
    for i, o in enumerate(outs):
        _close(o.asnumpy(), a[f"out:{i}"], f"{name} output {i}")
    if not case["train"]:
        return
    ex.backward([ax.nd.array(a[f"head:{i}"], ctx=ctx) for i in range(len(outs))])
    for k in case["grads"]:
        _close(grads[k].asnumpy(), a[f"grad:{k}"], f"{name} gradient of {k}")


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c["op"] == "RNN"])
def test_rnn_matches_mxnet(name):
    _run_case(name, ax.cpu())


@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c["op"] != "RNN"])
def test_sequence_ops_match_mxnet(name):
    _run_case(name, ax.cpu())


@pytest.mark.parametrize("ctx", CONTEXTS[1:2])
@pytest.mark.parametrize("name", ["lstm_l2_bi_states", "seqreverse_len"])
def test_ops_on_vulkan(name, ctx):
    _run_case(name, ctx)


# ---------------------------------------------------------------- Gluon models
def _gluon(net: str, ctx, steps: int = 8):
    sym, arg_params, _ = ax.model.load_checkpoint(str(DATA / net), 0)
    req = {n: ("null" if n == "data" else "write") for n in sym.list_arguments()}
    ex = sym.simple_bind(ctx, grad_req=req, data=(2, steps))
    ex.copy_params_from(arg_params)
    return ex


@pytest.mark.parametrize("ctx", CONTEXTS[:2])
@pytest.mark.parametrize("net", [n["name"] for n in META["nets"]])
def test_gluon_model_inference_and_training_step(net, ctx):
    """The exported model (Embedding, SwapAxis, _rnn_param_concat of reshaped weights, _zeros
    begin states of unknown batch, RNN, Dense) with its .params: inference output, then the
    training step's output and every parameter's gradient."""
    a = _arrays(net)
    ex = _gluon(net, ctx)
    _close(ex.forward(is_train=False, data=a["data"])[0].asnumpy(), a["output"], f"{net} inference")
    _close(ex.forward(is_train=True)[0].asnumpy(), a["output"], f"{net} training output")
    ex.backward(ax.nd.array(a["head"], ctx=ctx))
    grads = {k[5:]: v for k, v in a.items() if k.startswith("grad:")}
    assert sorted(grads) == sorted(n for n in ex.grad_dict if n != "data")
    floor = 1e-6 * max(float(np.abs(g).max()) for g in grads.values())
    for k, g in grads.items():
        _close(ex.grad_dict[k].asnumpy(), g, f"{net} gradient of {k}", floor)


def test_gluon_shapes_come_from_the_rnn():
    """The i2h weight is exported as (64, 0): _rnn_param_concat and Reshape infer it backwards
    from the RNN's parameter size, the begin states' 0 batch from the data."""
    sym = ax.sym.load(str(DATA / "lstm_lm-symbol.json"))
    arg_shapes, out_shapes, _ = sym.infer_shape(data=(2, 8))
    shapes = dict(zip(sym.list_arguments(), arg_shapes))
    assert shapes["lm_lstm0_l0_i2h_weight"] == (64, 8)
    assert shapes["lm_lstm0_l1_i2h_weight"] == (64, 16)
    assert out_shapes == [(2, 8, 20)]


OP = re.compile(r'= "stablehlo\.(\w+)"')


def _op_counts(steps: int) -> dict[str, int]:
    from aotexec import pipeline
    from aotexec.runtime.bind_args import bind_typing
    sym = ax.sym.load(str(DATA / "lstm_lm-symbol.json"))
    typing = bind_typing(sym, {"data": (2, steps)}, {})
    reqs = {n: ("null" if n == "data" else "write") for n in sym.list_arguments()}
    text, _ = pipeline.entry_points(sym, typing, ["forward_infer", "forward_train", "backward", "train_step"],
                                    reqs, "none")
    counts: dict[str, int] = {}
    for m in OP.finditer(text):
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return counts


@pytest.mark.lowering
def test_module_size_does_not_grow_with_the_sequence():
    """The LSTM language model at 8 and 64 steps emits the same ops (only tensor types differ):
    each layer's recurrence is one stablehlo.while, so compile time does not grow with length."""
    short, long = _op_counts(8), _op_counts(64)
    assert short == long
    # a loop per layer in forward_infer, forward_train and backward, two in train_step
    assert short["while"] == 2 + 2 + 2 + 4


# ---------------------------------------------------------------- beyond MXNet's CPU kernels
def test_numpy_reference_matches_mxnet():
    """tests/rnn_numpy.py (the reference for what follows) against MXNet's outputs: no compile."""
    for name, case in CASES.items():
        if case["op"] != "RNN":
            continue
        a, p = _arrays(name), case["attrs"]
        args = {k[4:]: v for k, v in a.items() if k.startswith("arg:")}
        outs = rnn_forward(p["mode"], args["data"], args["rnn_parameters"], args["rnn_state"],
                           args.get("rnn_state_cell"), 5, p["num_layers"], p.get("bidirectional", False),
                           p.get("projection_size"))
        for i in range(sum(k.startswith("out:") for k in a)):
            _close(outs[i], a[f"out:{i}"], f"{name} numpy output {i}")


def _rnn_sym(**kw):
    return ax.sym.RNN(ax.sym.Variable("data"), name="rnn", state_outputs=True, **kw)


def _check_against_numpy(sym, attrs: dict, data_shape, lengths=None, seed: int = 0, ctx=None) -> None:
    """Forward and every gradient of ``sym`` against rnn_numpy (float64) and its central differences."""
    ctx = ctx or ax.cpu()
    rng = np.random.default_rng(seed)
    shapes, _, _ = sym.infer_shape(data=data_shape)
    args = {n: rng.uniform(-0.8, 0.8, s).astype(np.float32) for n, s in zip(sym.list_arguments(), shapes)}
    if lengths is not None:
        args["rnn_sequence_length"] = np.asarray(lengths, np.float32)
    wrt = [n for n in args if n != "rnn_sequence_length"]
    grads = {n: ax.nd.zeros(args[n].shape, ctx=ctx) for n in wrt}
    ex = sym.bind(ctx, {k: ax.nd.array(v, ctx=ctx) for k, v in args.items()}, args_grad=grads,
                  grad_req={n: ("write" if n in grads else "null") for n in args})
    outs = [o.asnumpy() for o in ex.forward(is_train=True)]
    heads = [rng.uniform(-1, 1, o.shape) for o in outs]
    ex.backward([ax.nd.array(h.astype(np.float32), ctx=ctx) for h in heads])

    def forward(values: dict):
        return rnn_forward(attrs["mode"], values["data"], values["rnn_parameters"], values["rnn_state"],
                           values.get("rnn_state_cell"), attrs["state_size"], attrs["num_layers"],
                           attrs.get("bidirectional", False), attrs.get("projection_size"), attrs.get("clip"),
                           False, values.get("rnn_sequence_length"))
    for o, r in zip(outs, forward(args)):
        _close(o, r, "output")
    for name in wrt:
        def objective(v, name=name):
            res = forward(args | {name: v})
            return sum(float(np.sum(r * h)) for r, h in zip(res, heads) if r is not None)
        _close(grads[name].asnumpy(), numeric_grad(objective, args[name]), f"gradient of {name}", 1e-5)


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
def test_sequence_length_bidirectional(mode):
    """cuDNN's padded layout: each sequence stops at its length (state kept, zeros out); the
    backward direction starts at its last valid step."""
    attrs = dict(mode=mode, state_size=3, num_layers=2, bidirectional=True)
    sym = _rnn_sym(use_sequence_length=True, **attrs)
    _check_against_numpy(sym, attrs, (5, 3, 2), lengths=[5, 2, 1])


def test_lstm_state_clipping():
    attrs = dict(mode="lstm", state_size=3, num_layers=2, clip=(-0.2, 0.25))
    sym = _rnn_sym(mode="lstm", state_size=3, num_layers=2, lstm_state_clip_min=-0.2, lstm_state_clip_max=0.25)
    _check_against_numpy(sym, attrs, (4, 2, 3), seed=1)


def test_lstm_projection_training():
    """MXNet 1.9.1 runs LSTM with a projection on CPU in inference only (checked against it above);
    its gradient against central differences."""
    attrs = dict(mode="lstm", state_size=4, num_layers=2, bidirectional=True, projection_size=2)
    _check_against_numpy(_rnn_sym(**attrs), attrs, (4, 2, 3), seed=2)


def test_sequence_ops_finite_differences():
    """SequenceMask / Last / Reverse with lengths along both axes, against the compiled forward."""
    a, b, lens = (ax.sym.Variable(n) for n in ("a", "b", "len"))
    outs = ax.sym.Group([
        ax.sym.SequenceMask(a, lens, use_sequence_length=True, value=2.0, name="m0"),
        ax.sym.SequenceMask(b, lens, use_sequence_length=True, axis=1, name="m1"),
        ax.sym.SequenceLast(a, lens, use_sequence_length=True, name="l0"),
        ax.sym.SequenceLast(b, lens, use_sequence_length=True, axis=1, name="l1"),
        ax.sym.SequenceReverse(a, lens, use_sequence_length=True, name="r0"),
    ])
    rng = np.random.default_rng(3)
    check_numeric_gradient(outs, {"a": rng.uniform(-1, 1, (4, 3, 2)), "b": rng.uniform(-1, 1, (3, 4)),
                                  "len": np.array([4, 1, 2])}, grad_nodes=["a", "b"])


def test_rnn_parameter_errors():
    with pytest.raises(AotexecError, match="Projection is only supported for LSTM"):
        _rnn_sym(mode="gru", state_size=4, num_layers=1, projection_size=2)
    with pytest.raises(AotexecError, match="must be specified together"):
        _rnn_sym(mode="lstm", state_size=4, num_layers=1, lstm_state_clip_min=-1.0)
    sym = _rnn_sym(mode="lstm", state_size=4, num_layers=1)
    shapes, _, _ = sym.infer_shape(data=(3, 2, 5))
    assert dict(zip(sym.list_arguments(), shapes))["rnn_parameters"] == (param_size("lstm", 5, 4, 1, 1),)
    assert sym.list_outputs() == ["rnn_output", "rnn_state_output", "rnn_statecell_output"]


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_dropout_between_layers_in_training(mode):
    """MXNet drops each stacked layer's output but the last, in training only: inference equals
    the p=0 layer, a seed repeats the masks, and the gradient goes through the masks the
    forward drew (central differences of the forward at that seed, float64 objective)."""
    attrs = dict(mode=mode, state_size=3, num_layers=3)
    sym = _rnn_sym(p=0.5, **attrs)
    rng = np.random.default_rng(4)
    shapes, _, _ = sym.infer_shape(data=(4, 2, 3))
    args = {n: rng.uniform(-0.8, 0.8, s).astype(np.float32) for n, s in zip(sym.list_arguments(), shapes)}
    grads = {n: ax.nd.zeros(a.shape) for n, a in args.items()}
    ex = sym.bind(ax.cpu(), {n: ax.nd.array(a) for n, a in args.items()}, args_grad=grads)
    plain = _rnn_sym(**attrs).bind(ax.cpu(), {n: ax.nd.array(a) for n, a in args.items()}, grad_req="null")
    infer = ex.forward(is_train=False)[0].asnumpy()
    np.testing.assert_array_equal(infer, plain.forward(is_train=False)[0].asnumpy())

    def train(executor, seed=7, **values):
        ax.random.seed(seed)
        return [o.asnumpy().astype(np.float64) for o in executor.forward(is_train=True, **values)]
    first = train(ex)
    np.testing.assert_array_equal(first[0], train(ex)[0])
    assert not np.allclose(first[0], train(ex, seed=8)[0]) and not np.allclose(first[0], infer)
    heads = [rng.uniform(-1, 1, o.shape) for o in first]
    train(ex)
    ex.backward([ax.nd.array(h) for h in heads])
    fwd = sym.bind(ax.cpu(), {n: ax.nd.array(a) for n, a in args.items()}, grad_req="null")
    for name in ("data", "rnn_parameters"):
        def objective(v, name=name):
            return sum(float(np.sum(o * h)) for o, h in zip(train(fwd, **{name: v.astype(np.float32)}), heads))
        numeric = numeric_grad(objective, args[name], eps=1e-3)
        np.testing.assert_allclose(grads[name].asnumpy(), numeric, rtol=2e-2, atol=2e-3, err_msg=name)


@pytest.mark.parametrize("is_train", [False, True])
def test_layers_wide_enough_for_the_matmul_kernel(is_train):
    """Products inside the time loop large enough for aotexec's matmul kernel (batch 32, 4 x 128
    gates) stay plain kernel calls: the module is valid and matches rnn_numpy."""
    attrs = dict(mode="lstm", state_size=128, num_layers=3)
    sym = _rnn_sym(**attrs)
    rng = np.random.default_rng(4)
    shapes, _, _ = sym.infer_shape(data=(2, 32, 32))
    args = {n: rng.uniform(-0.2, 0.2, s).astype(np.float32) for n, s in zip(sym.list_arguments(), shapes)}
    ex = sym.bind(ax.cpu(), {k: ax.nd.array(v) for k, v in args.items()}, grad_req="null")
    outs = ex.forward(is_train=is_train)
    expected = rnn_forward("lstm", args["data"], args["rnn_parameters"], args["rnn_state"], args["rnn_state_cell"],
                           128, 3)
    for o, r in zip(outs, expected):
        _close(o.asnumpy(), r, "output")
