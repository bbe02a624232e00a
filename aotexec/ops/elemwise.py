"""Elementwise math: unary, binary (same shape), broadcast and scalar ops, one row per op in
``ELEMWISE`` (MXNet 1.9.1 src/operator/tensor/elemwise_*, mshadow_op.h).

A row holds everything about its op: name and aliases, the lowering, what the gradient
reads and the rule computing it (or ``zero_grad``), and the facts passes ask of an op
(``inplace``, ``identity_outputs``, ``layout_agnostic``; ``backward=`` the same for its
``_backward_<op>``).  Adding an op is adding a row.  The binary functions (``Binary``) are
shared by the same-shape, broadcast and scalar forms.  Ops with parameters of their own or
special rules (copy, clip, Cast, where, add_n, fills) follow the table, declared one by one.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..base import AotexecError
from ..emitter import unbroadcast
from ..util import is_np_shape
from . import libm
from .registry import define, differentiable, lowers
from .rules import fixed_dtype, known, merge, same_dtype, same_shape, shape_str


# ---------------------------------------------------------------- math helpers
def _bool_op(b, name, p, q):
    """and / or / xor of two i1 tensors."""
    return b.op(f"stablehlo.{name}", [p, q], p.shape, "bool")


def _chlo(b, name, x):
    return libm.chlo(b, name, x)


def _math(b, name, x):
    return libm.unary(b, name, x)


def _nonzero(b, x):
    return b.compare(x, 0.0, "NE")


def _as(b, pred, like):
    """i1 -> 0/1 in ``like``'s dtype (MXNet comparisons keep the input dtype)."""
    return b.convert(pred, like.dtype)


def _mod(b, x, y):
    """MXNet/numpy mod: the result takes the divisor's sign; x mod 0 = 0."""
    r = libm.rem(b, x, y)
    fix = _bool_op(b, "and", _nonzero(b, r), _bool_op(b, "xor", b.compare(r, 0.0, "LT"), b.compare(y, 0.0, "LT")))
    r = b.select(fix, b.add(r, y), r)
    return b.select(b.compare(y, 0.0, "EQ"), b.full_like(x, 0.0), r)


def _gamma(b, x):
    # |Gamma| = exp(lgamma); negative for x < 0 with odd floor(x)
    g = b.exp(_chlo(b, "lgamma", x))
    fl = b.unary("floor", x)
    odd = b.compare(libm.rem(b, fl, 2.0), 0.0, "NE")
    neg = _bool_op(b, "and", b.compare(x, 0.0, "LT"), odd)
    return b.select(neg, b.neg(g), g)


def _trunc(b, x):
    return b.select(b.compare(x, 0.0, "LT"), b.unary("ceil", x), b.unary("floor", x))


def _hypot(b, x, y):
    return b.sqrt(b.add(b.mul(x, x), b.mul(y, y)))


def _sq(b, x):
    return b.mul(x, x)


def _mask(b, pred, g):
    """g where pred, else 0."""
    return b.select(pred, g, b.full_like(g, 0.0))


def _inv_sqrt_1m(b, x, sign: float):
    """1 / sqrt(sign * (x^2 - 1)): arcsin / arccos (sign -1), arccosh (+1)."""
    return b.rsqrt(b.mul(b.sub(b.mul(x, x), 1.0), sign))


# ---------------------------------------------------------------- binary functions
@dataclass(frozen=True)
class Binary:
    """z = f(x, y) and its gradient ``grad(b, g, x, y) -> (d lhs, d rhs)`` (g times dz/dx, dz/dy),
    shared by the same-shape, broadcast and scalar forms; ``grad`` None: zero gradient.  The
    inputs are read only by the ops whose gradient needs them (add / sub keep nothing alive),
    and ops needing z recompute it from x and y rather than keeping the output too (as MXNet)."""
    f: Callable
    grad: Callable | None = None
    reads_inputs: bool = True


ADD = Binary(lambda b, x, y: b.add(x, y), lambda b, g, x, y: (g, g), reads_inputs=False)
SUB = Binary(lambda b, x, y: b.sub(x, y), lambda b, g, x, y: (g, b.neg(g)), reads_inputs=False)
MUL = Binary(lambda b, x, y: b.mul(x, y), lambda b, g, x, y: (b.mul(g, y), b.mul(g, x)))
DIV = Binary(lambda b, x, y: b.div(x, y),
             lambda b, g, x, y: (b.div(g, y), b.neg(b.div(b.mul(g, b.div(x, y)), y))))
