"""Elementwise ops: unary math, binary (same shape), broadcast, scalar, clip,
Cast, where, add_n, zeros_like / ones_like, BlockGrad and identity.

Tables keep one line per op (MXNet 1.9.1 src/operator/tensor/elemwise_*).
``hint`` is MXNet's automatic-name prefix for the Python spelling.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .registry import alias, define
from .rules import fixed_dtype, merge, same_dtype, same_shape

# name -> extra Python aliases
UNARY: dict[str, tuple[str, ...]] = {
    "relu": (), "sigmoid": (), "tanh": (), "softsign": (), "exp": (), "log": (), "log2": (),
    "log10": (), "log1p": (), "expm1": (), "sqrt": (), "rsqrt": (), "cbrt": (), "square": (),
    "abs": (), "sign": (), "sin": (), "cos": (), "tan": (), "arcsin": (), "arccos": (),
    "arctan": (), "sinh": (), "cosh": (), "arcsinh": (), "arccosh": (), "arctanh": (),
    "negative": (), "reciprocal": (), "floor": (), "ceil": (), "round": (), "rint": (),
    "trunc": (), "fix": (), "erf": (), "gamma": (), "gammaln": (), "degrees": (), "radians": (),
    "logical_not": (),
}
for _name, _aliases in UNARY.items():
    define(_name, *_aliases, infer_shape=same_shape, infer_type=same_dtype)

define("_copy", "_Copy", infer_shape=same_shape, infer_type=same_dtype)
alias("identity", "_copy")
define("BlockGrad", infer_shape=same_shape, infer_type=same_dtype)
alias("stop_gradient", "BlockGrad")
define("zeros_like", infer_shape=same_shape, infer_type=same_dtype)
define("ones_like", infer_shape=same_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class ClipParam:
    a_min: float
    a_max: float


define("clip", params=ClipParam, infer_shape=same_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class CastParam:
    dtype: str

    def check(self):
        np.dtype(self.dtype)


define("Cast", params=CastParam, infer_shape=same_shape, infer_type=fixed_dtype(lambda p: p.dtype))
alias("cast", "Cast")

# --- binary, same shape: name -> (hinted Python alias, hint) ---
BINARY = {
    "elemwise_add": ("_Plus", "_plus"), "elemwise_sub": ("_Minus", "_minus"),
    "elemwise_mul": ("_Mul", "_mul"), "elemwise_div": ("_Div", "_div"),
    "_mod": ("_Mod", "_mod"), "_power": ("_Power", "_power"),
    "_maximum": ("_Maximum", "_maximum"), "_minimum": ("_Minimum", "_minimum"),
    "_hypot": ("_Hypot", "_hypot"),
    "_equal": ("_Equal", "_equal"), "_not_equal": ("_Not_Equal", "_not_equal"),
    "_greater": ("_Greater", "_greater"), "_greater_equal": ("_Greater_Equal", "_greater_equal"),
    "_lesser": ("_Lesser", "_lesser"), "_lesser_equal": ("_Lesser_Equal", "_lesser_equal"),
    "_logical_and": ("_Logical_And", "_logical_and"), "_logical_or": ("_Logical_Or", "_logical_or"),
}
for _name, (_alias, _hint) in BINARY.items():
    define(_name, inputs=["lhs", "rhs"], infer_shape=same_shape, infer_type=same_dtype)
    alias(_alias, _name)
alias("_add", "elemwise_add")
alias("_sub", "elemwise_sub")
alias("_plus", "elemwise_add")
alias("_minus", "elemwise_sub")
alias("_mul", "elemwise_mul")
alias("_div", "elemwise_div")


def _broadcast_shape(p, ins, outs):
    a, b = ins
    if a is None or b is None or any(d < 0 for d in a + b):
        return ins, outs
    nd = max(len(a), len(b))
    a2, b2 = (1,) * (nd - len(a)) + tuple(a), (1,) * (nd - len(b)) + tuple(b)
    out = []
    for x, y in zip(a2, b2):
        if x != y and 1 not in (x, y):
            raise ValueError(f"operands could not be broadcast together with shapes {a} {b}")
        out.append(max(x, y) if 1 in (x, y) else x)
    return ins, [merge(outs[0], tuple(out))]


BROADCAST = {
    "broadcast_add": ("broadcast_plus",), "broadcast_sub": ("broadcast_minus",),
    "broadcast_mul": (), "broadcast_div": (), "broadcast_mod": (), "broadcast_power": (),
    "broadcast_maximum": (), "broadcast_minimum": (), "broadcast_hypot": (),
    "broadcast_equal": (), "broadcast_not_equal": (), "broadcast_greater": (),
    "broadcast_greater_equal": (), "broadcast_lesser": (), "broadcast_lesser_equal": (),
    "broadcast_logical_and": (), "broadcast_logical_or": (),
}
for _name, _aliases in BROADCAST.items():
    define(_name, *_aliases, inputs=["lhs", "rhs"], infer_shape=_broadcast_shape, infer_type=same_dtype)


@dataclass(frozen=True)
class ScalarParam:
    scalar: float = 1.0
    is_int: bool = True


# scalar op -> (Python alias whose lowercase is the name hint)
SCALAR = {
    "_plus_scalar": "_PlusScalar", "_minus_scalar": "_MinusScalar", "_rminus_scalar": "_RMinusScalar",
    "_mul_scalar": "_MulScalar", "_div_scalar": "_DivScalar", "_rdiv_scalar": "_RDivScalar",
    "_mod_scalar": "_ModScalar", "_rmod_scalar": "_RModScalar",
    "_power_scalar": "_PowerScalar", "_rpower_scalar": "_RPowerScalar",
    "_maximum_scalar": "_MaximumScalar", "_minimum_scalar": "_MinimumScalar",
    "_hypot_scalar": "_HypotScalar",
    "_equal_scalar": "_EqualScalar", "_not_equal_scalar": "_NotEqualScalar",
    "_greater_scalar": "_GreaterScalar", "_greater_equal_scalar": "_GreaterEqualScalar",
    "_lesser_scalar": "_LesserScalar", "_lesser_equal_scalar": "_LesserEqualScalar",
    "_logical_and_scalar": "_LogicalAndScalar", "_logical_or_scalar": "_LogicalOrScalar",
}
for _name, _alias in SCALAR.items():
    define(_name, params=ScalarParam, infer_shape=same_shape, infer_type=same_dtype)
    alias(_alias, _name)


@dataclass(frozen=True)
class AddNParam:
    num_args: int


define("add_n", "ElementWiseSum", params=AddNParam, variadic="num_args",
       infer_shape=same_shape, infer_type=same_dtype)


def _where_shape(p, ins, outs):
    cond, x, y = ins
    s = merge(merge(merge(x, y), outs[0]), None)
    if cond is not None and s is not None and len(cond) == len(s):
        s = merge(s, cond)
        cond = s
    return [cond, s, s], [s]


def _where_type(p, ins, outs):
    t = next((v for v in (ins[1], ins[2], outs[0]) if v is not None), None)
    if t is None:
        return ins, outs
    return [ins[0] if ins[0] is not None else t, t, t], [t]


define("where", inputs=["condition", "x", "y"], no_grad_inputs=("condition",),
       infer_shape=_where_shape, infer_type=_where_type)


@dataclass(frozen=True)
class InitParam:
    shape: tuple[int, ...] = ()
    ctx: str = ""
    dtype: str = "float32"


def _init_shape(p, ins, outs):
    return ins, [tuple(p.shape)]


define("_zeros", params=InitParam, inputs=[], infer_shape=_init_shape,
       infer_type=fixed_dtype(lambda p: p.dtype))
define("_ones", params=InitParam, inputs=[], infer_shape=_init_shape,
       infer_type=fixed_dtype(lambda p: p.dtype))
alias("zeros", "_zeros")
alias("ones", "_ones")


# ---------------------------------------------------------------- lowering rules
import math  # noqa: E402

from ..base import AotexecError  # noqa: E402
from .registry import OPS, lowers  # noqa: E402


def _bool_op(b, name, p, q):
    """and / or / xor of two i1 tensors."""
    return b.op(f"stablehlo.{name}", [p, q], p.shape, "bool")


def _chlo(b, name, x):
    """CHLO math (asin, erf, lgamma...): IREE's input pipeline legalizes it on every target."""
    return b.op(f"chlo.{name}", [x], x.shape, x.dtype)


