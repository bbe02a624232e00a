"""Spatial transformers: GridGenerator, BilinearSampler and SpatialTransformer (MXNet 1.9.1
src/operator/grid_generator-inl.h, bilinear_sampler.cc): parameters, shape rule, lowering and
gradient per op.

BilinearSampler reads each output pixel's four neighbours with one gather over the image
stored as rows of channels (N*H*W, C), index tuples computed from the grid; out-of-image
neighbours weigh 0.  Its data gradient is one scatter-add through the same indices.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from ..emitter import scatter_add_rows
from . import hlo
from .params import Shape
from .registry import define, differentiable, lowers
from .rules import known, same_dtype


# --- GridGenerator: a sampling grid (N, 2, H, W) of x / y source positions in [-1, 1]
@dataclass(frozen=True)
class GridGeneratorParam:
    transform_type: Literal["affine", "warp"]
    target_shape: Shape = (0, 0)


def _grid_shape(p: GridGeneratorParam, ins, outs):
    data = ins[0]
    if not known(data):
        return ins, outs
    if p.transform_type == "affine":
        if len(data) != 2 or data[1] != 6:
            raise ValueError(f"if transform_type is affine, data is an affine matrix (batch, 6), got {data}")
        h, w = p.target_shape
        if h <= 0 or w <= 0:
            raise ValueError(f"incorrect target_shape: {p.target_shape}")
        return ins, [(data[0], 2, h, w), (3, h * w)]
    if len(data) != 4 or data[1] != 2:
        raise ValueError(f"if transform_type is warp, data is an optical flow (batch, 2, h, w), got {data}")
    return ins, [tuple(data), (2, data[2], data[3])]


GridGenerator = define("GridGenerator", stateful=True, params=GridGeneratorParam, outputs=["output", "grid_dst"],
                       num_visible=lambda p: 1, infer_shape=_grid_shape, infer_type=same_dtype)


def _fill(b, value: float, shape, dtype):
    return b.broadcast_in_dim(b.constant(value, (), dtype), shape, [])


def _target_grid(b, h: int, w: int, dtype):
    """(3, h*w) rows x, y, 1 of every target pixel, x and y spread over [-1, 1] (grid_dst)."""
    def coord(dim: int, n: int):
        v = b.convert(b.iota((h, w), dim, "int32"), dtype)
        return b.reshape(b.add(b.mul(v, 2.0 / (n - 1)), -1.0), (1, h * w))
    return b.concatenate([coord(1, w), coord(0, h), _fill(b, 1.0, (1, h * w), dtype)], 0)


def _warp_scale(b, shape, dtype):
    """(W-1)/2 for the x channel and (H-1)/2 for y, broadcast to the flow's shape."""
    n, _, h, w = shape
    half = b.concatenate([_fill(b, (w - 1) / 2.0, (1,), dtype), _fill(b, (h - 1) / 2.0, (1,), dtype)], 0)
    return b.broadcast_in_dim(half, shape, [1])


def affine_grid(b, theta, h: int, w: int):
    """[(N, 2, h, w) source positions of the target pixels under the (N, 6) affine ``theta``,
    the (3, h*w) target grid]."""
    dst = _target_grid(b, h, w, theta.dtype)
    src = b.dot_general(b.reshape(theta, (theta.shape[0] * 2, 3)), dst, ([1], [0]))
    return [b.reshape(src, (theta.shape[0], 2, h, w)), dst]


def affine_grid_grad(b, g, theta_shape):
    """d theta from d grid g (N, 2, h, w): g (N*2, h*w) times grid_dst^T (recomputed, not kept)."""
    h, w = g.shape[2:]
    g2 = b.reshape(g, (g.shape[0] * 2, h * w))
    return b.reshape(b.dot_general(g2, _target_grid(b, h, w, g.dtype), ([1], [1])), theta_shape)


@lowers(GridGenerator)
def _grid_lower(ctx, p: GridGeneratorParam, x):
    b = ctx.b
    if p.transform_type == "affine":
        return affine_grid(b, x, *p.target_shape)
    n, _, h, w = x.shape
    cols = b.convert(b.iota((2, h, w), 2, "int32"), x.dtype)
    rows = b.convert(b.iota((2, h, w), 1, "int32"), x.dtype)
    dst = b.select(b.compare(b.iota((2, h, w), 0, "int32"), 0, "EQ"), cols, rows)    # channel 0: x, 1: y
    pos = b.add(x, b.broadcast_in_dim(dst, x.shape, [1, 2, 3]))
    return [b.sub(b.div(pos, _warp_scale(b, x.shape, x.dtype)), 1.0), dst]