def _floor_div(b, x, y):
    """floor(x / y); integers: C's truncating division, as MXNet's mod_rgrad computes it in int."""
    q = b.div(x, y)
    return q if np.dtype(q.dtype).kind in "iu" else b.unary("floor", q)


MOD = Binary(_mod, lambda b, g, x, y: (g, b.neg(b.mul(g, _floor_div(b, x, y)))))
POWER = Binary(lambda b, x, y: b.pow(x, y),
               lambda b, g, x, y: (b.mul(g, b.mul(y, b.pow(x, b.sub(y, 1.0)))), b.mul(g, b.mul(b.pow(x, y), b.log(x)))))
MAXIMUM = Binary(lambda b, x, y: b.max(x, y),
                 lambda b, g, x, y: (_mask(b, b.compare(x, y, "GE"), g), _mask(b, b.compare(x, y, "LT"), g)))
MINIMUM = Binary(lambda b, x, y: b.min(x, y),
                 lambda b, g, x, y: (_mask(b, b.compare(x, y, "LE"), g), _mask(b, b.compare(x, y, "GT"), g)))
HYPOT = Binary(_hypot, lambda b, g, x, y: (b.mul(g, b.div(x, _hypot(b, x, y))), b.mul(g, b.div(y, _hypot(b, x, y)))))
# comparisons and logic: 0/1 in the operands' dtype, zero gradient
EQUAL = Binary(lambda b, x, y: _as(b, b.compare(x, y, "EQ"), x))
NOT_EQUAL = Binary(lambda b, x, y: _as(b, b.compare(x, y, "NE"), x))
GREATER = Binary(lambda b, x, y: _as(b, b.compare(x, y, "GT"), x))
GREATER_EQUAL = Binary(lambda b, x, y: _as(b, b.compare(x, y, "GE"), x))
LESSER = Binary(lambda b, x, y: _as(b, b.compare(x, y, "LT"), x))
LESSER_EQUAL = Binary(lambda b, x, y: _as(b, b.compare(x, y, "LE"), x))
LOGICAL_AND = Binary(lambda b, x, y: _as(b, _bool_op(b, "and", _nonzero(b, x), _nonzero(b, y)), x))
LOGICAL_OR = Binary(lambda b, x, y: _as(b, _bool_op(b, "or", _nonzero(b, x), _nonzero(b, y)), x))
LOGICAL_XOR = Binary(lambda b, x, y: _as(b, _bool_op(b, "xor", _nonzero(b, x), _nonzero(b, y)), x))


# ---------------------------------------------------------------- rows
@dataclass(frozen=True)
class Row:
    """One op: ``define`` keywords (inputs, params, shape / dtype rules, OpDef attributes such as
    ``inplace``), its lowering ``fn(ctx, params, *inputs)``, what its backward node reads and the
    rule ``fn(ctx, params, *reads)``, and the attributes of ``_backward_<name>``."""
    kind: str                        # unary / binary / broadcast / scalar
    name: str
    aliases: tuple[str, ...]
    declare: dict[str, Any]
    lower: Callable
    reads: tuple[str, ...]
    grad: Callable
    backward: dict[str, Any] = field(default_factory=dict)

    def register(self) -> None:
        # same-shape elementwise ops, forward and backward, compute in whatever layout their
        # operands are stored (passes.layout); broadcasts need the logical axes
        flat = {"layout_agnostic": self.kind != "broadcast"}
        op = define(self.name, *self.aliases, **(flat | self.declare))
        lowers(op)(self.lower)
        differentiable(op, self.reads, name=_mxnet_backward_name(self.name), **(flat | self.backward))(self.grad)


def _mxnet_backward_name(name: str) -> str:
    """MXNet names _mul_scalar's backward op _backward_mul_scalar, elemwise_add's _backward_add."""
    return "_backward_" + (name[1:] if name.startswith("_") else name.removeprefix("elemwise_"))


def _no_grad(n: int):
    return lambda ctx, p, *_: [None] * n