def _nonzero(b, x):
    return b.compare(x, 0.0, "NE")


def _as(b, pred, like):
    """i1 -> 0/1 in ``like``'s dtype (MXNet comparisons keep the input dtype)."""
    return b.convert(pred, like.dtype)


def _mod(b, x, y):
    """MXNet/numpy mod: the result takes the divisor's sign; x mod 0 = 0."""
    r = b.rem(x, y)
    fix = _bool_op(b, "and", _nonzero(b, r), _bool_op(b, "xor", b.compare(r, 0.0, "LT"), b.compare(y, 0.0, "LT")))
    r = b.select(fix, b.add(r, y), r)
    return b.select(b.compare(y, 0.0, "EQ"), b.full_like(x, 0.0), r)


def _gamma(b, x):
    # |Gamma| = exp(lgamma); negative for x < 0 with odd floor(x)
    g = b.exp(_chlo(b, "lgamma", x))
    fl = b.unary("floor", x)
    odd = b.compare(b.rem(fl, 2.0), 0.0, "NE")
    neg = _bool_op(b, "and", b.compare(x, 0.0, "LT"), odd)
    return b.select(neg, b.neg(g), g)


def _trunc(b, x):
    return b.select(b.compare(x, 0.0, "LT"), b.unary("ceil", x), b.unary("floor", x))


