"""Channels-last execution (passes/layout.py, ops/conv.py, ops/pool.py): convolution nets computed NHWC between
convolutions on llvm-cpu. Gradients against finite differences with the NHWC rules really
in use, and the NHWC build against the NCHW one (AOTEXEC_LAYOUT=nchw)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from aotexec import pipeline
from aotexec.kernels.code import Kernels
from aotexec.passes import layout
from aotexec.runtime.executor import bind_typing
from gradcheck import check_numeric_gradient

S = ax.sym
V = S.Variable
CONVS = {   # name: (input shape, Convolution kwargs); covers im2col (C <= 4), strides, dilation, crops
    "a": ((1, 6, 7, 6), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=5)),
    "b": ((2, 5, 8, 7), dict(kernel=(2, 2), dilate=(2, 2), num_filter=6, no_bias=True)),
    "c": ((1, 6, 5, 6), dict(kernel=(1, 1), pad=(1, 1), stride=(2, 2), num_filter=5, no_bias=True)),
    "d": ((2, 3, 7, 7), dict(kernel=(3, 3), stride=(2, 1), dilate=(1, 2), pad=(2, 1), num_filter=5)),
    # strided: stride 3 > kernel 2 (input rows no window reads), stride (2, 1) with padding
    "e": ((2, 5, 9, 8), dict(kernel=(2, 3), stride=(3, 2), num_filter=5)),
    "f": ((1, 6, 8, 8), dict(kernel=(3, 3), stride=(2, 1), pad=(1, 1), num_filter=5, no_bias=True)),
    # kernels over conv_forms.MAX_OFFSETS: the direct weight gradient (a ResNet stem at batch 1;
    # LeNet's conv1; a wide 5x5)
    "g": ((1, 3, 11, 11), dict(kernel=(7, 7), stride=(2, 2), pad=(3, 3), num_filter=4)),
    "h": ((2, 1, 9, 9), dict(kernel=(5, 5), num_filter=3)),
    "q": ((1, 11, 7, 6), dict(kernel=(5, 5), pad=(1, 2), num_filter=3, no_bias=True)),
    # one-axis kernels (conv_forms.one_axis_nhwc): Inception's 1x7 / 7x1, dilated, a pad past the
    # kernel (the data gradient crops), strided (its data gradient keeps the phase form)
    "i": ((2, 5, 6, 9), dict(kernel=(1, 7), pad=(0, 3), num_filter=4)),
    "j": ((1, 4, 9, 5), dict(kernel=(3, 1), dilate=(2, 1), pad=(2, 0), num_filter=3, no_bias=True)),
    "k": ((2, 3, 5, 6), dict(kernel=(1, 3), pad=(1, 3), num_filter=4)),
    "l": ((1, 4, 9, 7), dict(kernel=(5, 1), stride=(2, 1), pad=(2, 0), num_filter=3)),
    # output widths computed wider and sliced (conv_forms.good_width: 17 -> 18), stride 1 and 2
    "m": ((1, 3, 4, 17), dict(kernel=(3, 3), pad=(1, 1), num_filter=4)),
    "n": ((1, 3, 5, 35), dict(kernel=(3, 3), stride=(2, 2), num_filter=3, no_bias=True)),
    # wide 1x1 layers on small maps as one matmul (ops.conv.pointwise_as_matmul), stride 1 and 2
    "o": ((2, 128, 3, 4), dict(kernel=(1, 1), num_filter=5)),
    "p": ((1, 128, 5, 6), dict(kernel=(1, 1), stride=(2, 2), num_filter=4, no_bias=True)),
}
DEPTHWISE = {   # one input and output channel per group: MobileNet's 3x3 at strides 1 and 2, and odd ones
    "dw1": ((2, 4, 7, 6), dict(kernel=(3, 3), pad=(1, 1), num_filter=4, num_group=4)),
    "dw2": ((1, 3, 8, 9), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=3, num_group=3, no_bias=True)),
    "dw3": ((2, 4, 9, 8), dict(kernel=(3, 2), stride=(2, 1), dilate=(1, 2), pad=(1, 0), num_filter=4, num_group=4)),
}
CONVS.update(DEPTHWISE)


def _net(name: str):
    """conv -> square -> global average: the conv's head gradient arrives channels-last."""
    y = S.Convolution(V("x" + name), name="conv" + name, **CONVS[name][1])
    return S.Pooling(S.elemwise_mul(y, y), global_pool=True, pool_type="avg", kernel=(1, 1))


