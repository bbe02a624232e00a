"""Finite-difference checks of the gradient rules of the tensor ops (elemwise, shape,
reduce, index): the compiled backward against central differences of the compiled
forward (tests/gradcheck.py).  Several ops share one graph (one compile per bind);
inputs are tiny and kept away from kinks, ties and discontinuities."""
from __future__ import annotations

import numpy as np
import pytest

import aotexec as ax
from contexts import CONTEXTS
from gradcheck import check_numeric_gradient

S = ax.sym
V = S.Variable


def check(outs, location, grad_nodes=None, **kw):
    check_numeric_gradient(S.Group(outs), location, grad_nodes=grad_nodes, **kw)


# four inputs per unary op, in a domain where the op is smooth
MIXED = np.array([[-0.9, -0.35], [0.45, 0.8]])
POS = np.array([[0.3, 0.55], [0.9, 1.4]])
UNIT = np.array([[-0.7, -0.2], [0.35, 0.65]])
DOMAIN = {"log": POS, "log2": POS, "log10": POS, "sqrt": POS, "rsqrt": POS, "gamma": POS, "gammaln": POS,
          "arcsin": UNIT, "arccos": UNIT, "arctanh": UNIT, "arccosh": POS + 1.0, "log1p": UNIT,
          "floor": MIXED * 2.1, "ceil": MIXED * 2.1, "round": MIXED * 2.1, "rint": MIXED * 2.1,
          "trunc": MIXED * 2.1, "fix": MIXED * 2.1}
UNARY = ["relu", "sigmoid", "tanh", "softsign", "exp", "log", "log2", "log10", "log1p", "expm1", "sqrt",
         "rsqrt", "cbrt", "square", "abs", "sign", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh",
         "cosh", "arcsinh", "arccosh", "arctanh", "negative", "reciprocal", "floor", "ceil", "round", "rint",
         "trunc", "fix", "erf", "gamma", "gammaln", "degrees", "radians", "logical_not"]


def test_unary_ops():
    outs = [getattr(S, op)(V(f"x_{op}")) for op in UNARY]
    check(outs, {f"x_{op}": DOMAIN.get(op, MIXED) for op in UNARY})


def _binary_inputs(rng, shape):
    """lhs = q * rhs with q in k + [0.25, 0.75]: no ties (maximum), lhs / rhs away from integers (mod)."""
    y = rng.uniform(0.8, 1.3, shape) * rng.choice([-1, 1], shape)
    return (rng.integers(-2, 3, shape) + rng.uniform(0.25, 0.75, shape)) * y, y


BINOPS = ["add", "sub", "mul", "div", "mod", "power", "maximum", "minimum", "hypot",
          "equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal", "logical_and", "logical_or"]


def test_binary_same_shape_ops():
    rng = np.random.default_rng(1)
    outs, loc = [], {}
    for op in BINOPS:
        name = {"add": "elemwise_add", "sub": "elemwise_sub", "mul": "elemwise_mul", "div": "elemwise_div"}.get(op, f"_{op}")
        x, y = _binary_inputs(rng, (2, 3))
        if op == "power":
            x = np.abs(x) + 0.3
        loc[f"l_{op}"], loc[f"r_{op}"] = x, y
        outs.append(getattr(S, name)(V(f"l_{op}"), V(f"r_{op}")))
    check(outs, loc)


def test_broadcast_ops():
    """Both operands broadcast ((2, 1, 2) with (3, 1)): the gradients are summed back (unbroadcast)."""
    rng = np.random.default_rng(2)
    outs, loc = [], {}
    for op in BINOPS[:9] + ["greater"]:
        sl, sr = (2, 1, 2), (3, 1)
        y = rng.uniform(0.8, 1.3, sr) * rng.choice([-1, 1], sr)
        x = (rng.integers(-2, 3, sl) + rng.uniform(0.25, 0.75, sl)) * 1.35
        if op == "mod":  # y in [0.9, 1.1], x in k + [0.3, 0.6]: x / y stays >= 0.09 away from integers
            y = rng.uniform(0.9, 1.1, sr)
            x = rng.integers(-2, 3, sl) + rng.uniform(0.3, 0.6, sl)
        if op == "power":
            x = np.abs(x) + 0.3
        if op in ("maximum", "minimum"):
            y = np.round(y, 1) + 0.05  # x has no value within 0.05 of y: ties are impossible below
            x = np.round(x, 1)
        loc[f"l_{op}"], loc[f"r_{op}"] = x, y
        outs.append(getattr(S, f"broadcast_{op}")(V(f"l_{op}"), V(f"r_{op}")))
    check(outs, loc)