UNARY_LOWER = {
    "relu": lambda b, x: b.max(x, 0.0),
    "sigmoid": lambda b, x: b.logistic(x),
    "tanh": lambda b, x: b.tanh(x),
    "softsign": lambda b, x: b.div(x, b.add(b.abs(x), 1.0)),
    "exp": lambda b, x: b.exp(x),
    "log": lambda b, x: b.log(x),
    "log2": lambda b, x: b.mul(b.log(x), 1.0 / math.log(2.0)),
    "log10": lambda b, x: b.mul(b.log(x), 1.0 / math.log(10.0)),
    "log1p": lambda b, x: b.unary("log_plus_one", x),
    "expm1": lambda b, x: b.unary("exponential_minus_one", x),
    "sqrt": lambda b, x: b.sqrt(x),
    "rsqrt": lambda b, x: b.rsqrt(x),
    "cbrt": lambda b, x: b.unary("cbrt", x),
    "square": lambda b, x: b.mul(x, x),
    "abs": lambda b, x: b.abs(x),
    "sign": lambda b, x: b.unary("sign", x),
    "sin": lambda b, x: b.unary("sine", x),
    "cos": lambda b, x: b.unary("cosine", x),
    "tan": lambda b, x: b.unary("tan", x),
    "arcsin": lambda b, x: _chlo(b, "asin", x),
    "arccos": lambda b, x: _chlo(b, "acos", x),
    "arctan": lambda b, x: _chlo(b, "atan", x),
    "sinh": lambda b, x: _chlo(b, "sinh", x),
    "cosh": lambda b, x: _chlo(b, "cosh", x),
    "arcsinh": lambda b, x: _chlo(b, "asinh", x),
    "arccosh": lambda b, x: _chlo(b, "acosh", x),
    "arctanh": lambda b, x: _chlo(b, "atanh", x),
    "negative": lambda b, x: b.neg(x),
    "reciprocal": lambda b, x: b.div(1.0, x),
    "floor": lambda b, x: b.unary("floor", x),
    "ceil": lambda b, x: b.unary("ceil", x),
    "round": lambda b, x: b.unary("round_nearest_afz", x),
    "rint": lambda b, x: b.unary("round_nearest_even", x),
    "trunc": _trunc,
    "fix": _trunc,
    "erf": lambda b, x: _chlo(b, "erf", x),
    "gamma": _gamma,
    "gammaln": lambda b, x: _chlo(b, "lgamma", x),
    "degrees": lambda b, x: b.mul(x, 180.0 / math.pi),
    "radians": lambda b, x: b.mul(x, math.pi / 180.0),
    "logical_not": lambda b, x: _as(b, b.compare(x, 0.0, "EQ"), x),
}
assert UNARY_LOWER.keys() == UNARY.keys()


def _unary_rule(fn):
    return lambda ctx, p, x: fn(ctx.b, x)


for _name, _fn in UNARY_LOWER.items():
    lowers(OPS[_name])(_unary_rule(_fn))