def unary(name: str, fn: Callable, reads: tuple[str, ...] = (), grad: Callable | None = None, *,
          zero_grad: bool = False, backward: dict | None = None, **attrs: Any) -> Row:
    """y = fn(b, x); the gradient reads ``reads`` besides ograd0 and is ``grad(b, g, *reads)``."""
    assert (grad is None) == zero_grad, name

    def rule(ctx, p, *vals):
        return [grad(ctx.b, *vals) if grad else None]
    return Row("unary", name, (), dict(infer_shape=same_shape, infer_type=same_dtype, zero_grad=zero_grad,
                                       listed_inputs=False, **attrs),
               lambda ctx, p, x: fn(ctx.b, x), ("ograd0",) + reads if grad else (), rule, backward or {})


def _binary_row(kind: str, name: str, fn: Binary, aliases: tuple[str, ...], shape_rule,
                backward: dict | None, attrs: dict) -> Row:
    bc = kind == "broadcast"
    if bc:
        def lower(ctx, p, x, y):
            shape = ctx.out_shapes[0]
            return fn.f(ctx.b, ctx.b.broadcast_to(x, shape), ctx.b.broadcast_to(y, shape))
    else:
        def lower(ctx, p, x, y):
            return fn.f(ctx.b, x, y)

    def grad(ctx, p, g, x=None, y=None):
        b = ctx.b
        if bc:
            xshape, yshape = (tuple(s) for s in ctx.fwd_in_shapes[:2])
            if x is not None:
                x, y = b.broadcast_to(x, g.shape), b.broadcast_to(y, g.shape)
            gx, gy = fn.grad(b, g, x, y)
            return [unbroadcast(b, gx, xshape), unbroadcast(b, gy, yshape)]
        return list(fn.grad(b, g, x, y))
    reads = () if fn.grad is None else ("ograd0", "in0", "in1") if fn.reads_inputs else ("ograd0",)
    return Row(kind, name, aliases, dict(inputs=["lhs", "rhs"], infer_shape=shape_rule, infer_type=same_dtype,
                                         zero_grad=fn.grad is None, **attrs),
               lower, reads, grad if fn.grad else _no_grad(2), backward or {})


def binary(name: str, fn: Binary, aliases: tuple[str, ...] = (), *, backward: dict | None = None,
           **attrs: Any) -> Row:
    """fn over two operands of one shape."""
    return _binary_row("binary", name, fn, aliases, same_shape, backward, attrs)


def _broadcast_shape(p, ins, outs):
    """MXNet's BinaryBroadcastShape: numpy rules per dim; a dim unknown on either side is
    unknown in the output."""
    a, b = ins
    if a is None or b is None:
        return ins, outs
    if a == b:
        return ins, [a]
    nd = max(len(a), len(b))
    a2, b2 = (1,) * (nd - len(a)) + tuple(a), (1,) * (nd - len(b)) + tuple(b)
    out = []
    for x, y in zip(a2, b2):
        if x >= 0 and y >= 0 and x != y and 1 not in (x, y):
            raise ValueError(f"operands could not be broadcast together with shapes {shape_str(a)} {shape_str(b)}")
        out.append(-1 if x < 0 or y < 0 else (y if x == 1 else x))
    return ins, [tuple(out)]


def broadcast(name: str, fn: Binary, aliases: tuple[str, ...] = (), **attrs: Any) -> Row:
    """fn over two operands broadcast to a common shape (numpy rules)."""
    return _binary_row("broadcast", name, fn, aliases, _broadcast_shape, None, attrs)


@dataclass(frozen=True)
class ScalarParam:
    scalar: float = 1.0
    is_int: bool = True


def scalar(name: str, alias: str, fn: Binary, reads: tuple[str, ...] = (), grad: Callable | None = None, *,
           reverse: bool = False, zero_grad: bool = False, backward: dict | None = None, **attrs: Any) -> Row:
    """fn(x, scalar), or fn(scalar, x) when ``reverse``; the gradient reads ``reads`` besides ograd0
    and is ``grad(b, g, *reads, scalar)``.  ``alias``: the Python name whose lowercase is the hint."""
    assert (grad is None) == zero_grad, name

    def lower(ctx, p, x):
        c = ctx.b.full_like(x, p.scalar)
        return fn.f(ctx.b, c, x) if reverse else fn.f(ctx.b, x, c)

    def rule(ctx, p, *vals):
        return [grad(ctx.b, *vals, float(p.scalar)) if grad else None]
    return Row("scalar", name, (alias,), dict(params=ScalarParam, infer_shape=same_shape, infer_type=same_dtype,
                                              zero_grad=zero_grad, listed_inputs=False, **attrs),
               lower, ("ograd0",) + reads if grad else (), rule, backward or {})