SCALARS = {  # op -> (scalar, input)
    "_plus_scalar": (2.5, MIXED), "_minus_scalar": (1.5, MIXED), "_rminus_scalar": (2.0, MIXED),
    "_mul_scalar": (-1.5, MIXED), "_div_scalar": (4.0, MIXED), "_rdiv_scalar": (3.0, MIXED),
    "_mod_scalar": (1.5, np.array([[-0.9, 0.4], [1.1, 2.0]])), "_rmod_scalar": (3.0, np.array([[0.7, 0.9], [1.3, -1.1]])),
    "_power_scalar": (2.5, POS), "_rpower_scalar": (2.0, MIXED), "_maximum_scalar": (0.1, MIXED),
    "_minimum_scalar": (0.1, MIXED), "_hypot_scalar": (1.5, MIXED), "_equal_scalar": (0.45, MIXED),
    "_not_equal_scalar": (0.45, MIXED), "_greater_scalar": (0.0, MIXED), "_greater_equal_scalar": (0.0, MIXED),
    "_lesser_scalar": (0.0, MIXED), "_lesser_equal_scalar": (0.0, MIXED), "_logical_and_scalar": (1.0, MIXED),
    "_logical_or_scalar": (0.0, MIXED),
}


def test_scalar_ops_clip_cast_where():
    outs = [getattr(S, op)(V(f"x{op}"), scalar=s) for op, (s, _) in SCALARS.items()]
    loc = {f"x{op}": x for op, (_, x) in SCALARS.items()}
    outs.append(S.clip(V("x_clip"), a_min=-0.5, a_max=0.5))
    loc["x_clip"] = np.array([[-0.9, -0.3], [0.2, 0.7]])
    outs.append(S.Cast(S.Cast(V("x_cast"), dtype="float64") * 3.0, dtype="float32"))
    loc["x_cast"] = MIXED
    x_ones = V("x_ones")   # one variable: two of one name are refused, as MXNet does
    outs.append(S.ones_like(x_ones) + x_ones * 0.5)
    loc["x_ones"] = MIXED
    outs.append(S.where(V("cond"), V("wx"), V("wy")))
    outs.append(S.where(V("cond1"), V("wx1"), V("wy1")))  # 1-D condition picks rows
    loc.update(cond=[[1, 0, 0], [0, 2, 1]], wx=np.ones((2, 3)) * 0.5, wy=-np.ones((2, 3)),
               cond1=[0, 1], wx1=np.ones((2, 3)), wy1=np.ones((2, 3)) * 2)
    check(outs, loc, grad_nodes=[k for k in loc if not k.startswith("cond")])