# short binary name -> fn(b, x, y); shared by the same-shape, broadcast and scalar forms
BINOPS = {
    "add": lambda b, x, y: b.add(x, y),
    "sub": lambda b, x, y: b.sub(x, y),
    "mul": lambda b, x, y: b.mul(x, y),
    "div": lambda b, x, y: b.div(x, y),
    "mod": _mod,
    "power": lambda b, x, y: b.pow(x, y),
    "maximum": lambda b, x, y: b.max(x, y),
    "minimum": lambda b, x, y: b.min(x, y),
    "hypot": lambda b, x, y: b.sqrt(b.add(b.mul(x, x), b.mul(y, y))),
    "equal": lambda b, x, y: _as(b, b.compare(x, y, "EQ"), x),
    "not_equal": lambda b, x, y: _as(b, b.compare(x, y, "NE"), x),
    "greater": lambda b, x, y: _as(b, b.compare(x, y, "GT"), x),
    "greater_equal": lambda b, x, y: _as(b, b.compare(x, y, "GE"), x),
    "lesser": lambda b, x, y: _as(b, b.compare(x, y, "LT"), x),
    "lesser_equal": lambda b, x, y: _as(b, b.compare(x, y, "LE"), x),
    "logical_and": lambda b, x, y: _as(b, _bool_op(b, "and", _nonzero(b, x), _nonzero(b, y)), x),
    "logical_or": lambda b, x, y: _as(b, _bool_op(b, "or", _nonzero(b, x), _nonzero(b, y)), x),
}
_SHORT = {"elemwise_add": "add", "elemwise_sub": "sub", "elemwise_mul": "mul", "elemwise_div": "div",
          "broadcast_add": "add", "broadcast_sub": "sub", "broadcast_mul": "mul", "broadcast_div": "div"}


def _short(name: str) -> str:
    return _SHORT.get(name) or name.removeprefix("broadcast_").strip("_")


def _binary_rule(fn):
    return lambda ctx, p, x, y: fn(ctx.b, x, y)


def _broadcast_rule(fn):
    def rule(ctx, p, x, y):
        shape = ctx.out_shapes[0]
        return fn(ctx.b, ctx.b.broadcast_to(x, shape), ctx.b.broadcast_to(y, shape))
    return rule


def _scalar_rule(fn, reverse: bool):
    def rule(ctx, p, x):
        c = ctx.b.full_like(x, p.scalar)
        return fn(ctx.b, c, x) if reverse else fn(ctx.b, x, c)
    return rule


for _name in BINARY:
    lowers(OPS[_name])(_binary_rule(BINOPS[_short(_name)]))
for _name in BROADCAST:
    lowers(OPS[_name])(_broadcast_rule(BINOPS[_short(_name)]))
for _name in SCALAR:
    _base = _name.removesuffix("_scalar").strip("_")
    _rev = _base.startswith("r") and _base[1:] in ("minus", "div", "mod", "power")
    _base = {"plus": "add", "minus": "sub"}.get(_base[1:] if _rev else _base, _base[1:] if _rev else _base)
    lowers(OPS[_name])(_scalar_rule(BINOPS[_base], _rev))


@lowers(OPS["_copy"], OPS["BlockGrad"])
def _identity_lower(ctx, p, x):
    return x


@lowers(OPS["zeros_like"])
def _zeros_like_lower(ctx, p, x):
    return ctx.b.full_like(x, 0.0)


@lowers(OPS["ones_like"])
def _ones_like_lower(ctx, p, x):
    return ctx.b.full_like(x, 1.0)


@lowers(OPS["clip"])
def _clip_lower(ctx, p: ClipParam, x):
    return ctx.b.clamp(p.a_min, x, p.a_max)


@lowers(OPS["Cast"])
def _cast_lower(ctx, p: CastParam, x):
    return ctx.b.convert(x, p.dtype)


@lowers(OPS["add_n"])
def _add_n_lower(ctx, p, *xs):
    out = xs[0]
    for x in xs[1:]:
        out = ctx.b.add(out, x)
    return out


@lowers(OPS["where"])
def _where_lower(ctx, p, cond, x, y):
    b = ctx.b
    pred = _nonzero(b, cond)
    if pred.shape != x.shape:  # 1-D cond picks whole rows (MXNet allows cond of shape (x.shape[0],))
        if pred.shape != x.shape[:1]:
            raise AotexecError(f"where: condition shape {cond.shape} must equal {x.shape} or ({x.shape[0]},)")
        pred = b.broadcast_in_dim(pred, x.shape, [0])
    return b.select(pred, x, y)