def _location(name: str, rng) -> dict:
    shape, kw = CONVS[name]
    w = (kw["num_filter"], shape[1] // kw.get("num_group", 1)) + kw["kernel"]
    # weights scaled down on wide fans: float32 outputs of ~275 products made finite differences
    # of the square above noisier than their tolerance
    scale = min(1.0, (32 / np.prod(w[1:])) ** 0.5)
    loc = {"x" + name: rng.uniform(-1, 1, shape), f"conv{name}_weight": rng.uniform(-scale, scale, w)}
    if not kw.get("no_bias"):
        loc[f"conv{name}_bias"] = rng.uniform(-1, 1, kw["num_filter"])
    return loc


def test_channels_last_rules_are_the_ones_in_use():
    names = list(CONVS)
    net = S.Group([_net(n) for n in names])
    t = bind_typing(net, {"x" + n: CONVS[n][0] for n in names}, {})
    plan = pipeline.training_plan(net, t, {n: "write" for n in net.list_arguments()})
    lay = layout.assign(plan.typing.graph, plan.typing.shape_of)
    rules = {n.name: lay.rules.get(id(n)) for n in plan.typing.graph.nodes if n.op is not None}
    for n in names:
        fwd = "depthwise" if n in DEPTHWISE else "conv"
        assert rules["conv" + n] == fwd and rules[f"conv{n}_backward"] == fwd + "_grad", rules


@pytest.mark.parametrize("name", list(CONVS))
def test_channels_last_convolution_gradients(name):
    rng = np.random.default_rng(7)
    check_numeric_gradient(_net(name), _location(name, rng))


def test_small_map_data_gradient_as_im2col_matches_numpy(monkeypatch):
    """A 3x3 stride-1 layer of 256 channels on a 5x5 map (conv -> square -> global average, so
    its head gradient arrives channels-last): the data gradient is im2col + one matmul
    (conv_forms.small_map_im2col; Winograd off, which takes such 3x3 layers first and is tested in
    test_winograd.py); both gradients against numpy sums over the offsets."""
    from aotexec.ops import winograd
    monkeypatch.setattr(winograd, "MIN_CHANNELS", 1 << 30)
    monkeypatch.setattr(winograd, "MIN_CHANNELS_SMALL", 1 << 30)
    monkeypatch.setattr(winograd, "WEIGHT_GRAD_MIN_CHANNELS", 1 << 30)
    rng = np.random.default_rng(5)
    n, c, f, h, w = 2, 256, 256, 5, 5
    x, wt = rng.uniform(-1, 1, (n, c, h, w)), rng.uniform(-1, 1, (f, c, 3, 3)) / 48
    head = rng.uniform(-1, 1, (n, f, 1, 1))
    y = S.Convolution(V("x"), kernel=(3, 3), pad=(1, 1), num_filter=f, no_bias=True, name="conv")
    net = S.Pooling(S.elemwise_mul(y, y), global_pool=True, pool_type="avg", kernel=(1, 1))
    t = bind_typing(net, {"x": x.shape}, {})
    plan = pipeline.training_plan(net, t, {"x": "write", "conv_weight": "write"})
    lay = layout.assign(plan.typing.graph, plan.typing.shape_of)
    assert {n.name: lay.rules.get(id(n)) for n in plan.typing.graph.nodes}["conv_backward"] == "conv_grad"
    text, _ = pipeline.entry_points(net, t, ["backward"], {"x": "write", "conv_weight": "write"}, "auto",
                                    channels_last=True)
    assert f"tensor<{n}x{h}x{w}x{9 * f}xf32>" in text                 # the data gradient's joined windows
    ex = net.bind(ax.cpu(), args={"x": ax.nd.array(x.astype(np.float32)), "conv_weight": ax.nd.array(wt.astype(np.float32))},
                  args_grad={"x": ax.nd.zeros(x.shape), "conv_weight": ax.nd.zeros(wt.shape)})
    ex.forward(is_train=True)
    ex.backward([ax.nd.array(head.astype(np.float32))])
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    offsets = [(i, j) for i in range(3) for j in range(3)]
    out = sum(np.einsum("nchw,fc->nfhw", xp[:, :, i:i + h, j:j + w], wt[:, :, i, j]) for i, j in offsets)
    g = 2 * out * head / (h * w)                                   # the conv's head gradient
    gp = np.pad(g, ((0, 0), (0, 0), (1, 1), (1, 1)))
    dx = sum(np.einsum("nfhw,fc->nchw", gp[:, :, 2 - i:2 - i + h, 2 - j:2 - j + w], wt[:, :, i, j]) for i, j in offsets)
    dw = np.zeros(wt.shape)
    for i, j in offsets:
        dw[:, :, i, j] = np.einsum("nchw,nfhw->fc", xp[:, :, i:i + h, j:j + w], g)
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ex.grad_dict["conv_weight"].asnumpy(), dw, rtol=1e-4, atol=1e-5)


