"""MXNet 1.9.1's Gluon model zoo, one CI-sized net per family (tests/data/zoo, written by
tools/make_zoo_reference.py): inference output, training output, every parameter gradient and
BatchNorm's moving statistics against MXNet computed in float64, on ``ax.cpu()``.

Relative error at most 1e-4, except for a gradient that MXNet's own float32 kernels miss by more
(ill-conditioned gradients of deep BatchNorm nets, up to ~1e-2): there aotexec may be off by at
most ``MXNET32_FACTOR`` times MXNet's float32 error. That error is one sample of float32 noise:
scaling Inception-v3's input by 1 +- 1e-7 moved aotexec's error on its E2 BatchNorm 7 gamma
between 1.0 and 2.7 times MXNet's (docs/PERFORMANCE.md, twentieth session)."""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from zoo_params import FLOOR, relative_error, seeded_params

ZOO = Path(__file__).parent / "data" / "zoo"
NETS = sorted(p.name for p in ZOO.iterdir() if (p / "meta.json").exists())
RTOL = 1e-4
MXNET32_FACTOR = 3


@lru_cache(maxsize=None)
def _arrays(net: str, name: str) -> dict[str, np.ndarray]:
    with np.load(ZOO / net / f"{name}.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _symbol(net: str, train: bool):
    folder = ZOO / net
    path = folder / "symbol_train.json" if train and (folder / "symbol_train.json").exists() else folder / "symbol.json"
    return ax.sym.load(str(path))


def _assert_close(actual: np.ndarray, expected: np.ndarray, what: str, floor: float = 0.0,
                  mxnet32: float = 0.0) -> None:
    err = relative_error(actual, expected, floor)
    assert err <= max(RTOL, MXNET32_FACTOR * mxnet32), f"{what}: relative error {err:.2e} (MXNet float32's: {mxnet32:.1e})"


def _params(net: str, sym, data_shape) -> dict[str, np.ndarray]:
    if (ZOO / net / "params.npz").exists():
        return _arrays(net, "params")
    arg_shapes, _, aux_shapes = sym.infer_shape(data=data_shape)   # too large to commit: seeded
    args = {n: s for n, s in zip(sym.list_arguments(), arg_shapes) if n != "data"}
    return seeded_params(args, dict(zip(sym.list_auxiliary_states(), aux_shapes)))


def _bind(net: str, train: bool):
    meta = json.loads((ZOO / net / "meta.json").read_text())
    inputs = _arrays(net, "inputs")
    sym = _symbol(net, train)
    params = _params(net, sym, tuple(meta["inputs"]["data"]))
    req = {n: ("write" if train and n != "data" else "null") for n in sym.list_arguments()}
    ex = sym.simple_bind(ax.cpu(), grad_req=req, data=tuple(meta["inputs"]["data"]))
    for key, value in params.items():
        kind, name = key.split(":", 1)
        (ex.arg_dict if kind == "arg" else ex.aux_dict)[name][:] = value
    ex.arg_dict["data"][:] = inputs["data"]
    return ex


@pytest.mark.parametrize("net", NETS)
def test_inference_matches_mxnet(net):
    ex = _bind(net, train=False)
    out = ex.forward(is_train=False)[0].asnumpy()
    _assert_close(out, _arrays(net, "expected")["infer:output"], f"{net} inference output")


@pytest.mark.parametrize("net", NETS)
def test_training_step_matches_mxnet(net):
    expected, inputs = _arrays(net, "expected"), _arrays(net, "inputs")
    ex = _bind(net, train=True)
    out = ex.forward(is_train=True)[0].asnumpy()
    ex.backward(out_grads=[ax.nd.array(inputs["head_grad"])])
    _assert_close(out, expected["train:output"], f"{net} training output")
    grads = [k for k in expected if k.startswith("grad:")]
    assert len(grads) == len(ex.arg_dict) - 1, "every parameter has a reference gradient"
    floor = FLOOR * max(float(np.abs(expected[k]).max()) for k in grads)
    for key in grads:
        name = key[5:]
        grad = ex.grad_dict[name].asnumpy()
        if f"index:{name}" in expected:   # a large gradient, kept at seeded entries
            grad = grad.ravel()[expected[f"index:{name}"]]
        _assert_close(grad, expected[key], f"{net} gradient of {name}", floor, float(expected[f"mxnet32:{name}"]))
    aux = [k for k in expected if k.startswith("aux:")]
    # a moving mean whose true value is zero (the mean of a normalized map) is rounding noise of
    # the map's own scale (~1e-9 here): measured against 1e-4 x the largest moving statistic
    floor = 1e-4 * max((float(np.abs(expected[k]).max()) for k in aux), default=0.0)
    for key in aux:
        name = key[4:]
        _assert_close(ex.aux_dict[name].asnumpy(), expected[key], f"{net} {name} after the training step", floor)
