"""Resident parameters: llvm-cpu inference executors keep their parameters in IREE module
globals (Program.bind_parameters, Executor._resident_module). Results match numpy, every way
of writing a parameter reaches the next forward, steady-state calls allocate nothing, and
artifacts carry the resident module."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from aotexec.runtime.device import Device


def _net():
    data = ax.sym.Variable("data")
    x = ax.sym.Convolution(data, kernel=(3, 3), num_filter=4, pad=(1, 1), name="conv")
    x = ax.sym.BatchNorm(x, fix_gamma=False, name="bn")
    x = ax.sym.Activation(x, act_type="relu", name="relu")
    return ax.sym.FullyConnected(x, num_hidden=5, name="fc")


SHAPE = (2, 3, 5, 5)


def _numpy_forward(p: dict, x: np.ndarray) -> np.ndarray:
    """The net in numpy (inference BatchNorm: moving statistics)."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=2)   # n c 9 h w
    y = np.einsum("nckhw,ock->nohw", cols, p["conv_weight"].reshape(4, c, 9)) + p["conv_bias"][None, :, None, None]
    scale = p["bn_gamma"] / np.sqrt(p["bn_moving_var"] + 1e-3)
    y = (y - p["bn_moving_mean"][None, :, None, None]) * scale[None, :, None, None] + p["bn_beta"][None, :, None, None]
    y = np.maximum(y, 0).reshape(n, -1)
    return y @ p["fc_weight"].T + p["fc_bias"]


def _params(rng) -> dict:
    return {"conv_weight": rng.uniform(-1, 1, (4, 3, 3, 3)), "conv_bias": rng.uniform(-1, 1, 4),
            "bn_gamma": rng.uniform(0.5, 1.5, 4), "bn_beta": rng.uniform(-1, 1, 4),
            "bn_moving_mean": rng.uniform(-1, 1, 4), "bn_moving_var": rng.uniform(0.5, 2, 4),
            "fc_weight": rng.uniform(-1, 1, (5, 100)), "fc_bias": rng.uniform(-1, 1, 5)}


def _bind(p: dict):
    ex = _net().simple_bind(ax.cpu(), grad_req="null", data=SHAPE)
    ex.copy_params_from({k: v for k, v in p.items() if k in ex.arg_dict},
                        {k: v for k, v in p.items() if k in ex.aux_dict})
    return ex


def _check(ex, p, x):
    np.testing.assert_allclose(ex.forward(data=x)[0].asnumpy(), _numpy_forward(p, x), rtol=1e-4, atol=1e-4)


def test_inference_executor_is_resident_and_matches_numpy():
    rng = np.random.default_rng(0)
    p, x = _params(rng), rng.uniform(-1, 1, SHAPE)
    ex = _bind(p)
    _check(ex, p, x)
    prog = ex._program(("forward_infer",))
    assert prog.entry("forward_infer").resident == ["conv_weight", "conv_bias", "bn_gamma", "bn_beta",
                                                    "fc_weight", "fc_bias", "bn_moving_mean", "bn_moving_var"]
    assert prog.entry("forward_infer").inputs == ["data"]
    assert ex.memory_usage()["resident_parameters"] == sum(np.asarray(v, np.float32).nbytes for v in p.values())


def test_every_write_reaches_the_next_forward():
    rng = np.random.default_rng(1)
    p, x = _params(rng), rng.uniform(-1, 1, SHAPE)
    ex = _bind(p)
    _check(ex, p, x)
    p["fc_weight"] = rng.uniform(-1, 1, (5, 100))           # whole-array write
    ex.arg_dict["fc_weight"][:] = p["fc_weight"]
    _check(ex, p, x)
    p["conv_bias"][2] = 5.0                                   # partial write
    ex.arg_dict["conv_bias"][2] = 5.0
    _check(ex, p, x)
    p["bn_moving_var"] = rng.uniform(0.5, 2, 4)              # an aux state, through copy_params_from
    ex.copy_params_from({}, {"bn_moving_var": p["bn_moving_var"]})
    _check(ex, p, x)
    p["fc_bias"] = rng.uniform(-1, 1, 5)                     # through a view of the array
    ex.arg_dict["fc_bias"].reshape((1, 5))[:] = p["fc_bias"][None]
    _check(ex, p, x)
    p["bn_beta"] = rng.uniform(-1, 1, 4)                     # the dict entry replaced by another array
    ex.arg_dict["bn_beta"] = ax.nd.array(p["bn_beta"], dtype=np.float32)
    _check(ex, p, x)
    p["conv_weight"] = rng.uniform(-1, 1, (4, 3, 3, 3))      # another executor's output written into it
    src = ax.sym.Variable("w").simple_bind(ax.cpu(), grad_req="null", w=(4, 3, 3, 3))
    alias = _net().bind(ax.cpu(), {**ex.arg_dict, "conv_weight": src.outputs[0]}, aux_states=ex.aux_dict,
                        grad_req="null")
    src.forward(w=p["conv_weight"])
    _check(alias, p, x)
    p["conv_weight"] = rng.uniform(-1, 1, (4, 3, 3, 3))
    src.forward(w=p["conv_weight"])
    _check(alias, p, x)