@differentiable(GridGenerator, ("ograd0",))
def _grid_grad(ctx, p: GridGeneratorParam, g):
    """affine: ``affine_grid_grad``; warp: g / scale."""
    b = ctx.b
    if p.transform_type == "affine":
        return [affine_grid_grad(b, g, ctx.fwd_in_shapes[0])]
    return [b.div(g, _warp_scale(b, g.shape, g.dtype))]


# --- BilinearSampler: out[n, c, i, j] interpolates data[n, c] at grid[n, :, i, j] in pixels
@dataclass(frozen=True)
class BilinearSamplerParam:
    cudnn_off: Optional[bool] = None


def _sampler_shape(p, ins, outs):
    data, grid = ins
    if not known(data) or not known(grid):
        return ins, outs
    if len(data) != 4 or len(grid) != 4 or grid[1] != 2 or grid[0] != data[0]:
        raise ValueError(f"BilinearSampler needs data (batch, C, H, W) and grid (batch, 2, h, w), "
                         f"got {data} and {grid}")
    return ins, [(data[0], data[1], grid[2], grid[3]), (grid[0], grid[2], grid[3], 2)]


BilinearSampler = define("BilinearSampler", stateful=True, params=BilinearSamplerParam, inputs=["data", "grid"],
                         outputs=["output", "tmp"], num_visible=lambda p: 1,
                         infer_shape=_sampler_shape, infer_type=same_dtype)


def _and(b, p, q):
    return b.op("stablehlo.and", [p, q], p.shape, "bool")


def _corners(b, data_shape, grid):
    """The four neighbours (tl, tr, bl, br: k = 2 dy + dx) of every grid point as a leading axis,
    each (4, N, h, w): flat row ids into (N*H*W, C), whether it is inside the image, its
    bilinear weight (0 outside) and that weight's derivatives along the pixel y and x (for the
    grid gradient, where outside neighbours count by their value 0).  One expression over the
    corner axis, not four (IREE 3.13's multi-use fusion broke dominance on the four-way form)."""
    n, _, hi, wi = data_shape
    _, _, ho, wo = grid.shape
    shape4 = (4, n, ho, wo)
    part = lambda k: b.reshape(b.slice(grid, [0, k, 0, 0], [n, k + 1, ho, wo]), (n, ho, wo))  # noqa: E731
    bc = lambda v: b.broadcast_in_dim(v, shape4, [1, 2, 3])  # noqa: E731
    x = b.mul(b.add(part(0), 1.0), (wi - 1) / 2.0)
    y = b.mul(b.add(part(1), 1.0), (hi - 1) / 2.0)
    x0f, y0f = b.unary("floor", x), b.unary("floor", y)
    wx, wy = bc(b.sub(1.0, b.sub(x, x0f))), bc(b.sub(1.0, b.sub(y, y0f)))      # the top-left weights
    k = b.iota(shape4, 0, "int32")
    down, right = b.compare(b.div(k, 2), 1, "EQ"), b.compare(b.rem(k, 2), 1, "EQ")
    yy = b.add(bc(b.convert(y0f, "int32")), b.div(k, 2))
    xx = b.add(bc(b.convert(x0f, "int32")), b.rem(k, 2))
    inside = _and(b, _and(b, b.compare(yy, 0, "GE"), b.compare(yy, hi - 1, "LE")),
                  _and(b, b.compare(xx, 0, "GE"), b.compare(xx, wi - 1, "LE")))
    batch = b.mul(b.iota(shape4, 1, "int32"), hi * wi)
    ids = b.add(batch, b.add(b.mul(b.clamp(0, yy, hi - 1), wi), b.clamp(0, xx, wi - 1)))
    fy, fx = b.select(down, b.sub(1.0, wy), wy), b.select(right, b.sub(1.0, wx), wx)
    return {"ids": ids, "inside": inside, "w": b.select(inside, b.mul(fy, fx), b.full_like(fx, 0.0)),
            "dw_dy": b.select(down, fx, b.neg(fx)), "dw_dx": b.select(right, fy, b.neg(fy))}   # d wy / dy = -1


def _pixel_rows(b, x):
    """(N, C, H, W) -> (N*H*W, C)."""
    n, c, h, w = x.shape
    return b.reshape(b.transpose(x, [0, 2, 3, 1]), (n * h * w, c))


def bilinear_sample(b, x, grid):
    """data x (N, C, H, W) interpolated at grid (N, 2, h, w) -> (N, C, h, w)."""
    k = _corners(b, x.shape, grid)
    vals = b.gather_rows(_pixel_rows(b, x), k["ids"], 0)                     # (4, N, h, w, C)
    out = b.reduce(b.mul(vals, b.broadcast_in_dim(k["w"], vals.shape, [0, 1, 2, 3])), [0])
    return b.transpose(out, [0, 3, 1, 2])


@lowers(BilinearSampler)
def _sampler_lower(ctx, p, x, grid):
    return [bilinear_sample(ctx.b, x, grid), None]