ELEMWISE: tuple[Row, ...] = (
    # --- unary: y = f(x); the gradient g * dy/dx, from the input x or the output y as MXNet reads them
    unary("relu", lambda b, x: b.max(x, 0.0), ("out0",), lambda b, g, y: _mask(b, b.compare(y, 0.0, "GT"), g),
          inplace=True, backward=dict(inplace=True)),
    unary("sigmoid", lambda b, x: b.logistic(x), ("out0",), lambda b, g, y: b.mul(g, b.mul(y, b.sub(1.0, y))),
          inplace=True),
    unary("tanh", lambda b, x: libm.tanh(b, x), ("out0",), lambda b, g, y: b.mul(g, b.sub(1.0, b.mul(y, y))),
          inplace=True),
    unary("softsign", lambda b, x: b.div(x, b.add(b.abs(x), 1.0)),
          ("in0",), lambda b, g, x: b.div(g, _sq(b, b.add(b.abs(x), 1.0)))),
    unary("exp", lambda b, x: b.exp(x), ("out0",), lambda b, g, y: b.mul(g, y), inplace=True),
    unary("log", lambda b, x: b.log(x), ("in0",), lambda b, g, x: b.div(g, x), inplace=True),
    unary("log2", lambda b, x: b.mul(b.log(x), 1.0 / math.log(2.0)),
          ("in0",), lambda b, g, x: b.div(g, b.mul(x, math.log(2.0)))),
    unary("log10", lambda b, x: b.mul(b.log(x), 1.0 / math.log(10.0)),
          ("in0",), lambda b, g, x: b.div(g, b.mul(x, math.log(10.0)))),
    unary("log1p", lambda b, x: b.unary("log_plus_one", x), ("in0",), lambda b, g, x: b.div(g, b.add(x, 1.0))),
    unary("expm1", lambda b, x: b.unary("exponential_minus_one", x), ("in0",), lambda b, g, x: b.mul(g, b.exp(x))),
    unary("sqrt", lambda b, x: b.sqrt(x), ("out0",), lambda b, g, y: b.div(b.mul(g, 0.5), y), inplace=True),
    unary("rsqrt", lambda b, x: b.rsqrt(x), ("in0",), lambda b, g, x: b.mul(g, b.div(-0.5, b.mul(b.sqrt(x), x)))),
    unary("cbrt", lambda b, x: _math(b, "cbrt", x), ("out0",), lambda b, g, y: b.div(g, b.mul(_sq(b, y), 3.0))),
    unary("rcbrt", lambda b, x: b.div(1.0, _math(b, "cbrt", x)), ("in0",),
          lambda b, g, x: b.div(g, b.mul(_sq(b, _sq(b, _math(b, "cbrt", x))), -3.0))),
    unary("square", lambda b, x: b.mul(x, x), ("in0",), lambda b, g, x: b.mul(g, b.mul(x, 2.0)), inplace=True),
    unary("abs", lambda b, x: b.abs(x), ("in0",), lambda b, g, x: b.mul(g, b.unary("sign", x)), inplace=True),
    unary("sign", lambda b, x: b.unary("sign", x), zero_grad=True),
    unary("sin", lambda b, x: _math(b, "sine", x), ("in0",), lambda b, g, x: b.mul(g, _math(b, "cosine", x))),
    unary("cos", lambda b, x: _math(b, "cosine", x), ("in0",), lambda b, g, x: b.mul(g, b.neg(_math(b, "sine", x)))),
    unary("tan", lambda b, x: _math(b, "tan", x), ("out0",), lambda b, g, y: b.mul(g, b.add(_sq(b, y), 1.0))),
    unary("arcsin", lambda b, x: _chlo(b, "asin", x), ("in0",), lambda b, g, x: b.mul(g, _inv_sqrt_1m(b, x, -1.0))),
    unary("arccos", lambda b, x: _chlo(b, "acos", x),
          ("in0",), lambda b, g, x: b.neg(b.mul(g, _inv_sqrt_1m(b, x, -1.0)))),
    unary("arctan", lambda b, x: _chlo(b, "atan", x), ("in0",), lambda b, g, x: b.div(g, b.add(_sq(b, x), 1.0))),
    unary("sinh", lambda b, x: _chlo(b, "sinh", x), ("in0",), lambda b, g, x: b.mul(g, _chlo(b, "cosh", x))),
    unary("cosh", lambda b, x: _chlo(b, "cosh", x), ("in0",), lambda b, g, x: b.mul(g, _chlo(b, "sinh", x))),
    unary("arcsinh", lambda b, x: _chlo(b, "asinh", x),
          ("in0",), lambda b, g, x: b.mul(g, b.rsqrt(b.add(_sq(b, x), 1.0)))),
    unary("arccosh", lambda b, x: _chlo(b, "acosh", x), ("in0",), lambda b, g, x: b.mul(g, _inv_sqrt_1m(b, x, 1.0))),
    unary("arctanh", lambda b, x: _chlo(b, "atanh", x), ("in0",), lambda b, g, x: b.div(g, b.sub(1.0, _sq(b, x)))),
    unary("negative", lambda b, x: b.neg(x), (), lambda b, g: b.neg(g), inplace=True),
    unary("reciprocal", lambda b, x: b.div(1.0, x), ("in0",), lambda b, g, x: b.neg(b.div(g, _sq(b, x)))),
    unary("floor", lambda b, x: b.unary("floor", x), zero_grad=True),
    unary("ceil", lambda b, x: b.unary("ceil", x), zero_grad=True),
    unary("round", lambda b, x: b.unary("round_nearest_afz", x), zero_grad=True),
    unary("rint", lambda b, x: b.unary("round_nearest_even", x), zero_grad=True),
    unary("trunc", _trunc, zero_grad=True),
    unary("fix", _trunc, zero_grad=True),
    unary("erf", lambda b, x: _chlo(b, "erf", x),
          ("in0",), lambda b, g, x: b.mul(g, b.mul(b.exp(b.neg(_sq(b, x))), 2.0 / math.sqrt(math.pi)))),
    unary("gamma", _gamma, ("in0", "out0"), lambda b, g, x, y: b.mul(g, b.mul(y, _chlo(b, "digamma", x)))),
    unary("gammaln", lambda b, x: _chlo(b, "lgamma", x), ("in0",), lambda b, g, x: b.mul(g, _chlo(b, "digamma", x))),
    unary("degrees", lambda b, x: b.mul(x, 180.0 / math.pi), (), lambda b, g: b.mul(g, 180.0 / math.pi)),
    unary("radians", lambda b, x: b.mul(x, math.pi / 180.0), (), lambda b, g: b.mul(g, math.pi / 180.0)),
    unary("logical_not", lambda b, x: _as(b, b.compare(x, 0.0, "EQ"), x), zero_grad=True),
    # --- binary, same shape
    binary("elemwise_add", ADD, ("_Plus", "_add", "_plus"), inplace=True, clone_gradient=True,
           backward=dict(identity_outputs=(0, 1))),
    binary("elemwise_sub", SUB, ("_Minus", "_sub", "_minus"), inplace=True),
    binary("elemwise_mul", MUL, ("_Mul", "_mul"), inplace=True),
    binary("elemwise_div", DIV, ("_Div", "_div")),
    binary("_mod", MOD, ("_Mod",)),
    binary("_power", POWER, ("_Power",)),
    binary("_maximum", MAXIMUM, ("_Maximum",)),
    binary("_minimum", MINIMUM, ("_Minimum",)),
    binary("_hypot", HYPOT, ("_Hypot",)),
    binary("_equal", EQUAL, ("_Equal",)),
    binary("_not_equal", NOT_EQUAL, ("_Not_Equal",)),
    binary("_greater", GREATER, ("_Greater",)),
    binary("_greater_equal", GREATER_EQUAL, ("_Greater_Equal",)),
    binary("_lesser", LESSER, ("_Lesser",)),
    binary("_lesser_equal", LESSER_EQUAL, ("_Lesser_Equal",)),
    binary("_logical_and", LOGICAL_AND, ("_Logical_And",)),
    binary("_logical_or", LOGICAL_OR, ("_Logical_Or",)),
    binary("_logical_xor", LOGICAL_XOR, ("_Logical_Xor",)),
    # --- broadcast
    broadcast("broadcast_add", ADD, ("broadcast_plus",)),
    broadcast("broadcast_sub", SUB, ("broadcast_minus",)),
    broadcast("broadcast_mul", MUL),
    broadcast("broadcast_div", DIV),
    broadcast("broadcast_mod", MOD),
    broadcast("broadcast_power", POWER),
    broadcast("broadcast_maximum", MAXIMUM),
    broadcast("broadcast_minimum", MINIMUM),
    broadcast("broadcast_hypot", HYPOT),
    broadcast("broadcast_equal", EQUAL),
    broadcast("broadcast_not_equal", NOT_EQUAL),
    broadcast("broadcast_greater", GREATER),
    broadcast("broadcast_greater_equal", GREATER_EQUAL),
    broadcast("broadcast_lesser", LESSER),
    broadcast("broadcast_lesser_equal", LESSER_EQUAL),
    broadcast("broadcast_logical_and", LOGICAL_AND),
    broadcast("broadcast_logical_or", LOGICAL_OR),
    broadcast("broadcast_logical_xor", LOGICAL_XOR),
    # --- scalar: the gradient g * d/dx of fn(x, s) (of fn(s, x) when reverse)
    scalar("_plus_scalar", "_PlusScalar", ADD, (), lambda b, g, s: g, inplace=True),
    scalar("_minus_scalar", "_MinusScalar", SUB, (), lambda b, g, s: g, inplace=True),
    scalar("_rminus_scalar", "_RMinusScalar", SUB, (), lambda b, g, s: b.neg(g), reverse=True, inplace=True),
    scalar("_mul_scalar", "_MulScalar", MUL, (), lambda b, g, s: b.mul(g, s), inplace=True),
    scalar("_div_scalar", "_DivScalar", DIV, (), lambda b, g, s: b.div(g, s), inplace=True),
    scalar("_rdiv_scalar", "_RDivScalar", DIV, ("in0",), lambda b, g, x, s: b.mul(g, b.div(-s, _sq(b, x))),
           reverse=True, inplace=True),
    scalar("_mod_scalar", "_ModScalar", MOD, (), lambda b, g, s: g),
    scalar("_rmod_scalar", "_RModScalar", MOD, ("in0",),
           lambda b, g, x, s: b.neg(b.mul(g, _floor_div(b, b.full_like(x, s), x))), reverse=True),
    scalar("_power_scalar", "_PowerScalar", POWER, ("in0",), lambda b, g, x, s: b.mul(g, b.mul(b.pow(x, s - 1.0), s))),
    scalar("_rpower_scalar", "_RPowerScalar", POWER, ("out0",),
           lambda b, g, y, s: b.mul(g, b.mul(y, math.log(s) if s > 0 else math.nan)), reverse=True),
    scalar("_maximum_scalar", "_MaximumScalar", MAXIMUM, ("in0",),
           lambda b, g, x, s: _mask(b, b.compare(x, s, "GE"), g)),
    scalar("_minimum_scalar", "_MinimumScalar", MINIMUM, ("in0",),
           lambda b, g, x, s: _mask(b, b.compare(x, s, "LE"), g)),
    scalar("_hypot_scalar", "_HypotScalar", HYPOT, ("in0", "out0"), lambda b, g, x, y, s: b.mul(g, b.div(x, y))),
    scalar("_equal_scalar", "_EqualScalar", EQUAL, zero_grad=True),
    scalar("_not_equal_scalar", "_NotEqualScalar", NOT_EQUAL, zero_grad=True),
    scalar("_greater_scalar", "_GreaterScalar", GREATER, zero_grad=True),
    scalar("_greater_equal_scalar", "_GreaterEqualScalar", GREATER_EQUAL, zero_grad=True),
    scalar("_lesser_scalar", "_LesserScalar", LESSER, zero_grad=True),
    scalar("_lesser_equal_scalar", "_LesserEqualScalar", LESSER_EQUAL, zero_grad=True),
    scalar("_logical_and_scalar", "_LogicalAndScalar", LOGICAL_AND, zero_grad=True),
    scalar("_logical_or_scalar", "_LogicalOrScalar", LOGICAL_OR, zero_grad=True),
    scalar("_logical_xor_scalar", "_LogicalXorScalar", LOGICAL_XOR, zero_grad=True),
)
for _row in ELEMWISE:
    _row.register()