def test_wide_strided_layer_on_a_small_map_is_im2col_and_matches_numpy():
    """A 3x3/2 layer of 128 -> 160 channels on 7x6 (ops.conv.strided_as_im2col: the padded
    windows joined on channels, one matmul): inference and training outputs against numpy."""
    rng = np.random.default_rng(6)
    x, wt, bias = rng.uniform(-1, 1, (1, 128, 7, 6)), rng.uniform(-1, 1, (160, 128, 3, 3)) / 34, rng.uniform(-1, 1, 160)
    net = S.Convolution(V("x"), kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=160, name="conv")
    text, _ = pipeline.entry_points(net, bind_typing(net, {"x": x.shape}, {}), ["forward_infer"], None, "none",
                                    channels_last=True)
    assert "tensor<1x4x3x1152xf32>" in text                          # 9 windows of 128 channels
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("nchw,fc->nfhw", xp[:, :, i:i + 7:2, j:j + 5:2], wt[:, :, i, j])
               for i in range(3) for j in range(3)) + bias[None, :, None, None]
    args = {"x": ax.nd.array(x.astype(np.float32)), "conv_weight": ax.nd.array(wt.astype(np.float32)),
            "conv_bias": ax.nd.array(bias.astype(np.float32))}
    for is_train in (False, True):
        got = net.bind(ax.cpu(), args=args, grad_req="null").forward(is_train=is_train)[0].asnumpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_wide_pointwise_layer_on_a_large_map_is_a_matmul_and_matches_numpy():
    """A 1x1 layer of 256 -> 256 channels on 2 x 64 x 64 pixels (past POINTWISE_MATMUL_MAX_PIXELS,
    but wide: ops.conv.pointwise_as_matmul) is one 2-D dot_general; output and gradients
    against numpy."""
    from aotexec.ops import conv
    rng = np.random.default_rng(9)
    n, c, f, h, w = 2, 256, 256, 64, 64
    assert h * w * n >= 2 * conv.POINTWISE_MATMUL_MAX_PIXELS and c * f >= conv.POINTWISE_MATMUL_WIDE
    x, wt = rng.uniform(-1, 1, (n, c, h, w)), rng.uniform(-1, 1, (f, c, 1, 1)) / 16
    head = rng.uniform(-1, 1, (n, f, 1, 1))
    y = S.Convolution(V("x"), kernel=(1, 1), num_filter=f, no_bias=True, name="conv")
    net = S.Pooling(S.elemwise_mul(y, y), global_pool=True, pool_type="avg", kernel=(1, 1))
    t = bind_typing(net, {"x": x.shape}, {})
    text, _ = pipeline.entry_points(net, t, ["forward_infer"], channels_last=True)
    assert f"tensor<{n * h * w}x{c}xf32>" in text and '"stablehlo.convolution"' not in text
    ex = net.bind(ax.cpu(), args={"x": ax.nd.array(x.astype(np.float32)), "conv_weight": ax.nd.array(wt.astype(np.float32))},
                  args_grad={"x": ax.nd.zeros(x.shape), "conv_weight": ax.nd.zeros(wt.shape)})
    out = ex.forward(is_train=True)[0].asnumpy()
    ex.backward([ax.nd.array(head.astype(np.float32))])
    yr = np.einsum("nchw,fc->nfhw", x, wt[:, :, 0, 0])
    np.testing.assert_allclose(out, (yr * yr).mean((2, 3), keepdims=True), rtol=1e-4, atol=1e-5)
    g = 2 * yr * head / (h * w)
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), np.einsum("nfhw,fc->nchw", g, wt[:, :, 0, 0]),
                               rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(ex.grad_dict["conv_weight"].asnumpy()[:, :, 0, 0], np.einsum("nchw,nfhw->fc", x, g),
                               rtol=1e-4, atol=1e-5)


