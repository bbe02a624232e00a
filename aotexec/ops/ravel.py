"""ravel_multi_index / unravel_index (MXNet 1.9.1 src/operator/tensor/ravel.h): flat indices
from multi-indices and back, row-major over ``shape``, in the data's own dtype; no gradient.

MXNet's arithmetic, kept: ravel accumulates ``ret = ret * shape[j] + x[j]`` in int64 with each
sum rounded in the data's dtype and truncated (1.5 and 2.7 in a (3, 5) array give 7); unravel
truncates the flat index to int64 and divides with C's truncating division, and its first
coordinate is the quotient left after the others (no bound: 100 in (3, 5) unravels to (20, 0)),
so a leading -1 in ``shape`` works for both."""
from __future__ import annotations

from dataclasses import dataclass

from .params import Shape
from .registry import define, differentiable, lowers
from .rules import same_dtype


@dataclass(frozen=True)
class RavelParam:
    shape: Shape = ()


def _checked_shape(p: RavelParam, name: str) -> Shape:
    if not p.shape:
        raise ValueError(f"Empty shape parameter for {name} operator.")
    return p.shape


def _ravel_shape(p: RavelParam, ins, outs):
    """MXNet's RavelOpShape: (ndim, N) -> (N,), or the input from a known output."""
    nd = len(_checked_shape(p, "ravel"))
    data, out = ins[0], outs[0]
    if data is not None and len(data) > 0:
        if len(data) != 2:
            raise ValueError("Input to ravel operator must be two-dimensional.")
        if data[0] not in (nd, -1):
            raise ValueError("First dimension of input of ravel operator does not match shape parameter "
                             "dimension.")
        return [(nd, data[1])], [(data[1],)]
    if out is not None and len(out) > 0:
        return [(nd, out[0])], outs
    return ins, outs


def _unravel_shape(p: RavelParam, ins, outs):
    """MXNet's UnravelOpShape: (N,) -> (ndim, N), or the input from a known output; an input
    of another rank is refused (MXNet read only its first axis and wrote a wrong-sized result)."""
    nd = len(_checked_shape(p, "unravel"))
    data, out = ins[0], outs[0]
    if data is not None and len(data) > 0:
        if len(data) != 1:
            raise ValueError(f"Input to unravel operator must be one-dimensional (flat indices), got {tuple(data)}")
        return ins, [(nd, data[0])]
    if out is not None and len(out) > 0:
        if len(out) != 2:
            raise ValueError("Output of unravel operator must be two-dimensional.")
        if out[0] not in (nd, -1):
            raise ValueError("First dimension of output of ravel operator does not match shape parameter "
                             "dimension.")
        return [(out[1],)], outs
    return ins, outs


ravel_multi_index = define("ravel_multi_index", "_ravel_multi_index", params=RavelParam,
                           infer_shape=_ravel_shape, infer_type=same_dtype, zero_grad=True)
unravel_index = define("unravel_index", "_unravel_index", params=RavelParam,
                       infer_shape=_unravel_shape, infer_type=same_dtype, zero_grad=True)


@lowers(ravel_multi_index)
def _ravel_lower(ctx, p: RavelParam, x):
    b = ctx.b
    n = x.shape[1]
    ret = None
    for j, size in enumerate(p.shape):
        xj = b.reshape(b.slice(x, (j, 0), (j + 1, n)), (n,))
        if x.dtype.kind == "f":     # int64 * size, rounded to the dtype, plus x, truncated
            ret = b.convert(xj if ret is None else b.add(b.convert(b.mul(ret, size), x.dtype), xj), "int64")
        else:
            xi = b.convert(xj, "int64")
            ret = xi if ret is None else b.add(b.mul(ret, size), xi)
    return b.convert(ret, x.dtype)


@lowers(unravel_index)
def _unravel_lower(ctx, p: RavelParam, x):
    b = ctx.b
    idx = b.convert(x, "int64")
    coords = []
    for size in reversed(p.shape[1:]):
        quot = b.div(idx, size)                         # C division: truncates, remainder keeps the sign
        coords.append(b.sub(idx, b.mul(quot, size)))
        idx = quot
    coords.append(idx)
    rows = [b.reshape(b.convert(c, x.dtype), (1,) + x.shape) for c in reversed(coords)]
    return b.concatenate(rows, 0) if len(rows) > 1 else rows[0]


differentiable(ravel_multi_index, ())(lambda ctx, p: [None])
differentiable(unravel_index, ())(lambda ctx, p: [None])