# the unary math and scalar ops by name (tests sweep them)
UNARY = tuple(r.name for r in ELEMWISE if r.kind == "unary")
SCALAR = tuple(r.name for r in ELEMWISE if r.kind == "scalar")


# ---------------------------------------------------------------- ops declared one by one
def _identity_lower(ctx, p, x):
    return x


copy = define("_copy", "_Copy", "identity", infer_shape=same_shape, infer_type=same_dtype, listed_inputs=False,
              inplace=True, identity_outputs=(0,), layout_agnostic=True)
lowers(copy)(_identity_lower)


@differentiable(copy, ("ograd0",), layout_agnostic=True)
def _copy_grad(ctx, p, g):
    return [g]


block_grad = define("BlockGrad", "stop_gradient", infer_shape=same_shape, infer_type=same_dtype, listed_inputs=False,
                    inplace=True, identity_outputs=(0,), zero_grad=True, layout_agnostic=True)
lowers(block_grad)(_identity_lower)
differentiable(block_grad, ())(_no_grad(1))


@dataclass(frozen=True)
class ClipParam:
    a_min: float
    a_max: float


clip = define("clip", params=ClipParam, infer_shape=same_shape, infer_type=same_dtype, inplace=True,
              listed_inputs=False, layout_agnostic=True)