def test_channels_last_matches_nchw_on_a_residual_block(monkeypatch):
    data = V("data")
    x = S.Activation(S.BatchNorm(S.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=8, name="c1"),
                                 fix_gamma=False, name="bn1"), act_type="relu", name="r1")
    y = S.BatchNorm(S.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=8, name="c2"), fix_gamma=False, name="bn2")
    z = S.Activation(S.elemwise_add(x, y), act_type="relu")
    net = S.SoftmaxOutput(S.FullyConnected(S.Pooling(z, global_pool=True, pool_type="avg", kernel=(1, 1)),
                                           num_hidden=3, name="fc"), name="softmax")
    shapes = {"data": (4, 3, 6, 6), "softmax_label": (4,)}
    req = {n: ("null" if n == "softmax_label" else "write") for n in net.list_arguments()}
    results = []
    for mode in ("nhwc", "nchw"):
        monkeypatch.setenv("AOTEXEC_LAYOUT", mode)
        ex = net.simple_bind(ax.cpu(), grad_req=req, **shapes)
        r = np.random.default_rng(3)
        for n, a in ex.arg_dict.items():
            a[:] = r.integers(0, 3, a.shape) if n == "softmax_label" else r.uniform(-1, 1, a.shape)
        for n, a in ex.aux_dict.items():
            a[:] = r.uniform(0.5, 1.5, a.shape)
        out = ex.forward(is_train=True)[0].asnumpy()
        ex.backward()
        results.append((out, {n: g.asnumpy() for n, g in ex.grad_dict.items() if g is not None},
                        {n: a.asnumpy() for n, a in ex.aux_dict.items()}))
    (o1, g1, a1), (o2, g2, a2) = results
    np.testing.assert_allclose(o1, o2, rtol=1e-5, atol=1e-6)
    for n in g2:
        np.testing.assert_allclose(g1[n], g2[n], rtol=1e-4, atol=1e-5, err_msg=n)
    for n in a2:
        np.testing.assert_allclose(a1[n], a2[n], rtol=1e-5, atol=1e-6, err_msg=n)


