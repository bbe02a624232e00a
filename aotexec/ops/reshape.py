"""Reshapes and axis permutations: Flatten, Reshape, expand_dims, squeeze, reshape_like,
transpose, SwapAxis (MXNet 1.9.1 src/operator/tensor/matrix_op*): parameters, shape rule,
lowering and gradient per op."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .params import Shape
from .registry import OpDef, define, differentiable, lowers
from .rules import dtype_of_first, forward, known, norm_axis, prod, rhs_shape, same_dtype


def _reshape_lower(ctx, p, x, *like):
    # the shape rule already resolved MXNet's special codes
    return ctx.b.reshape(x, ctx.out_shapes[0])


def _reshape_back(ctx, p, g):
    return [ctx.b.reshape(g, ctx.fwd_in_shapes[0])] + [None] * (len(ctx.fwd_in_shapes) - 1)  # reshape_like: rhs


def _reshaping(op: OpDef) -> OpDef:
    """An op that only changes the shape: lowered to a reshape, its gradient reshaped back."""
    lowers(op)(_reshape_lower)
    differentiable(op, ("ograd0",))(_reshape_back)
    return op


@forward
def _flatten_shape(p, data):
    return (data[0], prod(data[1:])) if data else (1, 1)


Flatten = _reshaping(define("Flatten", "flatten", infer_shape=_flatten_shape, infer_type=same_dtype,
                            inplace=True, identity_outputs=(0,)))


@dataclass(frozen=True)
class ReshapeParam:
    shape: Shape = ()
    reverse: bool = False
    target_shape: Shape = ()
    keep_highest: bool = False


def reshape_target(dshape: tuple[int, ...], spec: tuple[int, ...], reverse: bool = False) -> tuple[int, ...]:
    """MXNet's Reshape special codes 0, -1, -2, -3, -4 (matrix_op-inl.h, InferReshapeShape)."""
    if reverse:
        return tuple(reversed(reshape_target(tuple(reversed(dshape)), _reverse_spec(spec))))
    out: list[int] = []
    src, inf = 0, -1
    i = 0
    while i < len(spec):
        code = spec[i]
        if code == 0:
            out.append(dshape[src]); src += 1
        elif code == -1:
            if inf >= 0:
                raise ValueError("One and only one dim can be inferred")
            inf = len(out); out.append(1); src += 1
        elif code == -2:
            out.extend(dshape[src:]); src = len(dshape)
        elif code == -3:
            out.append(dshape[src] * dshape[src + 1]); src += 2
        elif code == -4:
            d0, d1, d2 = dshape[src], spec[i + 1], spec[i + 2]
            src += 1; i += 2
            if d1 == -1 and d2 == -1:
                raise ValueError("Split dims cannot both be -1.")
            d1 = d0 // d2 if d1 == -1 else d1
            d2 = d0 // d1 if d2 == -1 else d2
            if d1 * d2 != d0:
                raise ValueError(f"Split dims {d1}, {d2} do not divide original dim {d0}")
            out += [d1, d2]
        else:
            out.append(code); src += 1
        i += 1
    if inf >= 0:
        rest = prod(out)
        out[inf] = prod(dshape) // rest if rest else 0
    if prod(out) != prod(dshape):
        raise ValueError(f"Target shape size is different to source. Target: {tuple(out)}\nSource: {tuple(dshape)}")
    return tuple(out)


def _reverse_spec(spec: tuple[int, ...]) -> tuple[int, ...]:
    # -4 takes the two following values; keep those groups intact when reversing
    groups, i = [], 0
    while i < len(spec):
        if spec[i] == -4:
            groups.append((-4, spec[i + 2], spec[i + 1])); i += 3
        else:
            groups.append((spec[i],)); i += 1
    return tuple(v for g in reversed(groups) for v in ((g[0], g[1], g[2]) if g[0] == -4 else g))


def _reshape_shape(p: ReshapeParam, ins, outs):
    data = ins[0]
    if not known(data):
        return [_reverse_infer(data, outs[0])], outs
    spec = tuple(p.shape) if p.shape else tuple(p.target_shape)
    return ins, [reshape_target(tuple(data), spec, p.reverse)]