@lowers(clip)
def _clip_lower(ctx, p: ClipParam, x):
    return ctx.b.clamp(p.a_min, x, p.a_max)


@differentiable(clip, ("ograd0", "in0"), layout_agnostic=True)
def _clip_grad(ctx, p: ClipParam, g, x):
    """MXNet clip_grad: passes where a_min <= x <= a_max (bounds inclusive)."""
    b = ctx.b
    inside = _bool_op(b, "and", b.compare(x, p.a_min, "GE"), b.compare(x, p.a_max, "LE"))
    return [_mask(b, inside, g)]


@dataclass(frozen=True)
class CastParam:
    dtype: str

    def check(self):
        np.dtype(self.dtype)


cast = define("Cast", "cast", params=CastParam, infer_shape=same_shape, infer_type=fixed_dtype(lambda p: p.dtype),
              listed_inputs=False)


@lowers(cast)
def _cast_lower(ctx, p: CastParam, x):
    return ctx.b.convert(x, p.dtype)


@differentiable(cast, ("ograd0",), name="_backward_cast")
def _cast_grad(ctx, p, g):
    return [ctx.b.convert(g, ctx.fwd_in_dtypes[0])]


def _amp_cast_type(p: CastParam, ins, outs):
    """amp_cast (src/operator/tensor/amp_cast.cc) converts floating types only; others pass."""
    t = ins[0]
    if t is None:
        return ins, outs
    return ins, [np.dtype(p.dtype) if np.dtype(t).kind == "f" else t]


