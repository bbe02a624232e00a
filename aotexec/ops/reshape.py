"""Reshapes and axis permutations: Flatten, Reshape, expand_dims, squeeze, reshape_like,
transpose, SwapAxis (MXNet 1.9.1 src/operator/tensor/matrix_op*): parameters, shape rule,
lowering and gradient per op."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from .params import Shape
from .registry import OpDef, define, differentiable, lowers
from .rules import dtype_of_first, forward, known, merge, norm_axis, prod, same_dtype, same_shape, shape_str


def _reshape_lower(ctx, p, x, *like):
    # the shape rule already resolved MXNet's special codes
    return ctx.b.reshape(x, ctx.out_shapes[0])


def _reshape_back(ctx, p, g):
    return [ctx.b.reshape(g, ctx.fwd_in_shapes[0])] + [None] * (len(ctx.fwd_in_shapes) - 1)  # reshape_like: rhs


def _reshaping(op: OpDef, backward: str | None = None) -> OpDef:
    """An op that only changes the shape: lowered to a reshape, its gradient reshaped back
    (``backward``: MXNet's name for that backward op)."""
    lowers(op)(_reshape_lower)
    differentiable(op, ("ograd0",), name=backward)(_reshape_back)
    return op


@forward
def _flatten_shape(p, data):
    return (data[0], prod(data[1:])) if data else (1, 1)


Flatten = _reshaping(define("Flatten", "flatten", infer_shape=_flatten_shape, infer_type=same_dtype,
                            inplace=True, identity_outputs=(0,), listed_inputs=False), "_backward_copy")


@dataclass(frozen=True)
class ReshapeParam:
    shape: Shape = ()
    reverse: bool = False
    target_shape: Shape = ()
    keep_highest: bool = False


def reshape_target(dshape: tuple[int, ...], spec: tuple[int, ...], reverse: bool = False) -> tuple[int, ...]:
    """MXNet's Reshape special codes 0, -1, -2, -3, -4 (matrix_op-inl.h, InferReshapeShape);
    unknown input dims (-1) give unknown output dims, as there."""
    if reverse:      # MXNet reverses both lists as they are (a -4 then follows its two values)
        return tuple(reversed(reshape_target(tuple(reversed(dshape)), tuple(reversed(spec)))))
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
            d1, d2 = dshape[src], dshape[src + 1]
            out.append(d1 * d2 if d1 >= 0 and d2 >= 0 else -1); src += 2
        elif code == -4:
            d0, d1, d2 = dshape[src], spec[i + 1], spec[i + 2]
            src += 1; i += 2
            if d1 == -1 and d2 == -1:
                raise ValueError("Split dims cannot both be -1.")
            d1 = d0 // d2 if d1 == -1 and d0 >= 0 else d1
            d2 = d0 // d1 if d2 == -1 and d0 >= 0 else d2
            if d1 * d2 != d0 and d0 != -1:
                raise ValueError(f"Split dims {d1}, {d2} do not divide original dim {d0}")
            out += [d1, d2]
        else:
            out.append(code); src += 1
        i += 1
    if inf >= 0:
        rest = prod(out)
        out[inf] = (prod(dshape) // rest if rest else 0) if known(dshape) else -1
    if known(dshape) and known(tuple(out)) and prod(out) != prod(dshape):
        raise ValueError(f"Target shape size is different to source. Target: {tuple(out)}\nSource: {tuple(dshape)}")
    return tuple(out)


def _fill_one_unknown(data: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    """MXNet's ReverseReshapeInferShape: one unknown input dim follows from a known output
    (Gluon's i2h weight before its input size is known, reshaped to the flat RNN parameters)."""
    unknown = [i for i, d in enumerate(data) if d < 0]
    if not known(out) or len(unknown) != 1:
        return data
    rest = prod(d for d in data if d >= 0)
    if not rest or prod(out) % rest:
        return data
    return tuple(prod(out) // rest if i == unknown[0] else d for i, d in enumerate(data))


def _reshape_shape(p: ReshapeParam, ins, outs):
    data = ins[0]
    if data is None:
        return ins, outs
    if p.shape:
        out = reshape_target(tuple(data), tuple(p.shape), p.reverse)
    elif p.target_shape:     # deprecated: one 0 is inferred; keep_highest keeps dim 0
        out = list(p.target_shape)
        if p.keep_highest:
            out[0] = data[0]
        zeros = [i for i in range(int(p.keep_highest), len(out)) if out[i] == 0]
        if len(zeros) == 1:
            out[zeros[0]] = 1
            out[zeros[0]] = prod(data) // prod(out) if known(data) else -1
        out = tuple(out)
    else:
        out = outs[0]
    if out is None:
        return ins, outs
    out = merge(outs[0], out)
    return [_fill_one_unknown(tuple(data), out)], [out]


Reshape = _reshaping(define("Reshape", "reshape", params=ReshapeParam, infer_shape=_reshape_shape,
                            infer_type=same_dtype, inplace=True, identity_outputs=(0,), listed_inputs=False),
                     "_backward_reshape")


@dataclass(frozen=True)
class ExpandDimsParam:
    axis: int


def _expand_dims_shape(p, ins, outs):
    """MXNet's ExpandDimShape: the output from the input and the input from the output."""
    data, out = ins[0], outs[0]
    if data is None and out is None:
        return ins, outs
    nd = len(data) if data is not None else len(out) - 1
    ax = p.axis + nd + 1 if p.axis < 0 else p.axis
    if not 0 <= ax <= nd:
        raise ValueError(f"axis must be in the range [{-nd}, {nd}] ({p.axis} provided)")
    src = data if data is not None else (-1,) * nd
    new_out = tuple(src[:ax]) + (1,) + tuple(src[ax:])
    out = merge(out, new_out)
    return [tuple(out[:ax]) + tuple(out[ax + 1:])], [out]


expand_dims = _reshaping(define("expand_dims", params=ExpandDimsParam, infer_shape=_expand_dims_shape,
                                infer_type=same_dtype, inplace=True, identity_outputs=(0,), listed_inputs=False),
                         "_backward_reshape")


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


@dataclass(frozen=True)
class ReshapeLikeParam:
    lhs_begin: Optional[int] = None
    lhs_end: Optional[int] = None
    rhs_begin: Optional[int] = None
    rhs_end: Optional[int] = None


def _like_range(nd: int, side: str, begin: Optional[int], end: Optional[int]) -> tuple[int, int]:
    """MXNet's ReshapeLikeRangeCanonicalize."""
    b = 0 if begin is None else begin + (nd if begin < 0 else 0)
    e = nd if end is None else end + (nd if end < 0 else 0)
    if e > nd or not b < e or b < 0:
        raise ValueError(f"Invalid begin, end, get {side}_begin={begin}, {side}_end={end}")
    return b, e


def _reshape_like_shape(p: ReshapeLikeParam, ins, outs):
    """MXNet's ReshapeLikeShapeCompute: lhs dims [lhs_begin, lhs_end) become rhs dims
    [rhs_begin, rhs_end)."""
    lhs, rhs = ins
    if lhs is None or rhs is None:
        return ins, outs
    lb, le = _like_range(len(lhs), "lhs", p.lhs_begin, p.lhs_end)
    rb, re = _like_range(len(rhs), "rhs", p.rhs_begin, p.rhs_end)
    out = tuple(lhs[:lb]) + tuple(rhs[rb:re]) + tuple(lhs[le:])
    if known(lhs) and known(out) and prod(lhs) != prod(out):
        raise ValueError(f"Cannot reshape lhs with shape {shape_str(lhs)}to new shape {shape_str(out)} "
                         "because they have different size.")
    return ins, [out]


reshape_like = _reshaping(define("reshape_like", params=ReshapeLikeParam, inputs=["lhs", "rhs"],
                                 no_grad_inputs=("rhs",),
                                 infer_shape=_reshape_like_shape, infer_type=dtype_of_first), "_backward_copy")


@dataclass(frozen=True)
class TransposeParam:
    axes: Shape = ()


def _transpose_shape(p, ins, outs):
    """MXNet's TransposeShape: the permutation maps known dims both ways."""
    data, out = ins[0], outs[0]
    if data is None and out is None:
        return ins, outs
    if data is not None and out is not None and len(data) != len(out):
        raise ValueError(f"transpose: input has {len(data)} dims, output {len(out)}")
    nd = len(data) if data is not None else len(out)
    axes = [norm_axis(a, nd) for a in p.axes] if p.axes else list(reversed(range(nd)))
    if sorted(axes) != list(range(nd)):
        raise ValueError(f"transpose axes {p.axes} are not a permutation of a {nd}-D input")
    data = data if data is not None else (-1,) * nd
    out = out if out is not None else (-1,) * nd
    back = [-1] * nd
    for i, a in enumerate(axes):
        back[a] = out[i]
    return [tuple(back)], [tuple(data[a] for a in axes)]


transpose = define("transpose", params=TransposeParam, infer_shape=_transpose_shape, infer_type=same_dtype,
                   listed_inputs=False)


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


def _swapaxis_shape(p: SwapAxisParam, ins, outs):
    """MXNet's SwapAxis InferShape: the input's (partial) shape with two dims swapped."""
    data = ins[0]
    if data is None:
        return ins, outs
    out = list(data)
    a, b = norm_axis(p.dim1, len(data)), norm_axis(p.dim2, len(data))
    out[a], out[b] = out[b], out[a]
    return ins, [tuple(out)]


SwapAxis = define("SwapAxis", "swapaxes", stateful=True, params=SwapAxisParam, infer_shape=_swapaxis_shape, infer_type=same_dtype)


@lowers(SwapAxis)
def _swapaxis_lower(ctx, p: SwapAxisParam, x):
    perm = list(range(x.ndim))
    a, c = norm_axis(p.dim1, x.ndim), norm_axis(p.dim2, x.ndim)
    perm[a], perm[c] = perm[c], perm[a]
    return ctx.b.transpose(x, perm)


@differentiable(SwapAxis, ("ograd0",))
def _swapaxis_grad(ctx, p: SwapAxisParam, g):
    return [_swapaxis_lower(ctx, p, g)]  # a swap is its own inverse


# --- reverse / flip (matrix_op.cc): the order along ``axis`` reversed; its gradient likewise ---
@dataclass(frozen=True)
class ReverseParam:
    axis: Shape


def _reverse_axes(p: ReverseParam, ndim: int) -> list[int]:
    return sorted({norm_axis(a, ndim, "reverse") for a in p.axis})


reverse = define("reverse", "flip", params=ReverseParam, infer_shape=same_shape, infer_type=same_dtype)


@lowers(reverse)
def _reverse_lower(ctx, p: ReverseParam, x):
    return ctx.b.reverse(x, _reverse_axes(p, x.ndim))


@differentiable(reverse, ("ograd0",))
def _reverse_grad(ctx, p: ReverseParam, g):
    return [ctx.b.reverse(g, _reverse_axes(p, g.ndim))]
