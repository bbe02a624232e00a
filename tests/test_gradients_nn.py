"""Gradient rules of the nn and loss ops beyond what the MXNet goldens cover.

Differentiable layers: the compiled backward against central differences of the
compiled forward (tests/gradcheck.py), several configurations per graph (one
compile per bind).  Loss heads (their gradient is not the derivative of their
output) and Dropout: against closed forms computed here with numpy."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from contexts import CONTEXTS
from gradcheck import check_numeric_gradient

S = ax.sym
V = S.Variable


def check(outs, location, **kw):
    check_numeric_gradient(S.Group(outs), location, **kw)


def distinct(shape, seed, spacing=0.05):
    """Values with no ties closer than ``spacing`` (max pooling's argmax stays put under +-eps)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n) - n / 2).reshape(shape) * spacing


def test_convolution_configs():
    rng = np.random.default_rng(0)
    r = lambda *s: rng.uniform(-1, 1, s)  # noqa: E731
    outs = [
        S.Convolution(V("x1"), kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_filter=2, name="c1"),
        S.Convolution(V("x2"), kernel=(2, 2), dilate=(2, 2), num_filter=2, no_bias=True, name="c2"),
        S.Convolution(V("x3"), kernel=(3, 3), pad=(1, 1), num_group=2, num_filter=4, name="c3"),
        S.Convolution(V("x4"), kernel=(3,), stride=(2,), pad=(2,), num_filter=2, name="c4"),
        S.Convolution(V("x5"), kernel=(2, 2, 2), stride=(1, 2, 1), num_filter=2, name="c5"),
        S.Convolution(V("x6"), kernel=(1, 1), pad=(1, 1), stride=(2, 2), num_filter=1, no_bias=True, name="c6"),
        # one input channel (the shifted-sum lowering); batch 1 makes the weight gradient one too
        S.Convolution(V("x7"), kernel=(5, 5), pad=(1, 1), num_filter=2, name="c7"),
        S.Convolution(V("x8"), kernel=(3, 3), stride=(2, 2), num_filter=2, name="c8"),
    ]
    loc = {"x1": r(1, 2, 5, 5), "c1_weight": r(2, 2, 3, 3), "c1_bias": r(2),
           "x2": r(1, 2, 6, 5), "c2_weight": r(2, 2, 2, 2),
           "x3": r(1, 4, 3, 3), "c3_weight": r(4, 2, 3, 3), "c3_bias": r(4),
           "x4": r(2, 2, 6), "c4_weight": r(2, 2, 3), "c4_bias": r(2),
           "x5": r(1, 1, 3, 4, 3), "c5_weight": r(2, 1, 2, 2, 2), "c5_bias": r(2),
           "x6": r(1, 2, 3, 4), "c6_weight": r(1, 2, 1, 1),
           "x7": r(2, 1, 6, 7), "c7_weight": r(2, 1, 5, 5), "c7_bias": r(2),
           "x8": r(1, 1, 7, 7), "c8_weight": r(2, 1, 3, 3), "c8_bias": r(2)}
    check(outs, loc)


@pytest.mark.parametrize("data_grad", [True, False])
def test_convolution_fenced_gradients(data_grad):
    """5x5 kernels with more than four channels take the fenced NHWC convolution for the
    data and weight gradients, and the bias gradient reads the fenced copy of the output
    gradient (``Emitter.reduce``); without the data gradient, only the weight one reads it."""
    rng = np.random.default_rng(2)
    r = lambda *s: rng.uniform(-1, 1, s)  # noqa: E731
    out = S.Convolution(V("x"), kernel=(5, 5), pad=(1, 1), num_filter=6, name="c")
    loc = {"x": r(6, 5, 7, 8), "c_weight": r(6, 5, 5, 5), "c_bias": r(6)}
    check([out], loc, grad_nodes=None if data_grad else ["c_weight", "c_bias"])


# the weight-gradient forms of ops/conv_forms.py (weight_grad_form) and the grouped forward
# forms, at batch 1 and 2 (the batch is the direct form's input channels)
GROUPED = {   # name: (input shape, Convolution kwargs)
    "g": ((2, 4, 5, 5), dict(kernel=(3, 3), pad=(1, 1), num_group=2, num_filter=6)),                # grouped
    "dw": ((2, 3, 6, 5), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), num_group=3, num_filter=3)),  # depthwise
    "dm": ((1, 2, 5, 5), dict(kernel=(2, 2), dilate=(2, 1), num_group=2, num_filter=4, no_bias=True)),  # multiplier 2
    "d1": ((2, 4, 7), dict(kernel=(3,), stride=(2,), pad=(1,), num_group=4, num_filter=4)),          # 1-D depthwise
    "g3": ((1, 4, 3, 4, 3), dict(kernel=(2, 2, 2), num_group=2, num_filter=2, no_bias=True)),       # 3-D grouped
}
SMALL_BATCH = {
    "o3": ((1, 3, 6, 6), dict(kernel=(3, 3), pad=(1, 1), num_filter=4)),                    # offsets (llvm-cpu)
    "o1": ((2, 5, 4, 5), dict(kernel=(1, 1), stride=(2, 2), num_filter=3, no_bias=True)),   # one offset
    "d7": ((1, 3, 11, 11), dict(kernel=(7, 7), stride=(2, 2), pad=(3, 3), num_filter=4)),   # direct, batch padded
    "d5": ((2, 2, 7, 8), dict(kernel=(5, 5), pad=(1, 1), num_filter=3, no_bias=True)),      # direct, 2 channels
}