amp_cast = define("amp_cast", params=CastParam, infer_shape=same_shape, infer_type=_amp_cast_type,
                  listed_inputs=False)


@lowers(amp_cast)
def _amp_cast_lower(ctx, p: CastParam, x):
    return ctx.b.convert(x, ctx.out_dtypes[0])


differentiable(amp_cast, ("ograd0",), name="_backward_amp_cast")(_cast_grad)


@dataclass(frozen=True)
class AddNParam:
    num_args: int


add_n = define("add_n", "ElementWiseSum", params=AddNParam, variadic="num_args",
               infer_shape=same_shape, infer_type=same_dtype, layout_agnostic=True)


@lowers(add_n)
def _add_n_lower(ctx, p, *xs):
    out = xs[0]
    for x in xs[1:]:
        out = ctx.b.add(out, x)
    return out


@differentiable(add_n, lambda p: ["ograd0"], layout_agnostic=True)
def _add_n_grad(ctx, p, g):
    return [g] * p.num_args


def _where_shape(p, ins, outs):
    """MXNet's WhereOpShape: nothing until the condition's shape is complete; then x, y and the
    output agree (silently undecided if they contradict), and a same-rank condition with them."""
    cond, x, y = ins
    if not known(cond):
        return ins, outs
    try:
        s = merge(merge(x, y), outs[0])
    except ValueError:
        return ins, outs
    if s is not None and len(cond) == len(s):
        s = cond = merge(s, cond)
    elif s is not None and len(cond) == 1 and s[0] >= 0 and cond[0] != s[0]:
        raise ValueError(f"where: a 1-D condition of size {cond[0]} needs x and y of {cond[0]} rows, "
                         f"got {shape_str(s)}")
    return [cond, s, s], [s]