@lowers(OPS["_zeros"], OPS["_ones"])
def _init_lower(ctx, p: InitParam, *_):
    b, shape, dtype = ctx.b, ctx.out_shapes[0], ctx.out_dtypes[0]
    c = b.constant(1.0 if ctx.node.op.name == "_ones" else 0.0, (), dtype)
    return b.broadcast_in_dim(c, shape, ()) if shape else c


# ---------------------------------------------------------------- gradient rules
from ..emitter import unbroadcast  # noqa: E402
from .registry import differentiable  # noqa: E402

# d(out)/d(lhs), d(out)/d(rhs) times the head gradient ``g``, for z = f(x, y); the inputs
# are read only by the ops whose gradient needs them (add / sub keep nothing alive), and
# ops needing z recompute it from x and y rather than keeping the output too (as MXNet).
BINGRADS = {
    "add": lambda b, g, x, y: (g, g),
    "sub": lambda b, g, x, y: (g, b.neg(g)),
    "mul": lambda b, g, x, y: (b.mul(g, y), b.mul(g, x)),
    "div": lambda b, g, x, y: (b.div(g, y), b.neg(b.div(b.mul(g, b.div(x, y)), y))),
}
NO_INPUTS = {"add", "sub"}


def _binary_grad(fn, broadcast: bool):
    def rule(ctx, p, g, x=None, y=None):
        b = ctx.b
        if broadcast:
            xshape, yshape = (tuple(s) for s in ctx.fwd_in_shapes[:2])
            if x is not None:
                x, y = b.broadcast_to(x, g.shape), b.broadcast_to(y, g.shape)
            gx, gy = fn(b, g, x, y)
            return [unbroadcast(b, gx, xshape), unbroadcast(b, gy, yshape)]
        return list(fn(b, g, x, y))
    return rule


def _binary_reads(short: str) -> tuple[str, ...]:
    return ("ograd0",) if short in NO_INPUTS else ("ograd0", "in0", "in1")


for _name in BINARY:
    if _short(_name) in BINGRADS:
        differentiable(OPS[_name], _binary_reads(_short(_name)))(_binary_grad(BINGRADS[_short(_name)], False))
for _name in BROADCAST:
    if _short(_name) in BINGRADS:
        differentiable(OPS[_name], _binary_reads(_short(_name)))(_binary_grad(BINGRADS[_short(_name)], True))


@differentiable(OPS["ElementWiseSum"], lambda p: ["ograd0"])
def _add_n_grad(ctx, p, g):
    return [g] * p.num_args


@differentiable(OPS["_copy"], ("ograd0",))
def _copy_grad(ctx, p, g):
    return [g]


@differentiable(OPS["BlockGrad"], ())
def _block_grad_grad(ctx, p):
    return [None]


@differentiable(OPS["zeros_like"], ())
def _zeros_like_grad(ctx, p):
    return [None]


# ---- unary: op -> (forward values read, fn(b, g, *values) -> gradient); None: zero gradient.
# MXNet 1.9.1 mshadow_op.h *_grad (in terms of the input x or the output y, as MXNet reads them).
def _mask(b, pred, g):
    """g where pred, else 0."""
    return b.select(pred, g, b.full_like(g, 0.0))


def _inv_sqrt_1m(b, x, sign: float):
    """1 / sqrt(sign * (x^2 - 1)): arcsin / arccos (sign -1), arccosh (+1)."""
    return b.rsqrt(b.mul(b.sub(b.mul(x, x), 1.0), sign))