def _conv_case(table: dict, names: str, seed: int):
    rng = np.random.default_rng(seed)
    outs, loc = [], {}
    for n in names.split(","):
        shape, kw = table[n]
        outs.append(S.Convolution(V("x" + n), name="c" + n, **kw))
        loc["x" + n] = rng.uniform(-1, 1, shape)
        loc[f"c{n}_weight"] = rng.uniform(-1, 1, (kw["num_filter"], shape[1] // kw.get("num_group", 1)) + kw["kernel"])
        if not kw.get("no_bias"):
            loc[f"c{n}_bias"] = rng.uniform(-1, 1, kw["num_filter"])
    return outs, loc


@pytest.mark.parametrize("ctx", CONTEXTS)
@pytest.mark.parametrize("names", ["g,dw,dm", "d1,g3"])
def test_grouped_and_depthwise_convolution_gradients(ctx, names):
    """One grouped op on llvm-cpu, per group on Vulkan (forward and data gradient); weight
    gradients per kernel offset (depthwise; grouped on Vulkan) or by batch_group_count."""
    check(*_conv_case(GROUPED, names, 3), ctx=ctx)


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_small_batch_convolution_gradients(ctx):
    check(*_conv_case(SMALL_BATCH, "o3,o1,d7,d5", 4), ctx=ctx)


def test_deconvolution_configs():
    rng = np.random.default_rng(1)
    r = lambda *s: rng.uniform(-1, 1, s)  # noqa: E731
    outs = [
        S.Deconvolution(V("x1"), kernel=(3, 3), stride=(2, 2), num_filter=2, no_bias=False, name="d1"),
        S.Deconvolution(V("x2"), kernel=(3, 3), stride=(2, 2), pad=(1, 1), adj=(1, 1), num_filter=2, name="d2"),
        S.Deconvolution(V("x3"), kernel=(2, 2), dilate=(2, 2), num_group=2, num_filter=4, name="d3"),
        S.Deconvolution(V("x4"), kernel=(4,), stride=(2,), pad=(1,), num_filter=1, name="d4"),
    ]
    loc = {"x1": r(1, 2, 2, 3), "d1_weight": r(2, 2, 3, 3), "d1_bias": r(2),
           "x2": r(1, 2, 2, 2), "d2_weight": r(2, 2, 3, 3),
           "x3": r(1, 2, 2, 2), "d3_weight": r(2, 2, 2, 2),
           "x4": r(2, 2, 3), "d4_weight": r(2, 1, 4)}
    check(outs, loc)


POOLS = {   # name: (input, Pooling kwargs)
    "a": (distinct((1, 2, 5, 5), 0), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")),  # overlapping
    "b": (distinct((1, 1, 5, 5), 1), dict(kernel=(2, 2), stride=(2, 2), pool_type="max")),     # tiled, tail cropped
    "c": (distinct((1, 1, 5, 4), 2), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg")),  # include pad
    "d": (distinct((1, 1, 6, 6), 3), dict(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                                          count_include_pad=False, pooling_convention="full")),
    "e": (distinct((1, 1, 4, 5), 4), dict(kernel=(2, 3), stride=(1, 2), pool_type="sum")),
    "f": (distinct((2, 2, 3, 3), 5), dict(global_pool=True, pool_type="max", kernel=(1, 1))),
    "g": (distinct((1, 1, 3, 3), 6) + 0.3, dict(kernel=(2, 2), stride=(1, 1), pool_type="lp", p_value=2)),
    "h": (distinct((1, 2, 6), 7), dict(kernel=(3,), stride=(2,), pad=(1,), pool_type="max")),     # 1-D
}


# IREE's compile time grows faster than the module: a few small graphs beat one large one
@pytest.mark.parametrize("names", ["ab", "cde", "fgh"])
def test_pooling_configs(names):
    check([S.Pooling(V(n), **POOLS[n][1]) for n in names], {n: POOLS[n][0] for n in names})


def test_max_pooling_gradient_goes_to_the_first_maximum():
    """Ties: MXNet gives each window's gradient to its first maximum (row-major)."""
    x = np.array([[[[1, 3, 3, 0], [3, 2, 1, 1], [0, 0, 2, 2], [1, 0, 2, 2]]]], np.float32)
    outs = [S.Pooling(V("a"), kernel=(2, 2), stride=(2, 2), pool_type="max"),
            S.Pooling(V("b"), kernel=(2, 2), stride=(1, 1), pool_type="max")]
    ex = S.Group(outs).bind(ax.cpu(), args={"a": ax.nd.array(x), "b": ax.nd.array(x)},
                            args_grad={"a": ax.nd.zeros(x.shape), "b": ax.nd.zeros(x.shape)})
    ex.forward(is_train=True)
    ex.backward([ax.nd.ones((1, 1, 2, 2)), ax.nd.ones((1, 1, 3, 3))])
    ga = np.zeros((4, 4))
    ga[0, 1] = ga[0, 2] = ga[3, 0] = ga[2, 2] = 1   # window (1,1): all 2s -> its first
    np.testing.assert_array_equal(ex.grad_dict["a"].asnumpy()[0, 0], ga)
    gb = np.zeros((4, 4))   # windows at (i, j): first max in row-major order
    for i in range(3):
        for j in range(3):
            w = x[0, 0, i:i + 2, j:j + 2]
            k = int(np.argmax(w))   # numpy argmax: first occurrence
            gb[i + k // 2, j + k % 2] += 1
    np.testing.assert_array_equal(ex.grad_dict["b"].asnumpy()[0, 0], gb)


def test_leaky_relu_variants():
    rng = np.random.default_rng(2)
    away = lambda *s: rng.uniform(0.2, 1.0, s) * rng.choice([-1, 1], s)  # noqa: E731  (no kink at 0)
    outs = [S.LeakyReLU(V("a"), act_type="prelu", name="p1"),
            S.LeakyReLU(V("b"), act_type="prelu", name="p2"),
            S.LeakyReLU(V("c"), act_type="selu"),
            S.LeakyReLU(V("d"), act_type="gelu"),
            S.LeakyReLU(V("e"), act_type="elu", slope=0.7),
            S.LeakyReLU(V("f"), act_type="leaky", slope=0.3)]
    loc = {"a": away(2, 3, 2, 2), "p1_gamma": rng.uniform(0.1, 0.5, 3),
           "b": away(3, 2), "p2_gamma": np.array([0.2]),
           "c": away(2, 3), "d": rng.uniform(-2, 2, (2, 3)), "e": away(2, 3), "f": away(2, 3)}
    check(outs, loc)


def test_batch_norm_training_and_global_stats():
    rng = np.random.default_rng(3)
    outs = [S.BatchNorm(V("a"), fix_gamma=False, name="bn1"),
            S.BatchNorm(V("b"), fix_gamma=False, eps=1e-2, name="bn2"),
            S.BatchNorm(V("c"), fix_gamma=True, name="bn3"),
            S.BatchNorm(V("d"), fix_gamma=False, axis=-1, name="bn4"),
            S.BatchNorm(V("e"), fix_gamma=False, use_global_stats=True, name="bn5")]
    loc = {"a": rng.normal(size=(4, 3)), "bn1_gamma": rng.uniform(0.5, 1.5, 3), "bn1_beta": rng.normal(size=3),
           "b": rng.normal(size=(2, 2, 2, 3)), "bn2_gamma": rng.uniform(0.5, 1.5, 2), "bn2_beta": rng.normal(size=2),
           "c": rng.normal(size=(3, 2, 2)), "bn3_gamma": np.ones(2), "bn3_beta": rng.normal(size=2),
           "d": rng.normal(size=(3, 2, 2)), "bn4_gamma": rng.uniform(0.5, 1.5, 2), "bn4_beta": rng.normal(size=2),
           "e": rng.normal(size=(2, 2, 3)), "bn5_gamma": rng.uniform(0.5, 1.5, 2), "bn5_beta": rng.normal(size=2)}
    aux = {f"bn{i}_moving_mean": rng.normal(size=n) * 0.1 for i, n in zip(range(1, 6), (3, 2, 2, 2, 2))}
    aux.update({f"bn{i}_moving_var": rng.uniform(0.5, 1.5, n) for i, n in zip(range(1, 6), (3, 2, 2, 2, 2))})
    aux = {k: v.astype(np.float32) for k, v in aux.items()}
    grad_nodes = [k for k in loc if k != "bn3_gamma"]
    check(outs, loc, aux=aux, grad_nodes=grad_nodes, rtol=3e-2, atol=5e-3)


def test_batch_norm_moving_stats_update():
    """new = m * momentum + batch stat * (1 - momentum), biased variance; fix_gamma: zero gamma gradient."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 3, 2)).astype(np.float32)
    mm, mv = rng.normal(size=3).astype(np.float32), rng.uniform(0.5, 2, 3).astype(np.float32)
    sym = S.BatchNorm(V("x"), momentum=0.8, name="bn")
    ex = sym.bind(ax.cpu(), args={"x": ax.nd.array(x), "bn_gamma": ax.nd.ones((3,)), "bn_beta": ax.nd.zeros((3,))},
                  args_grad={"x": ax.nd.zeros(x.shape), "bn_gamma": ax.nd.ones((3,)), "bn_beta": ax.nd.zeros((3,))},
                  aux_states={"bn_moving_mean": ax.nd.array(mm), "bn_moving_var": ax.nd.array(mv)})
    ex.forward(is_train=True)
    ex.backward([ax.nd.array(rng.normal(size=x.shape).astype(np.float32))])
    np.testing.assert_allclose(ex.aux_dict["bn_moving_mean"].asnumpy(), mm * 0.8 + x.mean(axis=(0, 2)) * 0.2,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ex.aux_dict["bn_moving_var"].asnumpy(), mv * 0.8 + x.var(axis=(0, 2)) * 0.2,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ex.grad_dict["bn_gamma"].asnumpy(), np.zeros(3))


def test_lrn_softmax():
    rng = np.random.default_rng(5)
    outs = [S.LRN(V("a"), nsize=3, alpha=0.5, beta=0.75, knorm=1.5),
            S.LRN(V("b"), nsize=2, alpha=0.3, beta=0.5),
            S.softmax(V("c"), axis=0),
            S.softmax(V("d"), axis=1, temperature=2.0),
            S.log_softmax(V("e"), axis=-1, temperature=0.5),
            S.SoftmaxActivation(V("f"), mode="channel"),
            S.SoftmaxActivation(V("g"), mode="instance")]
    loc = {"a": rng.normal(size=(1, 5, 2, 2)), "b": rng.normal(size=(2, 3, 2)),
           "c": rng.normal(size=(3, 2)), "d": rng.normal(size=(2, 3, 2)), "e": rng.normal(size=(2, 4)),
           "f": rng.normal(size=(2, 3, 2)), "g": rng.normal(size=(2, 2, 2))}
    check(outs, loc)


def test_upsampling_embedding():
    rng = np.random.default_rng(6)
    outs = [S.UpSampling(V("h1"), V("h2"), scale=2, sample_type="nearest", num_args=2, multi_input_mode="sum"),
            S.UpSampling(V("i1"), V("i2"), scale=2, sample_type="nearest", num_args=2),
            S.UpSampling(V("j"), V("j_weight"), scale=2, sample_type="bilinear", num_filter=2, num_args=2),
            S.Embedding(V("ids"), V("emb_w"), input_dim=5, output_dim=3)]
    loc = {"h1": rng.normal(size=(1, 2, 2, 2)), "h2": rng.normal(size=(1, 2, 4, 4)),
           "i1": rng.normal(size=(1, 1, 2, 2)), "i2": rng.normal(size=(1, 2, 1, 1)),
           "j": rng.normal(size=(1, 2, 2, 2)), "j_weight": rng.normal(size=(2, 1, 4, 4)),
           "ids": np.array([[0, 3, 3], [4, 9, -2]]),   # repeated, and clipped (9 -> 4, -2 -> 0)
           "emb_w": rng.normal(size=(5, 3))}
    check(outs, loc, grad_nodes=[k for k in loc if k != "ids"])


def _loss_grads(heads, args):
    """Outputs and the gradients of the arguments named x* after backward() without head gradients."""
    ex = S.Group(heads).bind(ax.cpu(), args={k: ax.nd.array(v) for k, v in args.items()},
                             args_grad={k: ax.nd.zeros(v.shape) for k, v in args.items() if k.startswith("x")},
                             grad_req={k: "write" if k.startswith("x") else "null" for k in args})
    outs = [o.asnumpy() for o in ex.forward(is_train=True)]
    ex.backward()
    return outs, {k: ex.grad_dict[k].asnumpy() for k in args if k.startswith("x")}


def _softmax_np(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_loss_head_gradients():
    """Regression outputs (grad_scale / outputs per sample), MakeLoss normalizations, make_loss,
    SoftmaxOutput with preserve_shape + use_ignore + valid / batch normalization."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    lab = rng.normal(size=(4, 3)).astype(np.float32)
    xs = rng.normal(size=(2, 3, 4)).astype(np.float32)
    ls = np.array([[0, 3, -1], [2, -1, 1]], np.float32)
    heads = [S.LinearRegressionOutput(V("x1"), V("l1"), grad_scale=2.0),
             S.MAERegressionOutput(V("x2"), V("l2"), grad_scale=0.5),
             S.LogisticRegressionOutput(V("x3"), V("l3")),
             S.MakeLoss(V("x4"), grad_scale=3.0, normalization="batch"),
             S.MakeLoss(V("x5"), grad_scale=3.0, normalization="valid", valid_thresh=0.2),
             S.make_loss(V("x6")),
             S.SoftmaxOutput(V("x7"), V("l7"), preserve_shape=True, use_ignore=True, ignore_label=-1,
                             normalization="valid", grad_scale=1.5),
             S.SoftmaxOutput(V("x8"), V("l8"), preserve_shape=True, normalization="batch")]
    args = {"x1": x, "l1": lab, "x2": x, "l2": lab, "x3": x, "l3": lab, "x4": x, "x5": x, "x6": x,
            "x7": xs, "l7": ls, "x8": xs, "l8": np.abs(ls)}
    outs, g = _loss_grads(heads, args)
    tol = dict(rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g["x1"], (x - lab) * 2.0 / 3, **tol)
    np.testing.assert_allclose(g["x2"], np.sign(x - lab) * 0.5 / 3, **tol)
    np.testing.assert_allclose(g["x3"], (1 / (1 + np.exp(-x)) - lab) / 3, **tol)
    np.testing.assert_allclose(g["x4"], np.full(x.shape, 3.0 / 4), **tol)
    np.testing.assert_allclose(g["x5"], np.full(x.shape, 3.0 / max(1, int((x > 0.2).sum()))), **tol)
    np.testing.assert_array_equal(g["x6"], np.ones(x.shape))
    p = _softmax_np(xs, -1)
    np.testing.assert_allclose(outs[6], p, **tol)
    onehot = np.eye(4)[np.where(ls < 0, 0, ls).astype(int)]
    np.testing.assert_allclose(g["x7"], (p - onehot) * (ls >= 0)[..., None] * 1.5 / 4, **tol)   # 4 valid labels
    np.testing.assert_allclose(g["x8"], (p - np.eye(4)[np.abs(ls).astype(int)]) / 6, **tol)     # 6 labels


# --- Dropout ---
@pytest.mark.parametrize("ctx", CONTEXTS)
def test_dropout_training_masks(ctx):
    p = 0.3
    x = np.random.default_rng(8).uniform(1, 2, (64, 50)).astype(np.float32)
    sym = S.Dropout(V("x"), p=p)
    ex = sym.bind(ctx, args={"x": ax.nd.array(x, ctx=ctx)}, args_grad={"x": ax.nd.zeros(x.shape, ctx=ctx)})
    ax.random.seed(42)
    outs = []
    for _ in range(3):
        y = ex.forward(is_train=True)[0].asnumpy()
        kept = y != 0
        # kept values are scaled by 1/(1-p); the kept fraction is about 1-p (3200 draws: sd ~0.008)
        np.testing.assert_allclose(y[kept], x[kept] / (1 - p), rtol=1e-5)
        assert abs(kept.mean() - (1 - p)) < 0.04, kept.mean()
        head = np.random.default_rng(len(outs)).normal(size=x.shape).astype(np.float32)
        ex.backward([ax.nd.array(head, ctx=ctx)])
        np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), head * kept / (1 - p), rtol=1e-5, atol=1e-7)
        outs.append(y)
    assert not np.array_equal(outs[0] != 0, outs[1] != 0)     # a new mask every call
    assert not np.array_equal(outs[1] != 0, outs[2] != 0)
    ax.random.seed(42)
    again = [ex.forward(is_train=True)[0].asnumpy() for _ in range(2)]
    np.testing.assert_array_equal(again[0], outs[0])          # the seed repeats the stream
    np.testing.assert_array_equal(again[1], outs[1])
    np.testing.assert_array_equal(ex.forward(is_train=False)[0].asnumpy(), x)   # inference: identity


def test_dropout_nodes_axes_and_modes():
    x = np.ones((8, 6, 10), np.float32)
    v = V("x")         # one variable: two of one name are refused at bind
    sym = S.Group([S.Dropout(v, p=0.5, name="d1"), S.Dropout(v, p=0.5, name="d2"),
                   S.Dropout(v, p=0.5, axes=(1,), name="d3")])
    ex = sym.bind(ax.cpu(), args={"x": ax.nd.array(x)}, args_grad={"x": ax.nd.zeros(x.shape)})
    d1, d2, d3 = (o.asnumpy() for o in ex.forward(is_train=True))
    assert not np.array_equal(d1, d2)                 # each node its own stream
    assert np.all((d3 == d3[:, :1, :]))               # one mask shared along axis 1
    assert set(np.unique(d3)) <= {0.0, 2.0} and 0 < (d3 != 0).mean() < 1
    always = S.Dropout(V("x"), p=0.5, mode="always")
    ex = always.bind(ax.cpu(), args={"x": ax.nd.array(x)}, grad_req="null")
    a, b = (ex.forward(is_train=False)[0].asnumpy() for _ in range(2))   # drops in inference too
    assert set(np.unique(a)) == {0.0, 2.0} and 0.4 < (a != 0).mean() < 0.6
    assert not np.array_equal(a, b)                                      # a new mask every call


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_rrelu_draws_slopes_in_training(ctx):
    """MXNet's rrelu: in training each negative input gets a slope ~ U(lower, upper), which
    the gradient reuses; in inference the slope is (lower + upper) / 2."""
    x = np.linspace(-2, 2, 4000, dtype=np.float32).reshape(40, 100)
    x[x == 0] = 0.01
    net = S.LeakyReLU(V("x"), act_type="rrelu", lower_bound=0.1, upper_bound=0.4)
    ex = net.bind(ctx, args={"x": ax.nd.array(x, ctx=ctx)}, args_grad={"x": ax.nd.zeros(x.shape, ctx=ctx)})
    y = ex.forward(is_train=True)[0].asnumpy()
    g = np.random.default_rng(0).uniform(0.5, 1.5, x.shape).astype(np.float32)
    ex.backward(ax.nd.array(g, ctx=ctx))
    neg = x < 0
    slope = y[neg] / x[neg]
    assert 0.1 <= slope.min() and slope.max() <= 0.4 and abs(slope.mean() - 0.25) < 0.01 and slope.std() > 0.05
    np.testing.assert_array_equal(y[~neg], x[~neg])
    dx = ex.grad_dict["x"].asnumpy()
    np.testing.assert_allclose(dx[neg], g[neg] * slope, rtol=1e-5)
    np.testing.assert_array_equal(dx[~neg], g[~neg])
    assert not np.array_equal(ex.forward(is_train=True)[0].asnumpy(), y)   # new slopes every call
    yi = ex.forward(is_train=False)[0].asnumpy()
    np.testing.assert_allclose(yi[neg], 0.25 * x[neg], rtol=1e-6)


def test_softmax_use_length_matches_mxnet():
    """Masked softmax forward and gradient against MXNet 1.9.1 (tests/data/oracle/README.md)."""
    from pathlib import Path
    d = np.load(Path(__file__).parent / "data" / "oracle" / "softmax_use_length.npz", allow_pickle=False)
    net = S.softmax(V("x"), length=V("l"), use_length=True, axis=-1)
    assert net.list_arguments() == ["x", "l"]
    ex = net.simple_bind(ax.cpu(), x=d["x"].shape, type_dict={"l": np.int32}, grad_req={"x": "write", "l": "null"})
    ex.arg_dict["x"][:] = d["x"]
    ex.arg_dict["l"][:] = d["l"]
    np.testing.assert_allclose(ex.forward(is_train=True)[0].asnumpy(), d["y"], rtol=1e-5, atol=1e-7)
    ex.backward(ax.nd.array(d["g"]))
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), d["dx"], rtol=1e-5, atol=1e-7)


def test_numeric_pooling_max_first_max_matches_numpy_reference():
    """Overlapping, padded max pooling against a direct numpy loop (first maximum per window)."""
    x = np.round(np.random.default_rng(9).normal(size=(1, 1, 5, 5)), 1).astype(np.float32)   # ties likely
    k, s, q = 3, 2, 1
    ex = S.Pooling(V("x"), kernel=(k, k), stride=(s, s), pad=(q, q), pool_type="max").bind(
        ax.cpu(), args={"x": ax.nd.array(x)}, args_grad={"x": ax.nd.zeros(x.shape)})
    out = ex.forward(is_train=True)[0].asnumpy()
    head = np.random.default_rng(10).normal(size=out.shape).astype(np.float32)
    ex.backward([ax.nd.array(head)])
    want = np.zeros((5, 5), np.float32)
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            best = None
            for a in range(i * s - q, i * s - q + k):
                for c in range(j * s - q, j * s - q + k):
                    if 0 <= a < 5 and 0 <= c < 5 and (best is None or x[0, 0, a, c] > x[0, 0, best[0], best[1]]):
                        best = (a, c)
            want[best] += head[0, 0, i, j]
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy()[0, 0], want, rtol=1e-6, atol=1e-6)