@pytest.mark.parametrize("pool_type", ["max", "avg", "sum"])
def test_channels_last_tiled_pooling_gradients(pool_type):
    """conv -> tanh -> 2x2/2 pool -> flatten -> fc: the pool's head gradient arrives NCHW
    (through Flatten) and is transposed; a 7x7 map crops its last row and column."""
    y = S.Activation(S.Convolution(V("x"), kernel=(3, 3), pad=(1, 1), num_filter=5, name="conv"), act_type="tanh")
    y = S.Pooling(y, kernel=(2, 2), stride=(2, 2), pool_type=pool_type, name="pool")
    net = S.FullyConnected(S.Flatten(y), num_hidden=3, name="fc")
    rng = np.random.default_rng(11)
    loc = {"x": rng.uniform(-1, 1, (2, 6, 7, 7)), "conv_weight": rng.uniform(-1, 1, (5, 6, 3, 3)),
           "conv_bias": rng.uniform(-1, 1, 5), "fc_weight": rng.uniform(-1, 1, (3, 45)), "fc_bias": rng.uniform(-1, 1, 3)}
    t = bind_typing(net, {k: v.shape for k, v in loc.items()}, {})
    plan = pipeline.training_plan(net, t, {n: "write" for n in net.list_arguments()})
    lay = layout.assign(plan.typing.graph, plan.typing.shape_of)
    rules = {n.name: lay.rules.get(id(n)) for n in plan.typing.graph.nodes if n.op is not None}
    assert rules["pool"] == "tiled_pool" and rules["pool_backward"] == "tiled_pool_grad", rules
    if pool_type != "max":
        check_numeric_gradient(net, loc)
        return
    # max: finite differences flip window maxima here; compare with the NCHW build, which the
    # MXNet LeNet golden checks
    grads = []
    for mode in ("nhwc", "nchw"):
        os.environ["AOTEXEC_LAYOUT"] = mode
        try:
            ex = net.bind(ax.cpu(), args={k: ax.nd.array(v.astype(np.float32)) for k, v in loc.items()},
                          args_grad={k: ax.nd.zeros(v.shape) for k, v in loc.items()})
            ex.forward(is_train=True)
            ex.backward(ax.nd.array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)))
            grads.append({k: g.asnumpy() for k, g in ex.grad_dict.items()})
        finally:
            os.environ.pop("AOTEXEC_LAYOUT")
    for k in loc:
        np.testing.assert_allclose(grads[0][k], grads[1][k], rtol=1e-4, atol=1e-6, err_msg=k)
    assert np.count_nonzero(grads[0]["x"]) > 0