def test_shape_ops():
    rng = np.random.default_rng(3)
    d = {n: rng.uniform(-1, 1, s) for n, s in
         dict(a=(2, 3, 2), b=(2, 3), c=(2, 1, 3), e=(4, 2), f=(3, 4), g=(2, 2), h=(1, 3)).items()}
    a, b, c, e, f, g, h = (V(n) for n in "abcefgh")
    outs = [
        S.Flatten(a), S.Reshape(a, shape=(0, -4, 1, 3, 2)), S.Reshape(a, shape=(-1,), reverse=True),
        S.expand_dims(b, axis=-1), S.squeeze(c, axis=1), S.reshape_like(b, V("like32")),
        S.transpose(a, axes=(2, 0, 1)), S.transpose(b), S.SwapAxis(a, dim1=0, dim2=2),
        S.Concat(b, h, dim=0), S.Concat(a, a, dim=-1),
        S.stack(b, b * 2.0, axis=-1),
        S.tile(h, reps=(2, 1, 2)), S.repeat(g, repeats=2, axis=1), S.repeat(g, repeats=3),
        S.broadcast_to(h, shape=(2, 3)), S.broadcast_axis(c, axis=1, size=2), S.broadcast_like(h, V("like")),
        S.slice(f, begin=(2, None), end=(0, None), step=(-1, 2)), S.slice(f, begin=(None, 3), end=(None, 0), step=(2, -2)),
        S.slice(a, begin=(1,), end=(2,)), S.slice_axis(e, axis=0, begin=1, end=-1),
        S.slice_axis(e, axis=-1, begin=1, end=None),
    ]
    outs += list(S.SliceChannel(f, num_outputs=2, axis=1)) + list(S.SliceChannel(e, num_outputs=4, axis=0, squeeze_axis=True))
    outs += list(S._split_v2(f, indices=(1, 2), axis=1))   # column 0 is not in any part: zero gradient
    outs += list(S.split_v2(a, 3, axis=1, squeeze_axis=True))
    outs.append(S.SliceChannel(g, num_outputs=2, axis=1)[1])  # output 0 has no head: its gradient is zero
    d["like32"], d["like"] = np.zeros((3, 2)), np.zeros((2, 3))
    check(outs, d, grad_nodes=list("abcefgh"))


REDUCES = [("sum", {}), ("sum", dict(axis=1, keepdims=True)), ("mean", dict(axis=(0, 2))),
           ("mean", dict(axis=1, exclude=True)), ("max", {}), ("max", dict(axis=1)), ("min", dict(axis=(1, 2), keepdims=True)),
           ("min", dict(axis=-1)), ("prod", dict(axis=2)), ("prod", {}), ("nansum", dict(axis=0)),
           ("nanprod", dict(axis=1))]


def test_reduce_ops():
    rng = np.random.default_rng(4)
    outs, loc = [], {}
    for i, (op, kw) in enumerate(REDUCES):
        x = rng.permutation(np.linspace(0.5, 1.6, 12)).reshape(2, 3, 2) * rng.choice([-1, 1], (2, 3, 2))  # no ties
        loc[f"x{i}"] = x
        outs.append(getattr(S, op)(V(f"x{i}"), **kw))
    for i, kw in enumerate([dict(ord=2), dict(ord=1), dict(ord=2, axis=(1,), keepdims=True), dict(ord=1, axis=(0, 2))]):
        loc[f"n{i}"] = rng.uniform(0.2, 1, (2, 3, 2)) * rng.choice([-1, 1], (2, 3, 2))
        outs.append(S.norm(V(f"n{i}"), **kw))
    loc["arg"] = rng.uniform(-1, 1, (3, 4))
    arg = V("arg")   # one variable: two of one name are refused at bind
    outs += [S.argmax(arg, axis=1), S.argmin(arg), S.argmax(arg, axis=0, keepdims=True)]
    check(outs, loc)


def test_nan_masks_and_max_ties():
    """nansum / nanprod give NaN inputs a zero gradient; max / min (MXNet's mshadow_op::eq) give the
    gradient to every element tied with the extreme.  Expected values from numpy."""
    x = np.array([[0.5, np.nan, 2.0], [np.nan, -1.5, 0.8]], np.float32)
    t = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]], np.float32)
    head = np.array([0.3, -0.7], np.float32)
    sym = S.Group([S.nansum(V("x"), axis=1), S.nanprod(V("y"), axis=1), S.max(V("t"), axis=1), S.min(V("u"), axis=1)])
    data = dict(x=x, y=x, t=t, u=-t)
    ex = sym.bind(ax.cpu(), args={k: ax.nd.array(v) for k, v in data.items()},
                  args_grad={k: ax.nd.zeros(v.shape) for k, v in data.items()})
    ex.forward(is_train=True)
    ex.backward([ax.nd.array(head)] * 4)
    nan, h = np.isnan(x), head[:, None]
    prod = np.nanprod(x, axis=1, keepdims=True)
    np.testing.assert_allclose(ex.grad_dict["x"].asnumpy(), np.where(nan, 0, h * np.ones_like(x)))
    np.testing.assert_allclose(ex.grad_dict["y"].asnumpy(), np.where(nan, 0, h * prod / np.where(nan, 1, x)), rtol=1e-6)
    ties = h * np.array([[0, 1, 1], [1, 1, 0]], np.float32)
    np.testing.assert_allclose(ex.grad_dict["t"].asnumpy(), ties)
    np.testing.assert_allclose(ex.grad_dict["u"].asnumpy(), ties)