def _where_type(p, ins, outs):
    t = next((v for v in (ins[1], ins[2], outs[0]) if v is not None), None)
    if t is None:
        return ins, outs
    return [ins[0] if ins[0] is not None else t, t, t], [t]


where = define("where", inputs=["condition", "x", "y"], no_grad_inputs=("condition",),
               infer_shape=_where_shape, infer_type=_where_type)


@lowers(where)
def _where_lower(ctx, p, cond, x, y):
    b = ctx.b
    pred = _nonzero(b, cond)
    if pred.shape != x.shape:  # 1-D cond picks whole rows (MXNet allows cond of shape (x.shape[0],))
        if pred.shape != x.shape[:1]:
            raise AotexecError(f"where: condition shape {cond.shape} must equal {x.shape} or ({x.shape[0]},)")
        pred = b.broadcast_in_dim(pred, x.shape, [0])
    return b.select(pred, x, y)


@differentiable(where, ("ograd0", "in0"))
def _where_grad(ctx, p, g, cond):
    """x gets g where condition != 0, y where it is 0; the condition gets none."""
    b = ctx.b
    pred = _nonzero(b, cond)
    if pred.shape != g.shape:  # 1-D condition selecting rows
        pred = b.broadcast_in_dim(pred, g.shape, [0])
    zero = b.full_like(g, 0.0)
    return [None, b.select(pred, g, zero), b.select(pred, zero, g)]


# --- fills: constants shaped like the input, or by a shape parameter; zero gradients
def _fill_like(value: float):
    return lambda ctx, p, x: ctx.b.full_like(x, value)


# zeros_like reads its input for the shape only (the zero gradients the gradient pass adds)
zeros_like = define("zeros_like", infer_shape=same_shape, infer_type=same_dtype, zero_grad=True, listed_inputs=False,
                    shape_only_inputs=(0,))
lowers(zeros_like)(_fill_like(0.0))
differentiable(zeros_like, ())(_no_grad(1))
ones_like = define("ones_like", infer_shape=same_shape, infer_type=same_dtype, zero_grad=True, listed_inputs=False)
lowers(ones_like)(_fill_like(1.0))
differentiable(ones_like, ())(_no_grad(1))


@dataclass(frozen=True)
class InitParam:
    shape: tuple[int, ...] = ()
    ctx: str = ""
    dtype: str = "float32"


def _init_shape(p, ins, outs):
    """MXNet's InitShape: outside numpy-shape mode 0 dims, and an empty shape, are unknown,
    to be inferred from the op's partners (``x + ones(shape=(0, 0))``; Gluon's begin_state(0)
    leaves the batch to the consumer)."""
    shape = tuple(p.shape)
    if is_np_shape():
        shape = tuple(-1 if d < 0 else d for d in shape)
    else:
        shape = tuple(-1 if d <= 0 else d for d in shape) if shape else None
    return ins, [shape]


def _fill(value: float):
    def rule(ctx, p: InitParam, *_):
        b, shape, dtype = ctx.b, ctx.out_shapes[0], ctx.out_dtypes[0]
        c = b.constant(value, (), dtype)
        return b.broadcast_in_dim(c, shape, ()) if shape else c
    return rule


zeros = define("_zeros", "zeros", params=InitParam, inputs=[], infer_shape=_init_shape,
               infer_type=fixed_dtype(lambda p: p.dtype), zero_grad=True)
lowers(zeros)(_fill(0.0))
ones = define("_ones", "ones", params=InitParam, inputs=[], infer_shape=_init_shape,
              infer_type=fixed_dtype(lambda p: p.dtype), zero_grad=True)
lowers(ones)(_fill(1.0))
