"""Winograd F(2x2, 3x3) and F(4x4, 3x3) convolutions (ops/winograd.py): wide 3x3 stride-1 layers,
forward (inference and training), the gradients around it and the weight gradient as tile
products, against numpy in float64."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from aotexec import pipeline
from aotexec.ops import winograd
from aotexec.runtime.bind_args import bind_typing

S = ax.sym
MIN_TILES = winograd.MIN_TILES


@pytest.fixture(autouse=True)
def _small_maps_too(monkeypatch):
    # these tests' maps are small (fewer tiles than the default's batch-1 7x7 cut-off): Winograd at any size
    monkeypatch.setattr(winograd, "MIN_TILES", 0)


def _conv_nchw(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
    return sum(np.einsum("nchw,fc->nfhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
               for i in range(3) for j in range(3))


def _net(pad: int, f: int):
    """conv -> square -> sum: the head gradient (2 y) reaches the convolution channels-last."""
    y = S.Convolution(S.Variable("data"), kernel=(3, 3), pad=(pad, pad), num_filter=f, name="conv")
    return S.MakeLoss(S.sum(S.elemwise_mul(y, y)))


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("shape,pad,f", [((2, 128, 5, 6), 1, 128),     # odd output rows: a cropped tile
                                         ((1, 160, 6, 6), 0, 128),     # valid convolution
                                         ((1, 128, 4, 5), 2, 136)])    # wider output, pad 2
def test_winograd_forward_and_gradients_match_numpy(shape, pad, f, m, monkeypatch):
    monkeypatch.setattr(winograd, "MIN_TILES_F4", 0 if m == 4 else 1 << 30)
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    w = rng.uniform(-0.1, 0.1, (f, shape[1], 3, 3)).astype(np.float32)
    bias = rng.uniform(-1, 1, f).astype(np.float32)
    ex = _net(pad, f).simple_bind(ax.cpu(), grad_req="write", data=shape)
    ex.arg_dict["data"][:] = x
    ex.arg_dict["conv_weight"][:] = w
    ex.arg_dict["conv_bias"][:] = bias
    ex.forward(is_train=True)
    ex.backward()
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    y = _conv_nchw(x64, w64, pad) + bias[None, :, None, None]
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), (y * y).sum(), rtol=1e-5)
    g = 2 * y
    # d data: the head gradient convolved with the flipped kernel, channels swapped
    dx = _conv_nchw(g, np.flip(w64, (2, 3)).transpose(1, 0, 2, 3), 2 - pad)
    gp = np.pad(x64, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = g.shape[2:]
    dw = np.stack([np.stack([np.einsum("nfhw,nchw->fc", g, gp[:, :, i:i + oh, j:j + ow]) for j in range(3)], -1)
                   for i in range(3)], -2)
    for name, ref in (("data", dx), ("conv_weight", dw), ("conv_bias", g.sum((0, 2, 3)))):
        got = ex.grad_dict[name].asnumpy()
        err = np.abs(got - ref).max() / np.abs(ref).max()
        assert err < 1e-5, (name, err)
    # inference (resident weights: the weight transform runs once, at load)
    inf = _net(pad, f).simple_bind(ax.cpu(), grad_req="null", data=shape)
    inf.copy_params_from({"conv_weight": ax.nd.array(w), "conv_bias": ax.nd.array(bias)})
    inf.arg_dict["data"][:] = x
    inf.forward(is_train=False)
    np.testing.assert_allclose(inf.outputs[0].asnumpy(), (y * y).sum(), rtol=1e-5)


def _pooled_net(pad: int, f: int):
    """conv -> 2x2 average pooling -> square -> sum: the pooling gradient hands the convolution
    an NHWC head gradient, so its weight gradient is the channels-last one (tile products)."""
    y = S.Convolution(S.Variable("data"), kernel=(3, 3), pad=(pad, pad), num_filter=f, name="conv")
    q = S.Pooling(y, kernel=(2, 2), stride=(2, 2), pool_type="avg")
    return S.MakeLoss(S.sum(S.elemwise_mul(q, q)))


@pytest.mark.parametrize("shape,pad", [((2, 64, 6, 8), 1),       # whole 4x4 tiles
                                       ((2, 64, 5, 7), 1),       # cropped tiles; pixels the pooling drops
                                       ((1, 96, 9, 6), 0)])      # valid convolution, 7x4 out
def test_winograd_weight_and_data_gradients_match_numpy(shape, pad):
    rng = np.random.default_rng(5)
    f = 80
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    w = rng.uniform(-0.1, 0.1, (f, shape[1], 3, 3)).astype(np.float32)
    calls = []
    orig = winograd.weight_grad

    def spy(*a, **k):
        calls.append(a[4])
        return orig(*a, **k)
    ex = _pooled_net(pad, f).simple_bind(ax.cpu(), grad_req="write", data=shape)
    ex.arg_dict["data"][:] = x
    ex.arg_dict["conv_weight"][:] = w
    ex.arg_dict["conv_bias"][:] = 0.5
    with pytest.MonkeyPatch.context() as mp:      # the module is emitted at the first forward
        mp.setattr(winograd, "weight_grad", spy)
        ex.forward(is_train=True)
        ex.backward()
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    y = _conv_nchw(x64, w64, pad) + 0.5
    oh, ow = y.shape[2:]
    ph, pw = oh // 2, ow // 2
    q = y[:, :, :2 * ph, :2 * pw].reshape(shape[0], f, ph, 2, pw, 2).mean((3, 5))
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), (q * q).sum(), rtol=1e-5)
    g = np.zeros_like(y)
    g[:, :, :2 * ph, :2 * pw] = np.repeat(np.repeat(2 * q, 2, 2), 2, 3) / 4
    gp = np.pad(x64, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    dw = np.stack([np.stack([np.einsum("nfhw,nchw->fc", g, gp[:, :, i:i + oh, j:j + ow]) for j in range(3)], -1)
                   for i in range(3)], -2)
    got = ex.grad_dict["conv_weight"].asnumpy()
    assert calls == [4], calls        # the tile-product form, F(4x4)
    assert np.abs(got - dw).max() / np.abs(dw).max() < 1e-5
    dx = _conv_nchw(g, np.flip(w64, (2, 3)).transpose(1, 0, 2, 3), 2 - pad)    # Winograd too
    assert np.abs(ex.grad_dict["data"].asnumpy() - dx).max() / np.abs(dx).max() < 1e-5
    np.testing.assert_allclose(ex.grad_dict["conv_bias"].asnumpy(), g.sum((0, 2, 3)), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("m", [2, 4])
def test_winograd_products_through_the_kernel_match_numpy(m, monkeypatch):
    # enough tiles for the matmul kernel: the weight transform writes the kernel's packed
    # panels itself (136 filters: four panels and a zero-padded fifth; the data gradient's
    # 72 channels: two and a padded third), forward, data gradient and inference
    from aotexec.kernels import matmul as kernel_matmul
    from aotexec.pipeline import kernel_build
    from aotexec.compiler import CompileOptions
    from aotexec.options import Options
    if kernel_build.kernels_for(CompileOptions(), Options.from_env()) is None:
        pytest.skip("no AVX-512 CPU or no C compiler here: the kernel is not used")
    monkeypatch.setattr(winograd, "MIN_CHANNELS", 64)
    monkeypatch.setattr(winograd, "MIN_TILES_F4", 0 if m == 4 else 1 << 30)
    calls = []
    orig = kernel_matmul.packed_product
    monkeypatch.setattr(kernel_matmul, "packed_product", lambda b, x, packed, n: calls.append(x.shape) or
                        orig(b, x, packed, n))
    shape, pad, f = (2, 72, 16, 16), 1, 136
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    w = rng.uniform(-0.1, 0.1, (f, shape[1], 3, 3)).astype(np.float32)
    ex = _pooled_net(pad, f).simple_bind(ax.cpu(), grad_req={"data": "write", "conv_weight": "null", "conv_bias": "null"},
                                  data=shape)
    ex.arg_dict["data"][:] = x
    ex.arg_dict["conv_weight"][:] = w
    ex.arg_dict["conv_bias"][:] = 0.25
    ex.forward(is_train=True)
    ex.backward()
    tiles = shape[0] * (16 // m) ** 2
    assert sorted(calls) == [((m + 2) ** 2, tiles, 72), ((m + 2) ** 2, tiles, f)], calls
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    y = _conv_nchw(x64, w64, pad) + 0.25
    q = y.reshape(shape[0], f, 8, 2, 8, 2).mean((3, 5))
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), (q * q).sum(), rtol=1e-5)
    g = np.repeat(np.repeat(2 * q, 2, 2), 2, 3) / 4
    dx = _conv_nchw(g, np.flip(w64, (2, 3)).transpose(1, 0, 2, 3), 2 - pad)
    assert np.abs(ex.grad_dict["data"].asnumpy() - dx).max() / np.abs(dx).max() < 1e-5
    inf = _pooled_net(pad, f).simple_bind(ax.cpu(), grad_req="null", data=shape)
    inf.copy_params_from({"conv_weight": ax.nd.array(w), "conv_bias": ax.nd.array(np.full(f, 0.25, np.float32))})
    inf.arg_dict["data"][:] = x
    inf.forward(is_train=False)
    np.testing.assert_allclose(inf.outputs[0].asnumpy(), (q * q).sum(), rtol=1e-5)


def test_winograd_is_the_form_emitted_for_wide_3x3_layers_only(monkeypatch):
    monkeypatch.setattr(winograd, "MIN_TILES", MIN_TILES)
    def batched_matmuls(c: int, shape, m: int) -> int:
        sym = S.Convolution(S.Variable("data"), kernel=(3, 3), pad=(1, 1), num_filter=c, name="conv")
        typing = bind_typing(sym, {"data": shape}, {})
        text, _ = pipeline.entry_points(sym, typing, ["forward_infer"], None, "auto", channels_last=True)
        return text.count(f"tensor<{(m + 2) ** 2}x{shape[0] * -(-shape[2] // m) * -(-shape[3] // m)}x{c}xf32>")
    assert batched_matmuls(128, (2, 128, 8, 8), 2) > 0
    assert batched_matmuls(128, (16, 128, 8, 8), 4) > 0      # 64 tiles of 4x4: F(4x4)
    assert batched_matmuls(32, (2, 32, 8, 8), 2) == 0
    tile = winograd.tile
    # 64 channels: F(2x2) while the transformed tiles stay small (56x56 at batch 1, not at batch 16)
    assert tile((3, 3), (1, 1), (1, 1), 64, 64, (1, 56, 56, 64)) == 2
    assert tile((3, 3), (1, 1), (1, 1), 64, 64, (16, 56, 56, 64)) == 0
    assert tile((3, 3), (1, 1), (1, 1), 128, 128, (2, 8, 8, 128)) == 2
    assert tile((3, 3), (1, 1), (1, 1), 512, 512, (16, 7, 7, 512)) == 4
    assert tile((3, 3), (1, 1), (1, 1), 512, 512, (2, 7, 7, 512)) == 2
    # too few tiles (16: a 7x7 map at batch 1) for the transformed weights' reads to pay
    assert tile((3, 3), (1, 1), (1, 1), 512, 512, (1, 7, 7, 512)) == 0
    assert tile((3, 3), (2, 2), (1, 1), 128, 128, (2, 8, 8, 128)) == 0
    assert tile((3, 3), (1, 1), (2, 2), 128, 128, (2, 8, 8, 128)) == 0
    assert tile((5, 5), (1, 1), (1, 1), 128, 128, (2, 8, 8, 128)) == 0
