"""Shape-generic programs (pipeline/generic.py): one compile serves every shape of a structure.

Compiles with the real IREE compiler; references are numpy.  Each test uses a structure of its
own (the program memo is process-wide), and counts compiles through the pipeline's stats."""
import numpy as np

import aotexec as ax
from aotexec.pipeline import generic, program

S = ax.sym


def counts():
    return program.stats["misses"], generic.stats["compiles"], generic.stats["hits"]


def since(before):
    """(static compiles, generic compiles, generic hits) since ``before = counts()``."""
    return tuple(a - b for a, b in zip(counts(), before))


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def mlp(hidden: int, name: str):
    fc = S.FullyConnected(S.Variable("data"), num_hidden=hidden, name=f"{name}_fc")
    return S.SoftmaxOutput(S.Activation(fc, act_type="relu"), name=f"{name}_sm")


def test_third_shape_compiles_one_module_for_all_later_shapes(monkeypatch):
    monkeypatch.setenv("AOTEXEC_SHAPES", "auto")
    sym = mlp(6, "gen_auto")
    rng = np.random.default_rng(0)
    before = counts()
    shapes = [(3, 4), (13, 4), (3, 4), (5, 7)] + [tuple(int(v) for v in rng.integers(2, 12, 2)) for _ in range(10)]
    for n, f in shapes:
        ex = sym.simple_bind(ax.cpu(), data=(n, f))
        x = rng.standard_normal((n, f)).astype("f4")
        w = rng.standard_normal((6, f)).astype("f4")
        b = rng.standard_normal(6).astype("f4")
        out = ex.forward(data=x, gen_auto_fc_weight=w, gen_auto_fc_bias=b)[0].asnumpy()
        np.testing.assert_allclose(out, softmax(np.maximum(x @ w.T + b, 0)), rtol=1e-5, atol=1e-6)
    misses, compiles, hits = since(before)
    assert (misses, compiles) == (2, 1)      # the first two shapes static (one bound twice), the third generic
    assert hits == len(shapes) - 4


def check_mlp_step(sym, prefix: str, hidden: int, n: int, f: int, rng) -> None:
    """One training step of ``mlp(hidden, prefix)`` at data (n, f) against numpy."""
    ex = sym.simple_bind(ax.cpu(), data=(n, f), grad_req="write")
    x = rng.standard_normal((n, f)).astype("f4")
    w = rng.standard_normal((hidden, f)).astype("f4")
    b = rng.standard_normal(hidden).astype("f4")
    label = rng.integers(0, hidden, n).astype("f4")
    out = ex.forward(is_train=True, data=x, **{f"{prefix}_fc_weight": w, f"{prefix}_fc_bias": b,
                                               f"{prefix}_sm_label": label})
    ex.backward()
    h = x @ w.T + b
    np.testing.assert_allclose(out[0].asnumpy(), softmax(np.maximum(h, 0)), rtol=1e-5, atol=1e-6)
    g = (softmax(np.maximum(h, 0)) - np.eye(hidden)[label.astype(int)]) * (h > 0)
    grads = {k: v.asnumpy() for k, v in ex.grad_dict.items()}
    np.testing.assert_allclose(grads[f"{prefix}_fc_weight"], g.T @ x, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads[f"{prefix}_fc_bias"], g.sum(0), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads["data"], g @ w, rtol=1e-4, atol=1e-5)


def test_generic_training_gradients_match_numpy(monkeypatch):
    monkeypatch.setenv("AOTEXEC_SHAPES", "generic")
    sym = mlp(5, "gen_train")
    rng = np.random.default_rng(1)
    before = counts()
    for n, f in [(4, 3), (7, 9), (2, 2), (6, 5)]:
        check_mlp_step(sym, "gen_train", 5, n, f, rng)
    misses, compiles, _ = since(before)
    assert (misses, compiles) == (0, 1)


def test_reshape_to_an_uncompiled_shape_costs_no_compile(monkeypatch):
    monkeypatch.setenv("AOTEXEC_SHAPES", "auto")
    x, y = S.Variable("x"), S.Variable("y")
    sym = S.broadcast_add(S.exp(x) * 2.0, S.sum(y, axis=1, keepdims=True))
    rng = np.random.default_rng(2)
    ex = sym.simple_bind(ax.cpu(), x=(3, 4), y=(3, 5))
    ex.forward()
    sym.simple_bind(ax.cpu(), x=(4, 4), y=(4, 5)).forward()      # the structure's second shape: static
    sym.simple_bind(ax.cpu(), x=(5, 2), y=(5, 3)).forward()      # its third: generic
    before = counts()
    for n, m, k in [(6, 3, 7), (2, 9, 4), (11, 5, 2)]:
        new = ex.reshape(allow_up_sizing=True, x=(n, m), y=(n, k))
        a, b = rng.standard_normal((n, m)).astype("f4"), rng.standard_normal((n, k)).astype("f4")
        out = new.forward(x=a, y=b)[0].asnumpy()
        np.testing.assert_allclose(out, np.exp(a) * 2 + b.sum(1, keepdims=True), rtol=1e-5, atol=1e-5)
    misses, compiles, hits = since(before)
    assert (misses, compiles, hits) == (0, 0, 3)