UNARY_GRADS = {
    "relu": (("out0",), lambda b, g, y: _mask(b, b.compare(y, 0.0, "GT"), g)),
    "sigmoid": (("out0",), lambda b, g, y: b.mul(g, b.mul(y, b.sub(1.0, y)))),
    "tanh": (("out0",), lambda b, g, y: b.mul(g, b.sub(1.0, b.mul(y, y)))),
    "softsign": (("in0",), lambda b, g, x: b.div(g, _sq(b, b.add(b.abs(x), 1.0)))),
    "exp": (("out0",), lambda b, g, y: b.mul(g, y)),
    "log": (("in0",), lambda b, g, x: b.div(g, x)),
    "log2": (("in0",), lambda b, g, x: b.div(g, b.mul(x, math.log(2.0)))),
    "log10": (("in0",), lambda b, g, x: b.div(g, b.mul(x, math.log(10.0)))),
    "log1p": (("in0",), lambda b, g, x: b.div(g, b.add(x, 1.0))),
    "expm1": (("in0",), lambda b, g, x: b.mul(g, b.exp(x))),
    "sqrt": (("out0",), lambda b, g, y: b.div(b.mul(g, 0.5), y)),
    "rsqrt": (("in0",), lambda b, g, x: b.mul(g, b.div(-0.5, b.mul(b.sqrt(x), x)))),
    "cbrt": (("out0",), lambda b, g, y: b.div(g, b.mul(_sq(b, y), 3.0))),
    "square": (("in0",), lambda b, g, x: b.mul(g, b.mul(x, 2.0))),
    "abs": (("in0",), lambda b, g, x: b.mul(g, b.unary("sign", x))),
    "sign": ((), None),
    "sin": (("in0",), lambda b, g, x: b.mul(g, b.unary("cosine", x))),
    "cos": (("in0",), lambda b, g, x: b.mul(g, b.neg(b.unary("sine", x)))),
    "tan": (("out0",), lambda b, g, y: b.mul(g, b.add(_sq(b, y), 1.0))),
    "arcsin": (("in0",), lambda b, g, x: b.mul(g, _inv_sqrt_1m(b, x, -1.0))),
    "arccos": (("in0",), lambda b, g, x: b.neg(b.mul(g, _inv_sqrt_1m(b, x, -1.0)))),
    "arctan": (("in0",), lambda b, g, x: b.div(g, b.add(_sq(b, x), 1.0))),
    "sinh": (("in0",), lambda b, g, x: b.mul(g, _chlo(b, "cosh", x))),
    "cosh": (("in0",), lambda b, g, x: b.mul(g, _chlo(b, "sinh", x))),
    "arcsinh": (("in0",), lambda b, g, x: b.mul(g, b.rsqrt(b.add(_sq(b, x), 1.0)))),
    "arccosh": (("in0",), lambda b, g, x: b.mul(g, _inv_sqrt_1m(b, x, 1.0))),
    "arctanh": (("in0",), lambda b, g, x: b.div(g, b.sub(1.0, _sq(b, x)))),
    "negative": ((), lambda b, g: b.neg(g)),
    "reciprocal": (("in0",), lambda b, g, x: b.neg(b.div(g, _sq(b, x)))),
    "floor": ((), None), "ceil": ((), None), "round": ((), None), "rint": ((), None),
    "trunc": ((), None), "fix": ((), None),
    "erf": (("in0",), lambda b, g, x: b.mul(g, b.mul(b.exp(b.neg(_sq(b, x))), 2.0 / math.sqrt(math.pi)))),
    "gamma": (("in0", "out0"), lambda b, g, x, y: b.mul(g, b.mul(y, _chlo(b, "digamma", x)))),
    "gammaln": (("in0",), lambda b, g, x: b.mul(g, _chlo(b, "digamma", x))),
    "degrees": ((), lambda b, g: b.mul(g, 180.0 / math.pi)),
    "radians": ((), lambda b, g: b.mul(g, math.pi / 180.0)),
    "logical_not": ((), None),
}
assert UNARY_GRADS.keys() == UNARY.keys()


def _sq(b, x):
    return b.mul(x, x)


def _unary_grad(fn):
    def rule(ctx, p, *vals):
        return [fn(ctx.b, *vals) if fn else None]
    return rule


for _name, (_reads, _fn) in UNARY_GRADS.items():
    differentiable(OPS[_name], ("ograd0",) + _reads if _fn else ())(_unary_grad(_fn))

# ---- binary (same shape and broadcast), continuing BINGRADS; zero-gradient ops read nothing
BINGRADS.update({
    "mod": lambda b, g, x, y: (g, b.neg(b.mul(g, b.unary("floor", b.div(x, y))))),
    "power": lambda b, g, x, y: (b.mul(g, b.mul(y, b.pow(x, b.sub(y, 1.0)))), b.mul(g, b.mul(b.pow(x, y), b.log(x)))),
    "maximum": lambda b, g, x, y: (_mask(b, b.compare(x, y, "GE"), g), _mask(b, b.compare(x, y, "LT"), g)),
    "minimum": lambda b, g, x, y: (_mask(b, b.compare(x, y, "LE"), g), _mask(b, b.compare(x, y, "GT"), g)),
    "hypot": lambda b, g, x, y: (b.mul(g, b.div(x, BINOPS["hypot"](b, x, y))), b.mul(g, b.div(y, BINOPS["hypot"](b, x, y)))),
})
ZERO_GRAD_BINOPS = {"equal", "not_equal", "greater", "greater_equal", "lesser", "lesser_equal",
                    "logical_and", "logical_or"}