@pytest.mark.parametrize("resident", ["1", "0"])
def test_replaced_array_of_another_type_is_an_error(resident, monkeypatch):
    monkeypatch.setenv("AOTEXEC_RESIDENT", resident)
    rng = np.random.default_rng(5)
    ex = _bind(_params(rng))
    ex.arg_dict["fc_bias"] = ax.nd.array(np.zeros(5))          # float64
    with pytest.raises(ax.AotexecError, match="fc_bias|element type"):
        ex.forward(data=rng.uniform(-1, 1, SHAPE))


def test_shared_parameters_updated_by_training():
    """An inference executor sharing a training executor's arrays (bucketing) sees the
    moving statistics its backward updated."""
    rng = np.random.default_rng(2)
    p, x = _params(rng), rng.uniform(-1, 1, SHAPE)
    net = _net()
    req = {n: "null" if n == "data" else "write" for n in net.list_arguments()}
    train = net.simple_bind(ax.cpu(), grad_req=req, data=SHAPE)
    train.copy_params_from({k: v for k, v in p.items() if k in train.arg_dict},
                           {k: v for k, v in p.items() if k in train.aux_dict})
    names = net.list_arguments() + net.list_auxiliary_states()
    infer = net.simple_bind(ax.cpu(), grad_req="null", data=SHAPE, shared_exec=train, shared_arg_names=names)
    _check(infer, p, x)
    train.forward(is_train=True, data=x)
    train.backward(ax.nd.array(np.ones((2, 5), np.float32)))
    for name in ("bn_moving_mean", "bn_moving_var"):
        assert not np.allclose(train.aux_dict[name].asnumpy(), p[name])
        p[name] = train.aux_dict[name].asnumpy()
    _check(infer, p, x)


def test_steady_state_inference_allocates_nothing():
    rng = np.random.default_rng(3)
    p, x = _params(rng), rng.uniform(-1, 1, SHAPE)
    ex = _bind(p)
    for _ in range(2):
        ex.forward(data=x)
    stats = Device.get(ax.cpu()).allocator_statistics
    before = stats()["device_bytes_allocated"]
    for _ in range(3):
        ex.forward(data=x)
    assert stats()["device_bytes_allocated"] == before


def test_resident_off_switch(monkeypatch):
    """AOTEXEC_RESIDENT=0: parameters are passed on every call, results unchanged."""
    monkeypatch.setenv("AOTEXEC_RESIDENT", "0")
    rng = np.random.default_rng(4)
    p, x = _params(rng), rng.uniform(-1, 1, SHAPE)
    ex = _bind(p)
    _check(ex, p, x)
    assert ex._program(("forward_infer",)).entry("forward_infer").resident == []