def test_inference_runs_large_kernels_channels_last():
    """5x5 convolutions run channels-last (with the tanh and pooling after them); the
    one-input-channel one gets a zero second channel."""
    x = S.Activation(S.Convolution(V("data"), kernel=(5, 5), num_filter=4, name="c1"), act_type="tanh", name="t1")
    y = S.Convolution(x, kernel=(5, 5), pad=(1, 1), num_filter=6, name="c2")
    y = S.Pooling(S.Activation(y, act_type="tanh", name="t2"), kernel=(2, 2), stride=(2, 2), pool_type="max",
                  name="p2")
    net = S.FullyConnected(S.Flatten(y), num_hidden=3, name="fc")
    shapes = {"data": (2, 1, 12, 12)}
    t = bind_typing(net, shapes, {})
    rules = lambda lay: {n.name: lay.rules.get(id(n)) for n in t.graph.nodes if n.op is not None}  # noqa: E731
    inferred = rules(layout.assign(t.graph, t.shape_of, inference=True))
    assert inferred["c1"] == inferred["c2"] == "conv" and inferred["p2"] == "tiled_pool", inferred
    assert rules(layout.assign(t.graph, t.shape_of))["c2"] == "conv"      # training too (direct weight gradient)
    rng = np.random.default_rng(5)
    ex = net.simple_bind(ax.cpu(), grad_req="null", **shapes)
    p = {n: rng.uniform(-1, 1, a.shape) for n, a in ex.arg_dict.items()}
    out = ex.forward(**{k: v for k, v in p.items()})[0].asnumpy()

    def conv(a, w, b, pad):
        a = np.pad(a, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        k = w.shape[2]
        oh, ow = a.shape[2] - k + 1, a.shape[3] - k + 1
        cols = np.stack([a[:, :, i:i + oh, j:j + ow] for i in range(k) for j in range(k)], axis=2)
        return np.einsum("nckhw,ock->nohw", cols, w.reshape(w.shape[0], w.shape[1], -1)) + b[None, :, None, None]
    h = np.tanh(conv(p["data"], p["c1_weight"], p["c1_bias"], 0))
    h = np.tanh(conv(h, p["c2_weight"], p["c2_bias"], 1))                  # (2, 6, 6, 6)
    h = h.reshape(2, 6, 3, 2, 3, 2).max(axis=(3, 5)).reshape(2, -1)
    np.testing.assert_allclose(out, h @ p["fc_weight"].T + p["fc_bias"], rtol=1e-4, atol=1e-4)


def _dense_block():
    """Two DenseNet layers (conv outputs joined along C) under a classifier, whose head gradient
    reaches the last Concat's backward NCHW."""
    x = S.Convolution(V("data"), kernel=(3, 3), pad=(1, 1), num_filter=3, no_bias=True, name="c0")
    for i in range(2):
        h = S.Convolution(S.Activation(x, act_type="tanh"), kernel=(3, 3), pad=(1, 1), num_filter=2,
                          no_bias=True, name=f"c{i + 1}")
        x = S.Concat(x, h, dim=1, name=f"cat{i}")
    return S.FullyConnected(x, num_hidden=3, name="fc")


def test_channels_last_concat_and_its_gradient():
    net = _dense_block()
    t = bind_typing(net, {"data": (2, 2, 5, 5)}, {})
    plan = pipeline.training_plan(net, t, {n: "write" for n in net.list_arguments()})
    lay = layout.assign(plan.typing.graph, plan.typing.shape_of)
    rules = {n.name: lay.rules.get(id(n)) for n in plan.typing.graph.nodes if n.op is not None}
    assert rules["cat0"] == rules["cat1"] == rules["cat0_backward"] == rules["cat1_backward"] == "axis3", rules
    rng = np.random.default_rng(3)
    loc = {"data": rng.uniform(-1, 1, (2, 2, 5, 5)), "c0_weight": rng.uniform(-1, 1, (3, 2, 3, 3)),
           "c1_weight": rng.uniform(-1, 1, (2, 3, 3, 3)), "c2_weight": rng.uniform(-1, 1, (2, 5, 3, 3)),
           "fc_weight": rng.uniform(-1, 1, (3, 7 * 25)), "fc_bias": rng.uniform(-1, 1, 3)}
    check_numeric_gradient(net, loc)


@pytest.mark.parametrize("size,pool", [
    (8, dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1))),                               # ResNet's stem pool
    (7, dict(kernel=(3, 3), stride=(2, 2), pooling_convention="full")),               # last window overhangs
    (6, dict(kernel=(2, 3), stride=(1, 2), pad=(0, 1))),
    (9, dict(kernel=(3, 3), stride=(2, 2))),                                           # last row unused
    (6, dict(kernel=(3, 3), stride=(1, 1), pad=(1, 1), pool_type="avg")),             # Inception's average pools
    (7, dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg", count_include_pad=False)),
    (7, dict(kernel=(3, 2), stride=(2, 1), pool_type="avg", pooling_convention="full")),
    (6, dict(kernel=(3, 3), stride=(1, 2), pad=(1, 0), pool_type="sum")),
])
def test_channels_last_overlapping_pooling(size, pool):
    """conv -> relu -> overlapping max / average / sum pool -> conv -> flatten -> fc, forward,
    every gradient and the pooled values: the channels-last rules against the NCHW build and
    numpy's pooling."""
    pool = {"pool_type": "max", **pool}
    x = S.Activation(S.Convolution(V("x"), kernel=(3, 3), pad=(1, 1), num_filter=5, name="c1"), act_type="relu")
    y = S.Pooling(x, name="pool", **pool)
    net = S.FullyConnected(S.Flatten(S.Convolution(y, kernel=(1, 1), num_filter=4, name="c2")),
                           num_hidden=3, name="fc")
    net = S.Group([net, y])
    rng = np.random.default_rng(5)
    shapes = {"x": (2, 3, size, size)}
    t = bind_typing(net, shapes, {})
    plan = pipeline.training_plan(net, t, {n: "write" for n in net.list_arguments()})
    lay = layout.assign(plan.typing.graph, plan.typing.shape_of)
    rules = {n.name: lay.rules.get(id(n)) for n in plan.typing.graph.nodes if n.op is not None}
    assert rules["pool"] == "overlapping_pool" and rules["pool_backward"] == "overlapping_pool_grad", rules
    arg_shapes, _, _ = net.infer_shape(**shapes)
    loc = {n: rng.uniform(-1, 1, s).astype(np.float32) for n, s in zip(net.list_arguments(), arg_shapes)}
    _, out_shapes, _ = net.infer_shape(**shapes)
    heads = [ax.nd.array(rng.uniform(-1, 1, s).astype(np.float32)) for s in out_shapes]
    results = []
    for mode in ("nhwc", "nchw"):
        os.environ["AOTEXEC_LAYOUT"] = mode
        try:
            ex = net.bind(ax.cpu(), args={k: ax.nd.array(v) for k, v in loc.items()},
                          args_grad={k: ax.nd.zeros(v.shape) for k, v in loc.items()})
            outs = [o.asnumpy() for o in ex.forward(is_train=True)]
            ex.backward(heads)
            results.append((outs, {k: g.asnumpy() for k, g in ex.grad_dict.items()}))
        finally:
            os.environ.pop("AOTEXEC_LAYOUT")
    (o1, g1), (o2, g2) = results
    for a, b_ in zip(o1, o2):
        np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-6)
    for k in loc:
        np.testing.assert_allclose(g1[k], g2[k], rtol=1e-4, atol=1e-6, err_msg=k)
    assert np.count_nonzero(g1["x"]) > 0
    # the pooled map against numpy: relu(conv) recomputed in float64, then windows of the padded
    # map (average: over the window clipped to the padded input, or to the input itself)
    xs, w, bias = loc["x"].astype(np.float64), loc["c1_weight"].astype(np.float64), loc["c1_bias"].astype(np.float64)
    xp = np.pad(xs, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + size, j:j + size], w[:, :, i, j])
               for i in range(3) for j in range(3)) + bias[None, :, None, None]
    act = np.maximum(conv, 0)
    (kh, kw), (sh, sw) = pool["kernel"], pool["stride"]
    ph, pw = pool.get("pad", (0, 0))
    oh, ow = o1[1].shape[2:]
    big = (oh * sh + kh + 2 * ph, ow * sw + kw + 2 * pw)
    padded = np.full(act.shape[:2] + big, -np.inf if pool["pool_type"] == "max" else 0.0)
    padded[:, :, ph:ph + size, pw:pw + size] = act
    count = np.zeros(big)
    if pool.get("count_include_pad", True):
        count[:size + 2 * ph, :size + 2 * pw] = 1
    else:
        count[ph:ph + size, pw:pw + size] = 1
    reduce = {"max": lambda v: v.max(axis=(2, 3)), "sum": lambda v: v.sum(axis=(2, 3))}.get(pool["pool_type"])

    def window(i, j):
        v = padded[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
        return reduce(v) if reduce else v.sum(axis=(2, 3)) / count[i * sh:i * sh + kh, j * sw:j * sw + kw].sum()
    ref = np.stack([np.stack([window(i, j) for j in range(ow)], -1) for i in range(oh)], -2)
    np.testing.assert_allclose(o1[1], ref, rtol=1e-5, atol=1e-5)


def test_inference_depthwise_layer_keeps_its_own_dispatch_and_matches_numpy():
    """A depthwise 3x3 -> ReLU -> 1x1 block at inference: the depthwise result gets a second
    use (a one-element read, ops.conv.depthwise_nhwc's ``own_dispatch``) so IREE does not fuse
    the 1x1 layer's data-tiling pack into it; not in training, where the saved output is used
    twice anyway, nor where the kernels take the 1x1 layers with their epilogues folded (no pack
    follows; the ReLU fuses into the depthwise dispatch). Output against numpy."""
    rng = np.random.default_rng(11)
    n, c, f, h, w = 2, 8, 6, 9, 9
    x = rng.uniform(-1, 1, (n, c, h, w)).astype(np.float32)
    wd = rng.uniform(-1, 1, (c, 1, 3, 3)).astype(np.float32)
    wp = rng.uniform(-1, 1, (f, c, 1, 1)).astype(np.float32)
    d = S.Convolution(V("x"), kernel=(3, 3), pad=(1, 1), num_filter=c, num_group=c, no_bias=True, name="dw")
    net = S.Convolution(S.Activation(d, act_type="relu"), kernel=(1, 1), num_filter=f, no_bias=True, name="pw")
    t = bind_typing(net, {"x": x.shape}, {})
    infer, _ = pipeline.entry_points(net, t, ["forward_infer"], channels_last=True)
    train, _ = pipeline.entry_points(net, t, ["forward_train"], channels_last=True)
    assert infer.count('"stablehlo.select"') == 1 and train.count('"stablehlo.select"') == 0
    folded, _ = pipeline.entry_points(net, t, ["forward_infer"], channels_last=True,
                                      kernels=Kernels(Path("/nonexistent/kernels.o"), epilogues=True))
    assert folded.count('"stablehlo.select"') == 0
    ex = net.bind(ax.cpu(), args={"x": ax.nd.array(x), "dw_weight": ax.nd.array(wd), "pw_weight": ax.nd.array(wp)})
    out = ex.forward(is_train=False)[0].asnumpy()
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    dw = sum(xp[:, :, i:i + h, j:j + w] * wd[None, :, 0, i, j, None, None] for i in range(3) for j in range(3))
    np.testing.assert_allclose(out, np.einsum("nchw,fc->nfhw", np.maximum(dw, 0), wp[:, :, 0, 0]), rtol=1e-4, atol=1e-5)


def test_module_rejected_with_pads_in_consumers_compiles_without_them(caplog, monkeypatch):
    """A one-input-channel 3x3/2 layer (its zero second channel is a pad) and a depthwise layer
    at inference: the module has a grouped convolution, so it is first compiled with pads fused
    into their consumers (pipeline.program.tuned_for) in a bounded iree-compile child, where
    IREE 3.13 runs out of memory; it is compiled again without them (a warning says so), and
    its output matches numpy."""
    rng = np.random.default_rng(13)
    x, w1, wd = rng.uniform(-1, 1, (1, 1, 7, 7)), rng.uniform(-1, 1, (4, 1, 3, 3)), rng.uniform(-1, 1, (4, 1, 3, 3))
    h = S.Convolution(V("x"), kernel=(3, 3), stride=(2, 2), num_filter=4, no_bias=True, name="c")
    net = S.Convolution(S.Activation(h, act_type="relu"), kernel=(3, 3), pad=(1, 1), num_filter=4, num_group=4,
                        no_bias=True, name="dw")
    monkeypatch.setenv("AOTEXEC_CACHE", "0")       # the failing first compile, not a cached fallback
    ex = net.bind(ax.cpu(), args={"x": ax.nd.array(x.astype(np.float32)), "c_weight": ax.nd.array(w1.astype(np.float32)),
                                  "dw_weight": ax.nd.array(wd.astype(np.float32))}, grad_req="null")
    with caplog.at_level("WARNING", logger="aotexec"):
        out = ex.forward(is_train=False)[0].asnumpy()
    assert any("pads fused into their consumers" in r.getMessage() for r in caplog.records)
    y = np.maximum(sum(np.einsum("nhw,f->nfhw", x[:, 0, i:i + 5:2, j:j + 5:2], w1[:, 0, i, j])
                       for i in range(3) for j in range(3)), 0)
    yp = np.pad(y, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(yp[:, :, i:i + 3, j:j + 3] * wd[None, :, 0, i, j, None, None] for i in range(3) for j in range(3))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