@differentiable(BilinearSampler, ("ograd0", "in0", "in1"))
def _sampler_grad(ctx, p, g, x, grid):
    return bilinear_sample_grad(ctx.b, g, x, grid)


def bilinear_sample_grad(b, g, x, grid):
    """[d data, d grid] of ``bilinear_sample``: data: g times each neighbour's weight, added back
    to its pixel; grid: the derivative of the interpolation along x and y (neighbours outside
    the image count as 0), scaled to [-1, 1] coordinates, as BilinearSamplerBackward."""
    n, c, hi, wi = x.shape
    _, _, ho, wo = grid.shape
    k = _corners(b, x.shape, grid)
    gl = b.transpose(g, [0, 2, 3, 1])                                           # (N, h, w, C)
    shape5 = (4, n, ho, wo, c)
    per_corner = lambda v: b.broadcast_in_dim(v, shape5, [0, 1, 2, 3])  # noqa: E731
    gb = b.broadcast_in_dim(gl, shape5, [1, 2, 3, 4])
    # s[k] = sum_c g v_k, v_k the neighbour's value (0 outside); d out / d y = sum_k v_k d w_k / dy
    vals = b.gather_rows(_pixel_rows(b, x), k["ids"], 0)
    vals = b.select(per_corner(k["inside"]), vals, b.full_like(vals, 0.0))
    s = b.reduce(b.mul(vals, gb), [4])                                         # (4, N, h, w)
    d_y = b.reduce(b.mul(s, k["dw_dy"]), [0])
    d_x = b.reduce(b.mul(s, k["dw_dx"]), [0])
    dgrid = b.concatenate([b.reshape(b.mul(d_x, (wi - 1) / 2.0), (n, 1, ho, wo)),
                           b.reshape(b.mul(d_y, (hi - 1) / 2.0), (n, 1, ho, wo))], 1)
    # the data gradient's scatter after the gather above: emitted the other way round, IREE 3.13's
    # multi-use producer fusion broke dominance when g came from a matmul
    upd = hlo.scatter_updates(b, b.mul(gb, per_corner(k["w"])))
    rows = scatter_add_rows(b, (n * hi * wi, c), k["ids"], upd, 0)
    dx = b.transpose(b.reshape(rows, (n, hi, wi, c)), [0, 3, 1, 2])
    return [dx, dgrid]


# --- SpatialTransformer (src/operator/spatial_transformer-inl.h): an affine GridGenerator and a
# BilinearSampler in one op (the same arithmetic as the two; its hidden outputs are the grids)
@dataclass(frozen=True)
class SpatialTransformerParam:
    target_shape: Shape = (0, 0)
    transform_type: Literal["affine"] = "affine"
    sampler_type: Literal["bilinear"] = "bilinear"
    cudnn_off: Optional[bool] = None


def _st_shape(p: SpatialTransformerParam, ins, outs):
    """MXNet's SpatialTransformerProp::InferShape checks, in its order."""
    data, loc = ins
    if data is None or loc is None:
        return ins, outs
    if len(data) != 4:
        raise ValueError("input data should be 4D in batch-num_filter-y-x")
    if len(loc) != 2:
        raise ValueError("locolisation paramter should be 4D in batch-num_hidden")
    if loc[1] != 6:
        raise ValueError("incorrect locolisation network shape[1], should be 6")
    h, w = p.target_shape
    if h <= 0:
        raise ValueError(f"incorrect target_shape: {h}")
    if w <= 0:
        raise ValueError(f"incorrect target_shape: {w}")
    return ins, [(data[0], data[1], h, w), (3, h * w), (data[0], 2, h * w)]


SpatialTransformer = define("SpatialTransformer", stateful=True, params=SpatialTransformerParam, inputs=["data", "loc"],
                            outputs=["output", "grid_dst", "grid_src"], num_visible=lambda p: 1,
                            infer_shape=_st_shape, infer_type=same_dtype)


@lowers(SpatialTransformer)
def _st_lower(ctx, p: SpatialTransformerParam, x, loc):
    b = ctx.b
    grid, dst = affine_grid(b, loc, *p.target_shape)
    return [bilinear_sample(b, x, grid), dst, b.reshape(grid, ctx.out_shapes[2])]


@differentiable(SpatialTransformer, ("ograd0", "in0", "in1"))
def _st_grad(ctx, p: SpatialTransformerParam, g, x, loc):
    """The sampler's gradients, the grid's one carried back to ``loc``; the grid recomputed."""
    b = ctx.b
    grid, _ = affine_grid(b, loc, *p.target_shape)
    dx, dgrid = bilinear_sample_grad(b, g, x, grid)
    return [dx, affine_grid_grad(b, dgrid, loc.shape)]