def conv2d(x, w, b, pad):
    """NCHW cross-correlation, stride 1 (numpy reference)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    cols = np.stack([xp[:, :, i:i + oh, j:j + ow] for i in range(kh) for j in range(kw)], axis=2)
    return np.einsum("nckhw,ock->nohw", cols, w.reshape(o, c, kh * kw)) + b[None, :, None, None]


def test_convolution_net_is_generic_in_its_batch(monkeypatch):
    monkeypatch.setenv("AOTEXEC_SHAPES", "generic")
    c = S.Convolution(S.Variable("data"), num_filter=4, kernel=(3, 3), pad=(1, 1), name="gconv")
    sym = S.FullyConnected(S.Activation(c, act_type="relu"), num_hidden=3, name="gconv_fc")
    rng = np.random.default_rng(3)
    before = counts()
    for n in (2, 5, 3, 8):
        ex = sym.simple_bind(ax.cpu(), data=(n, 2, 6, 5))
        vals = {k: rng.standard_normal(a.shape).astype("f4") for k, a in ex.arg_dict.items()}
        out = ex.forward(**vals)[0].asnumpy()
        h = np.maximum(conv2d(vals["data"], vals["gconv_weight"], vals["gconv_bias"], 1), 0).reshape(n, -1)
        np.testing.assert_allclose(out, h @ vals["gconv_fc_weight"].T + vals["gconv_fc_bias"], rtol=1e-4, atol=1e-4)
    misses, compiles, hits = since(before)
    assert (misses, compiles, hits) == (0, 1, 3)


def test_static_policy_compiles_per_shape(monkeypatch):
    monkeypatch.setenv("AOTEXEC_SHAPES", "static")
    sym = S.tanh(S.Variable("gen_static_x")) * 3.0
    before = counts()
    for shape in [(2, 3), (4, 3), (5, 6)]:
        ex = sym.simple_bind(ax.cpu(), gen_static_x=shape)
        a = np.linspace(-2, 2, np.prod(shape), dtype="f4").reshape(shape)
        np.testing.assert_allclose(ex.forward(gen_static_x=a)[0].asnumpy(), np.tanh(a) * 3, rtol=1e-5, atol=1e-6)
    misses, compiles, _ = since(before)
    assert (misses, compiles) == (3, 0)


def max_pool_3x3_s2_p1(x):
    """numpy reference of MXNet's Pooling(kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='max')."""
    n, c, h, w = x.shape
    oh, ow = (h - 1) // 2 + 1, (w - 1) // 2 + 1
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    return np.stack([xp[:, :, i:i + 2 * oh - 1:2, j:j + 2 * ow - 1:2] for i in range(3) for j in range(3)]).max(0)


def test_overlapping_max_pool_sizes_come_from_the_shapes_at_run_time(monkeypatch):
    """Output sizes are floor divisions of the input's (computed in the module, not traced).
    Odd sizes only: whether the last window overhangs the input is a guard (parity)."""
    monkeypatch.setenv("AOTEXEC_SHAPES", "generic")
    sym = S.Pooling(S.Variable("gpool_x"), kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="max")
    rng = np.random.default_rng(4)
    before = counts()
    for shape in [(2, 3, 7, 5), (3, 2, 9, 11), (2, 4, 5, 7), (5, 3, 11, 9)]:
        x = rng.standard_normal(shape).astype("f4")
        out = sym.simple_bind(ax.cpu(), gpool_x=shape).forward(gpool_x=x)[0].asnumpy()
        np.testing.assert_array_equal(out, max_pool_3x3_s2_p1(x))
    misses, compiles, hits = since(before)
    assert (misses, compiles, hits) == (0, 1, 3)


def test_sizes_of_one_share_the_generic_program(monkeypatch):
    """A batch or feature size of 1 is symbolic too (only a rule that asks whether a dim is 1
    splits it off); matrix-vector products with dynamic dims stay one dot_general."""
    monkeypatch.setenv("AOTEXEC_SHAPES", "generic")
    sym = mlp(4, "gen_unit")
    rng = np.random.default_rng(5)
    before = counts()
    for n, f in [(1, 3), (1, 6), (5, 1), (2, 1)]:
        check_mlp_step(sym, "gen_unit", 4, n, f, rng)
    misses, compiles, hits = since(before)
    assert (misses, compiles, hits) == (0, 1, 3)
