"""Elementwise ops: unary math, binary (same shape), broadcast, scalar, clip,
Cast, where, add_n, zeros_like / ones_like, BlockGrad and identity.

Tables keep one line per op (MXNet 1.9.1 src/operator/tensor/elemwise_*).
``hint`` is MXNet's automatic-name prefix for the Python spelling.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

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