def test_dot_ops():
    rng = np.random.default_rng(5)
    loc, outs = {}, []
    cases = [((3, 4), (4, 2), False, False), ((4, 3), (4, 2), True, False), ((3, 4), (2, 4), False, True),
             ((4, 3), (2, 4), True, True), ((4,), (4,), False, False), ((4,), (4, 3), False, False),
             ((3, 2, 2), (3, 2), True, False), ((2, 3), (2, 2, 3), False, True)]
    for i, (sa, sb, ta, tb) in enumerate(cases):
        loc[f"a{i}"], loc[f"b{i}"] = rng.uniform(-1, 1, sa), rng.uniform(-1, 1, sb)
        outs.append(S.dot(V(f"a{i}"), V(f"b{i}"), transpose_a=ta, transpose_b=tb))
    for i, (ta, tb) in enumerate([(False, False), (True, True)]):
        sa, sb = ((2, 3, 2) if ta else (2, 2, 3)), ((2, 2, 3) if tb else (2, 3, 2))
        loc[f"ba{i}"], loc[f"bb{i}"] = rng.uniform(-1, 1, sa), rng.uniform(-1, 1, sb)
        outs.append(S.batch_dot(V(f"ba{i}"), V(f"bb{i}"), transpose_a=ta, transpose_b=tb))
    check(outs, loc)


def test_index_ops():
    oh = V("oh")
    rng = np.random.default_rng(6)
    loc = {n: rng.uniform(-1, 1, s) for n, s in dict(t0=(4, 3), t1=(2, 4), t2=(3, 4), p0=(3, 4), p1=(3, 4),
                                                     p2=(2, 3), p3=(2, 3)).items()}
    loc.update(i0=[[3, 0], [3, 1]], i1=[1, 1, 5, -2], i2=[5, -1, 2], ip0=[3, 0, 3], ip1=[1, 2, 0, 1],
               ip2=[4], ip3=[[0], [2]], oh=[1.3, 0.2])
    oh = V("oh")     # one variable: two of one name are refused at bind
    outs = [
        S.take(V("t0"), V("i0")),                              # repeated ids accumulate
        S.take(V("t1"), V("i1"), axis=1),                      # clip: 5 -> 3, -2 -> 0
        S.take(V("t2"), V("i2"), axis=-1, mode="wrap"),        # wrap: 5 -> 1, -1 -> 3
        S.pick(V("p0"), V("ip0")), S.pick(V("p1"), V("ip1"), axis=0, keepdims=True),
        S.pick(V("p2"), V("ip2"), axis=None), S.pick(V("p3"), V("ip3"), axis=1, keepdims=True),
        S.broadcast_add(S.one_hot(oh, depth=3), S.expand_dims(oh, axis=1)),   # no gradient through one_hot's ids
    ]
    check(outs, loc, grad_nodes=["t0", "t1", "t2", "p0", "p1", "p2", "p3", "oh"])


@pytest.mark.parametrize("ctx", CONTEXTS)
def test_take_gradient_scatter_adds_duplicates(ctx):
    """The scatter-add lowering on each target (expected values from numpy's add.at)."""
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    idx = np.array([[4, 0], [4, 4]], np.float32)
    head = np.arange(12, dtype=np.float32).reshape(2, 2, 3) - 5
    ex = S.take(V("a"), V("i")).bind(ctx, args={"a": ax.nd.array(table, ctx=ctx), "i": ax.nd.array(idx, ctx=ctx)},
                                     args_grad={"a": ax.nd.zeros((5, 3), ctx=ctx)}, grad_req={"a": "write", "i": "null"})
    ex.forward(is_train=True)
    ex.backward(ax.nd.array(head, ctx=ctx))
    want = np.zeros((5, 3), np.float32)
    np.add.at(want, idx.astype(int).ravel(), head.reshape(4, 3))
    np.testing.assert_allclose(ex.grad_dict["a"].asnumpy(), want)
