"""Channel concatenations whose parts the kernels write in place (aotexec/kernels/concat.py):
the rewrite of the emitted body, and the numbers against numpy through the real compiler."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from aotexec.compiler import CompileOptions
from aotexec.emitter import Emitter, Value
from aotexec.kernels import concat, epilogue
from aotexec.kernels.code import Kernels
from aotexec.options import Options
from aotexec import pipeline
from aotexec.pipeline import kernel_build
from aotexec.runtime.bind_args import bind_typing


_CHANNEL_CONCAT = re.compile(r'"stablehlo.concatenate".*dimension = 3')


def _v(name, shape) -> Value:
    return Value(name, tuple(shape), np.dtype("float32"))


def _body(extra_use: bool):
    """Two kernel convolutions (the first with a folded ReLU) and a third part from elsewhere,
    concatenated along channels; with ``extra_use`` the second convolution is also a result."""
    b = Emitter(kernels=Kernels(Path("/nonexistent/sgemm.o")))
    x = _v("%x", (16, 28, 28, 64))
    conv = lambda w, o: b.conv_nhwc(x, _v(w, (3, 3, 64, o)), (16, 28, 28, o), (1, 1), [(1, 1), (1, 1)])  # noqa: E731
    y1, y2 = b.max(conv("%w1", 64), 0.0), conv("%w2", 96)
    y = b.concatenate([y1, _v("%pool", (16, 28, 28, 32)), y2], 3)
    results = [y, y2] if extra_use else [y]
    b.lines.append(f'    "func.return"({", ".join(v.name for v in results)}) : () -> ()')
    epilogue.fuse(b)
    return b, concat.write_in_place(b), y


@pytest.mark.lowering
def test_kernel_parts_write_their_channels_of_the_concatenation():
    b, rewritten, y = _body(extra_use=False)
    text = "\n".join(b.body())
    assert rewritten == 1 and not _CHANNEL_CONCAT.search(text)
    assert text.count("flow.tensor.empty : tensor<2408448xf32>") == 1      # 16*28*28*192 floats
    assert text.count("@aotexec_kernels::@conv_ep[") == 1 and text.count("@aotexec_kernels::@conv[") == 1
    tied = [ln for ln in text.split("\n") if "flow.dispatch" in ln]
    assert len(tied) == 2 and all(" -> %v" in ln for ln in tied)            # both write into the buffer
    assert text.count("stablehlo.dynamic_update_slice") == 1                # the part from elsewhere
    assert f"{y.name} = " in text                                           # still defined, by a reshape
    # each call's own result and its reshape are gone
    assert all("-> tensor<" not in ln for ln in tied)


@pytest.mark.lowering
def test_a_part_read_elsewhere_keeps_its_own_result():
    b, rewritten, _ = _body(extra_use=True)
    text = "\n".join(b.body())
    assert rewritten == 1
    assert text.count("stablehlo.dynamic_update_slice") == 2                # the second conv copied in
    assert sum(" -> %v" in ln for ln in text.split("\n") if "flow.dispatch" in ln) == 1


@pytest.mark.lowering
def test_a_chain_of_concatenations_shares_one_tensor():
    # DenseNet: each layer's input (the last concatenation, also read by the layer) and its new
    # channels (a kernel convolution) concatenated again: one tensor for the chain, the inner
    # concatenations slices of it
    b = Emitter(kernels=Kernels(Path("/nonexistent/sgemm.o")))
    x = _v("%x", (16, 28, 28, 64))
    feats = x
    for i in range(3):
        layer = b.max(feats, 0.0)                     # the layer reads the concatenation
        new = b.conv_nhwc(layer, _v(f"%w{i}", (3, 3, feats.shape[-1], 32)), (16, 28, 28, 32), (1, 1),
                          [(1, 1), (1, 1)])
        feats = b.concatenate([feats, new], 3)
    b.lines.append(f'    "func.return"({feats.name}) : () -> ()')
    epilogue.fuse(b)
    assert concat.write_in_place(b) == 3
    text = "\n".join(b.body())
    assert not _CHANNEL_CONCAT.search(text) and text.count("flow.tensor.empty : tensor<2007040xf32>") == 1
    assert text.count("stablehlo.dynamic_update_slice") == 1               # the chain's first input
    assert sum(" -> %v" in ln for ln in text.split("\n") if "flow.dispatch" in ln) == 3
    assert text.count('"stablehlo.slice"') == 2                            # the two inner ones


def _kernels(tmp_path_factory) -> Kernels:
    kernels = kernel_build.kernels_for(CompileOptions(), Options(cache_dir=tmp_path_factory.mktemp("k")))
    if kernels is None:
        pytest.skip("no AVX-512 CPU or no C compiler here: the kernels are not used")
    return kernels


def _assert_one_tensor(s, data_shape, kernels: Kernels) -> None:
    """The inference module of ``s`` (as a bind emits it) writes its concatenations in one tensor."""
    typing = bind_typing(s, {"data": data_shape}, {})
    text, _ = pipeline.entry_points(s, typing, ["forward_infer"], {n: "null" for n in s.list_arguments()},
                                    channels_last=True, kernels=kernels)
    assert text.count("flow.tensor.empty") == 1 and not _CHANNEL_CONCAT.search(text)


def _assert_close(got, ref) -> None:
    err = np.abs(got - ref).max() / np.abs(ref).max()
    assert got.shape == ref.shape and err < 1e-5, f"relative error {err:.2e}"


def _conv(x, w, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, o, h, wd))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return out


def test_concatenated_kernel_convolutions_match_numpy(tmp_path_factory):
    # Inception-like: a 3x3 layer with BatchNorm and ReLU folded into the kernel, a plain 3x3 layer
    # and a 1x1 layer (IREE's), concatenated, then a 3x3 layer (channels-last throughout); inference
    kernels = _kernels(tmp_path_factory)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 40, 17, 17)).astype(np.float32)
    w1, w2 = (rng.standard_normal((o, 40, 3, 3)).astype(np.float32) for o in (48, 40))
    w3 = rng.standard_normal((32, 128, 3, 3)).astype(np.float32)
    w4 = rng.standard_normal((40, 40, 1, 1)).astype(np.float32)
    d = ax.sym.Variable("data")
    a = ax.sym.Convolution(d, num_filter=48, kernel=(3, 3), pad=(1, 1), no_bias=True, name="a")
    a = ax.sym.Activation(ax.sym.BatchNorm(a, fix_gamma=False, eps=1e-3, name="bn"), act_type="relu")
    c = ax.sym.Convolution(d, num_filter=40, kernel=(3, 3), pad=(1, 1), no_bias=True, name="c")
    p = ax.sym.Convolution(d, num_filter=40, kernel=(1, 1), no_bias=True, name="p")     # IREE's matmul
    s = ax.sym.Convolution(ax.sym.Concat(a, p, c, dim=1), num_filter=32, kernel=(3, 3), pad=(1, 1), no_bias=True,
                           name="e")
    gamma, beta, mean = (rng.standard_normal(48).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, 48).astype(np.float32)
    _assert_one_tensor(s, x.shape, kernels)
    ex = s.simple_bind(ax.cpu(), grad_req="null", data=x.shape)
    ex.copy_params_from({"a_weight": ax.nd.array(w1), "c_weight": ax.nd.array(w2), "e_weight": ax.nd.array(w3),
                         "p_weight": ax.nd.array(w4), "bn_gamma": ax.nd.array(gamma), "bn_beta": ax.nd.array(beta)},
                        {"bn_moving_mean": ax.nd.array(mean), "bn_moving_var": ax.nd.array(var)})
    ex.arg_dict["data"][:] = x
    got = ex.forward(is_train=False)[0].asnumpy()
    per = lambda v: v.reshape(1, -1, 1, 1)  # noqa: E731
    ra = np.maximum((_conv(x, w1, 1) - per(mean)) / np.sqrt(per(var) + 1e-3) * per(gamma) + per(beta), 0)
    rp = _conv(x, w4, 0)
    ref = _conv(np.concatenate([ra, rp, _conv(x, w2, 1)], axis=1), w3, 1)
    _assert_close(got, ref)


def test_a_dense_block_matches_numpy(tmp_path_factory):
    # a 3x3 stem, three DenseNet layers (ReLU, 3x3 convolution of 32 channels through the kernel,
    # concatenated to the layer's input), then a 1x1 layer: one tensor for the block
    kernels = _kernels(tmp_path_factory)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 16, 14, 14)).astype(np.float32)
    w0 = rng.standard_normal((64, 16, 3, 3)).astype(np.float32) * 0.1
    ws = [rng.standard_normal((32, 64 + 32 * i, 3, 3)).astype(np.float32) * 0.1 for i in range(3)]
    wt = rng.standard_normal((24, 160, 1, 1)).astype(np.float32)
    feats = ax.sym.Convolution(ax.sym.Variable("data"), num_filter=64, kernel=(3, 3), pad=(1, 1), no_bias=True,
                               name="stem")
    for i in range(3):
        new = ax.sym.Convolution(ax.sym.Activation(feats, act_type="relu"), num_filter=32, kernel=(3, 3), pad=(1, 1),
                                 no_bias=True, name=f"l{i}")
        feats = ax.sym.Concat(feats, new, dim=1)
    s = ax.sym.Convolution(feats, num_filter=24, kernel=(1, 1), no_bias=True, name="t")
    _assert_one_tensor(s, x.shape, kernels)
    ex = s.simple_bind(ax.cpu(), grad_req="null", data=x.shape)
    ex.copy_params_from({**{f"l{i}_weight": ax.nd.array(w) for i, w in enumerate(ws)}, "t_weight": ax.nd.array(wt),
                         "stem_weight": ax.nd.array(w0)})
    ex.arg_dict["data"][:] = x
    got = ex.forward(is_train=False)[0].asnumpy()
    ref = _conv(x, w0, 1)
    for w in ws:
        ref = np.concatenate([ref, _conv(np.maximum(ref, 0), w, 1)], axis=1)
    ref = _conv(ref, wt, 0)
    _assert_close(got, ref)