def _reverse_infer(data, out):
    """One unknown input dim from a known output (MXNet's ReverseReshapeInferShape: Gluon's
    i2h weight before its input size is known, reshaped to the flat RNN parameters)."""
    if data is None or not known(out) or sum(d < 0 for d in data) != 1:
        return data
    rest = prod(d for d in data if d >= 0)
    return tuple(prod(out) // rest if d < 0 else d for d in data) if rest and prod(out) % rest == 0 else data


Reshape = _reshaping(define("Reshape", "reshape", params=ReshapeParam, infer_shape=_reshape_shape,
                            infer_type=same_dtype, inplace=True, identity_outputs=(0,)))


@dataclass(frozen=True)
class ExpandDimsParam:
    axis: int


@forward
def _expand_dims_shape(p, data):
    ax = p.axis + len(data) + 1 if p.axis < 0 else p.axis
    return tuple(data[:ax]) + (1,) + tuple(data[ax:])


expand_dims = _reshaping(define("expand_dims", params=ExpandDimsParam, infer_shape=_expand_dims_shape,
                                infer_type=same_dtype, inplace=True, identity_outputs=(0,)))


@dataclass(frozen=True)
class SqueezeParam:
    axis: Optional[Shape] = None


@forward
def _squeeze_shape(p, data):
    if p.axis is None:
        out = tuple(d for d in data if d != 1)
    else:
        axes = {norm_axis(a, len(data)) for a in p.axis}
        for a in axes:
            if data[a] != 1:
                raise ValueError(f"cannot select an axis to squeeze out which has size={data[a]} not equal to one")
        out = tuple(d for i, d in enumerate(data) if i not in axes)
    return out or (1,)


squeeze = _reshaping(define("squeeze", params=SqueezeParam, infer_shape=_squeeze_shape, infer_type=same_dtype,
                            inplace=True, identity_outputs=(0,)))


reshape_like = _reshaping(define("reshape_like", inputs=["lhs", "rhs"], no_grad_inputs=("rhs",),
                                 infer_shape=rhs_shape, infer_type=dtype_of_first))


@dataclass(frozen=True)
class TransposeParam:
    axes: Shape = ()


@forward
def _transpose_shape(p, data):
    axes = p.axes or tuple(reversed(range(len(data))))
    if sorted(norm_axis(a, len(data)) for a in axes) != list(range(len(data))):
        raise ValueError(f"transpose axes {p.axes} are not a permutation of a {len(data)}-D input")
    return tuple(data[norm_axis(a, len(data))] for a in axes)


transpose = define("transpose", params=TransposeParam, infer_shape=_transpose_shape, infer_type=same_dtype)


@lowers(transpose)
def _transpose_lower(ctx, p: TransposeParam, x):
    perm = [norm_axis(a, x.ndim) for a in p.axes] if p.axes else list(reversed(range(x.ndim)))
    return ctx.b.transpose(x, perm)


def _inverse(perm):
    inv = [0] * len(perm)
    for i, a in enumerate(perm):
        inv[a] = i
    return inv


@differentiable(transpose, ("ograd0",))
def _transpose_grad(ctx, p: TransposeParam, g):
    perm = [norm_axis(a, g.ndim) for a in p.axes] if p.axes else list(reversed(range(g.ndim)))
    return [ctx.b.transpose(g, _inverse(perm))]


@dataclass(frozen=True)
class SwapAxisParam:
    dim1: int = 0
    dim2: int = 0


@forward
def _swapaxis_shape(p: SwapAxisParam, data):
    out = list(data)
    a, b = norm_axis(p.dim1, len(data)), norm_axis(p.dim2, len(data))
    out[a], out[b] = out[b], out[a]
    return tuple(out)


SwapAxis = define("SwapAxis", "swapaxes", params=SwapAxisParam, infer_shape=_swapaxis_shape, infer_type=same_dtype)


@lowers(SwapAxis)
def _swapaxis_lower(ctx, p: SwapAxisParam, x):
    perm = list(range(x.ndim))
    a, c = norm_axis(p.dim1, x.ndim), norm_axis(p.dim2, x.ndim)
    perm[a], perm[c] = perm[c], perm[a]
    return ctx.b.transpose(x, perm)


@differentiable(SwapAxis, ("ograd0",))
def _swapaxis_grad(ctx, p: SwapAxisParam, g):
    return [_swapaxis_lower(ctx, p, g)]  # a swap is its own inverse