assert BINGRADS.keys() | ZERO_GRAD_BINOPS == BINOPS.keys()


def _no_grad(n: int):
    return lambda ctx, p, *_: [None] * n


for _name, _bc in [(n, False) for n in BINARY] + [(n, True) for n in BROADCAST]:
    _s = _short(_name)
    if OPS[_name].grad_reads is not None:
        continue  # add / sub / mul / div above
    if _s in ZERO_GRAD_BINOPS:
        differentiable(OPS[_name], ())(_no_grad(2))
    else:
        differentiable(OPS[_name], _binary_reads(_s))(_binary_grad(BINGRADS[_s], _bc))

# ---- scalar ops: op -> (forward values read, fn(b, g, *values, s)); None: zero gradient
SCALAR_GRADS = {
    "_plus_scalar": ((), lambda b, g, s: g),
    "_minus_scalar": ((), lambda b, g, s: g),
    "_rminus_scalar": ((), lambda b, g, s: b.neg(g)),
    "_mul_scalar": ((), lambda b, g, s: b.mul(g, s)),
    "_div_scalar": ((), lambda b, g, s: b.div(g, s)),
    "_rdiv_scalar": (("in0",), lambda b, g, x, s: b.mul(g, b.div(-s, _sq(b, x)))),
    "_mod_scalar": ((), lambda b, g, s: g),
    "_rmod_scalar": (("in0",), lambda b, g, x, s: b.neg(b.mul(g, b.unary("floor", b.div(s, x))))),
    "_power_scalar": (("in0",), lambda b, g, x, s: b.mul(g, b.mul(b.pow(x, s - 1.0), s))),
    "_rpower_scalar": (("out0",), lambda b, g, y, s: b.mul(g, b.mul(y, math.log(s) if s > 0 else math.nan))),
    "_maximum_scalar": (("in0",), lambda b, g, x, s: _mask(b, b.compare(x, s, "GE"), g)),
    "_minimum_scalar": (("in0",), lambda b, g, x, s: _mask(b, b.compare(x, s, "LE"), g)),
    "_hypot_scalar": (("in0", "out0"), lambda b, g, x, y, s: b.mul(g, b.div(x, y))),
    "_equal_scalar": ((), None), "_not_equal_scalar": ((), None),
    "_greater_scalar": ((), None), "_greater_equal_scalar": ((), None),
    "_lesser_scalar": ((), None), "_lesser_equal_scalar": ((), None),
    "_logical_and_scalar": ((), None), "_logical_or_scalar": ((), None),
}
assert SCALAR_GRADS.keys() == SCALAR.keys()


def _scalar_grad(fn):
    def rule(ctx, p, *vals):
        return [fn(ctx.b, *vals, float(p.scalar)) if fn else None]
    return rule


for _name, (_reads, _fn) in SCALAR_GRADS.items():
    differentiable(OPS[_name], ("ograd0",) + _reads if _fn else ())(_scalar_grad(_fn))


@differentiable(OPS["clip"], ("ograd0", "in0"))
def _clip_grad(ctx, p: ClipParam, g, x):
    """MXNet clip_grad: passes where a_min <= x <= a_max (bounds inclusive)."""
    b = ctx.b
    inside = _bool_op(b, "and", b.compare(x, p.a_min, "GE"), b.compare(x, p.a_max, "LE"))
    return [_mask(b, inside, g)]


@differentiable(OPS["Cast"], ("ograd0",))
def _cast_grad(ctx, p, g):
    return [ctx.b.convert(g, ctx.fwd_in_dtypes[0])]


differentiable(OPS["ones_like"], ())(_no_grad(1))


@differentiable(OPS["where"], ("ograd0", "in0"))
def _where_grad(ctx, p, g, cond):
    """x gets g where condition != 0, y where it is 0; the condition gets none."""
    b = ctx.b
    pred = _nonzero(b, cond)
    if pred.shape != g.shape:  # 1-D condition selecting rows
        pred = b.broadcast_in_dim(pred, g.shape, [0])
    zero = b.full_like(g, 0.0)
    return [None, b.select(pred, g, zero), b.select(pred, zero, g)]