def test_artifact_carries_a_resident_inference_module(tmp_path, monkeypatch):
    """An llvm-cpu artifact holds the resident forward_infer beside the full module; a
    runtime-only inference bind uses it, a training bind (or AOTEXEC_RESIDENT=0) the other."""
    rng = np.random.default_rng(6)
    p, x = _params(rng), rng.uniform(-1, 1, SHAPE)
    args = {k: v for k, v in p.items() if not k.startswith("bn_moving")}
    aux = {k: p[k] for k in ("bn_moving_mean", "bn_moving_var")}
    art = ax.compile(_net(), {"data": SHAPE}, grad_req="write", out=tmp_path / "a", cast_params=True,
                     params={**{f"arg:{k}": v for k, v in args.items()}, **{f"aux:{k}": v for k, v in aux.items()}})
    loaded = ax.load(art.path)
    assert "llvm-cpu-resident" in loaded.variants[0]["files"]
    ex = loaded.simple_bind(ax.cpu(), grad_req="null")
    _check(ex, p, x)
    assert ex._program(("forward_infer",)).resident
    p["fc_bias"] = rng.uniform(-1, 1, 5)
    ex.arg_dict["fc_bias"][:] = p["fc_bias"]
    _check(ex, p, x)
    train = loaded.simple_bind(ax.cpu())              # the compiled grad_req: the full module
    assert not train._program(("forward_infer",)).resident
    monkeypatch.setenv("AOTEXEC_RESIDENT", "0")
    plain = ax.load(art.path).simple_bind(ax.cpu(), grad_req="null")
    assert not plain._program(("forward_infer",)).resident
    p["fc_bias"] = np.asarray(loaded.arg_params["fc_bias"], np.float64)
    _check(plain, p, x)


def test_resident_with_random_state():
    """Dropout(mode='always') draws in inference: the rng state still follows the data."""
    net = ax.sym.Dropout(ax.sym.FullyConnected(ax.sym.Variable("data"), num_hidden=64, name="fc"), p=0.5,
                         mode="always")
    ex = net.simple_bind(ax.cpu(), grad_req="null", data=(4, 3))
    ex.arg_dict["fc_weight"][:] = np.ones((64, 3))
    ex.arg_dict["fc_bias"][:] = 1
    ep = ex._program(("forward_infer",)).entry("forward_infer")
    assert ep.inputs == ["data", "rng"] and ep.resident == ["fc_weight", "fc_bias"]
    a, b = (ex.forward(data=np.ones((4, 3)))[0].asnumpy() for _ in range(2))
    assert set(np.unique(a)) <= {0.0, 8.0} and 0 < (a == 0).mean() < 1   # (3 + 1) / (1 - 0.5)
    assert not np.array_equal(a == 0, b == 0)


def test_resident_weights_are_unfenced_and_match_numpy():
    """A 1x1 layer of 128 channels on a small map (one 2-D matmul, ops.conv.pointwise_as_matmul)
    and a 3x3 one: their resident weights' layout changes stay unfenced (IREE hoists them and the
    matmul's packing into the initializer), the data's is the module's one barrier."""
    from aotexec import pipeline
    from aotexec.runtime.bind_args import bind_typing
    data = ax.sym.Variable("data")
    y = ax.sym.Convolution(data, kernel=(1, 1), num_filter=8, name="pw")
    net = ax.sym.Convolution(y, kernel=(3, 3), pad=(1, 1), num_filter=4, no_bias=True, name="c3")
    shape = (2, 128, 4, 4)
    typing = bind_typing(net, {"data": shape}, {})
    text, _ = pipeline.entry_points(net, typing, ["forward_infer"], channels_last=True,
                                    resident=pipeline.resident_parameters(net, typing))
    assert text.count("util.global.load") == 3 and text.count('"stablehlo.optimization_barrier"') == 1
    rng = np.random.default_rng(4)
    p = {"pw_weight": rng.uniform(-1, 1, (8, 128, 1, 1)), "pw_bias": rng.uniform(-1, 1, 8),
         "c3_weight": rng.uniform(-1, 1, (4, 8, 3, 3))}
    x = rng.uniform(-1, 1, shape)
    ex = net.simple_bind(ax.cpu(), grad_req="null", data=shape)
    ex.copy_params_from({k: ax.nd.array(v.astype(np.float32)) for k, v in p.items()})
    out = ex.forward(is_train=False, data=ax.nd.array(x.astype(np.float32)))[0].asnumpy()
    assert ex._program(("forward_infer",)).entry("forward_infer").resident == list(p)
    h = np.einsum("nchw,oc->nohw", x, p["pw_weight"][:, :, 0, 0]) + p["pw_bias"][None, :, None, None]
    hp = np.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = sum(np.einsum("nchw,oc->nohw", hp[:, :, i:i + 4, j:j + 4], p["c3_weight"][:, :, i, j])
              for i in range(3) for j in range(3))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
