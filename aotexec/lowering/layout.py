"""Channels-last execution of 2-D convolution nets: which values are stored NHWC, and the
channels-last lowering of the ops that produce or consume them.

Why: IREE 3.13 runs NCHW convolutions 13-70x slower than NHWC ones, and folds a layout
transpose next to a convolution back into it unless the transpose is fenced by an
optimization barrier; every barrier splits the function into execution regions whose
transient memory IREE sums. Keeping activations channels-last *between* convolutions
removes those transposes and barriers: only the weights change layout, once, fenced at
the top of the function (``Emitter.fence``).

``assign`` decides, over the full graph in execution order, which entries are stored
NHWC (physical shape (N, H, W, C) for logical (N, C, H, W)); the decision depends only on
the graph, so forward_train and backward agree on the layout of the activations passed
between them. A node whose channels-last rule does not apply reads NCHW values
(``lower_function`` transposes NHWC inputs back) and produces NCHW ones: correctness
never depends on a rule applying. Entry-point outputs the user sees are always NCHW.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Callable

from ..graph import IndexedGraph, Node
from ..ops.registry import OPS
from ..emitter import Emitter, Value

TO_NHWC = (0, 2, 3, 1)      # logical NCHW axes in physical order
TO_NCHW = (0, 3, 1, 2)
NHWC_SPATIAL = (1, 2)       # H, W axes of a channels-last value

# elementwise ops over same-shape operands: layout-agnostic, so NHWC in, NHWC out
# (canonical names: the registry resolves aliases such as ElementWiseSum -> add_n)
ELEMENTWISE = {OPS[n].name for n in (
    "Activation", "_backward_Activation", "relu", "sigmoid", "tanh", "_backward_relu", "_copy", "_backward__copy",
    "negative", "elemwise_add", "elemwise_sub", "elemwise_mul", "_backward_elemwise_add", "_backward_elemwise_sub",
    "_backward_elemwise_mul", "ElementWiseSum", "_backward_add_n", "_plus_scalar", "_minus_scalar", "_mul_scalar",
    "_div_scalar", "_rminus_scalar", "_backward__plus_scalar", "_backward__minus_scalar", "_backward__mul_scalar",
    "_backward__div_scalar", "_backward__rminus_scalar")}


# weight gradients by one contraction per kernel offset: measured as fast as the fenced
# NHWC convolution for 3x3 kernels, 1.5x slower for LeNet's 5x5 (which keeps the NCHW rule)
MAX_OFFSETS = 9


def enabled() -> bool:
    """AOTEXEC_LAYOUT=nchw turns channels-last execution off (to compare, or to bisect a bug)."""
    return os.environ.get("AOTEXEC_LAYOUT", "nhwc").lower() != "nchw"


def physical(shape, nhwc: bool) -> tuple[int, ...]:
    return tuple(shape[i] for i in TO_NHWC) if nhwc else tuple(shape)


@dataclass
class Layouts:
    nhwc: set[tuple[int, int]] = field(default_factory=set)     # (id(node), output) stored channels-last
    rules: dict[int, str] = field(default_factory=dict)         # id(node) -> channels-last rule applied
    shapes: dict[int, tuple] = field(default_factory=dict)      # Pooling node -> its input shape
    inference: bool = False                                     # see ``assign``

    def of(self, node: Node, k: int) -> bool:
        return (id(node), k) in self.nhwc


def _conv2d(p) -> bool:
    return len(p.kernel) == 2 and p.num_group == 1 and p.layout in (None, "NCHW")


def _tiled_pool(p, shape) -> bool:
    """2-D max/avg/sum pooling whose windows tile the input (kernel == stride, no padding):
    LeNet's 2x2/2 pools."""
    if p.global_pool or len(p.kernel) != 2 or p.pool_type not in ("max", "avg", "sum") or shape is None \
            or p.layout not in (None, "NCHW"):
        return False
    stride = tuple(p.stride) if p.stride else (1, 1)
    pad = tuple(p.pad) if p.pad else (0, 0)
    fits = p.pooling_convention == "valid" or all(d % k == 0 for d, k in zip(shape[2:], p.kernel))
    return tuple(p.kernel) == stride and pad == (0, 0) and fits and p.pooling_convention != "same"


def _global_pool(p) -> bool:
    return p.global_pool and len(p.kernel or (0, 0)) in (0, 2) and p.pool_type in ("avg", "sum") \
        and p.layout in (None, "NCHW")


def _decide(node: Node, ins: list[bool], shapes: list, lay: Layouts) -> tuple[str, list[bool]] | None:
    """(rule, which outputs are NHWC) when a channels-last rule applies to ``node``."""
    name, p, n = node.op.name, node.params, node.num_outputs
    four_d = [s is not None and len(s) == 4 for s in shapes]
    if name == "Convolution" and _conv2d(p) and four_d[0] and (
            p.kernel[0] * p.kernel[1] <= MAX_OFFSETS or lay.inference):
        # inference has no weight gradient to bound the kernel: LeNet's 5x5 convolutions run
        # channels-last with the tanh and pooling after them (local-task 7.0-7.6 -> 4.0-4.2 ms;
        # conv2 alone fewer fenced regions, conv1 as a two-channel direct convolution, see conv)
        return "conv", [True] + [False] * (n - 1)
    if name == "_backward_Convolution" and _conv2d(p) and ins[0] and p.kernel[0] * p.kernel[1] <= MAX_OFFSETS:
        return "conv_grad", [ins[1]] + [False] * (n - 1)
    if name == "BatchNorm" and four_d[0] and p.axis % 4 == 1 and ins[0]:
        return "axis3", [True] + [False] * (n - 1)
    if name == "_backward_BatchNorm" and p.axis % 4 == 1 and ins[0] and ins[1]:
        return "axis3", [True] + [False] * (n - 1)
    if name == "Pooling" and _tiled_pool(p, shapes[0]) and ins[0]:
        return "tiled_pool", [True] + [False] * (n - 1)
    if name == "_backward_Pooling" and _tiled_pool(p, _fwd_in_shape(node, lay)) and \
            lay.of(node.control_deps[0].inputs[0].node, node.control_deps[0].inputs[0].index) and \
            (p.pool_type != "max" or ins[1]):
        return "tiled_pool_grad", [True] + [False] * (n - 1)     # an NCHW g is transposed (small, unfenced)
    if name == "Pooling" and _global_pool(p) and ins[0]:
        return "global_pool", [False] * n
    if name == "_backward_Pooling" and _global_pool(p) and lay.of(node.control_deps[0].inputs[0].node,
                                                                   node.control_deps[0].inputs[0].index):
        return "global_pool_grad", [True] + [False] * (n - 1)
    if name in ELEMENTWISE and ins and all(ins) and all(four_d):
        return "elementwise", [True] * n
    return None


def _fwd_in_shape(node: Node, lay: Layouts):
    return lay.shapes.get(id(node.control_deps[0]))


def assign(g: IndexedGraph, shape_of: Callable, inference: bool = False) -> Layouts:
    """The channels-last entries of ``g`` (nodes in execution order); ``shape_of(entry)``
    gives logical shapes.  ``inference``: no weight gradients, so ``MAX_OFFSETS`` does not
    bound the convolutions that run channels-last."""
    lay = Layouts(inference=inference)
    for node in g.nodes:
        if node.op is None:
            continue
        ins = [lay.of(e.node, e.index) for e in node.inputs]
        shapes = [shape_of(e) for e in node.inputs]
        if node.op.name == "Pooling":
            lay.shapes[id(node)] = shapes[0]
        got = _decide(node, ins, shapes, lay)
        if got is None:
            continue
        rule, outs = got
        lay.rules[id(node)] = rule
        lay.nhwc.update((id(node), k) for k, nhwc in enumerate(outs) if nhwc)
    return lay


# ------------------------------------------------------------------ rules
def to_nhwc(b: Emitter, x: Value) -> Value:
    """An NCHW value channels-last; fenced so IREE keeps the convolution in the fast form
    (hoisted to the function's top when ``x`` is an argument, e.g. the data)."""
    return b.fence(b.transpose(x, TO_NHWC))


def _hwio(b: Emitter, w: Value) -> Value:
    """OIHW weight -> HWIO, fenced at the top of the function."""
    return b.fence(b.transpose(w, (2, 3, 1, 0)))


def conv(b: Emitter, p, x: Value, x_nhwc: bool, w: Value, bias: Value | None, out_logical) -> Value:
    """Convolution, NHWC out: a direct NHWC convolution.

    One input channel gets a second, zero one (and zero weights for it): IREE 3.13 ran the
    3x3 one-channel convolution (16x1x32x32 -> 16) in 1.46 ms, with two channels in 0.125 ms.
    Two to four channels used to go through im2col + matmul; measured again with the layout
    and resident weights of today, the direct form is 4-6x faster (3x3 @32 batch 16, 3
    channels: 0.17 vs 0.92-1.05 ms; ResNet-8 inference 3.85 -> 3.41 ms, local-sync)."""
    x = x if x_nhwc else to_nhwc(b, x)
    n, o, oh, ow = out_logical
    stride, dilate, pad = p.spatial("stride", 1), p.spatial("dilate", 1), p.spatial("pad", 0)
    if x.shape[3] == 1:
        x = b.pad(x, 0.0, (0, 0, 0, 0), (0, 0, 0, 1))
        w = b.pad(w, 0.0, (0, 0, 0, 0), (0, 1, 0, 0))
    y = b.conv_nhwc(x, _hwio(b, w), (n, oh, ow, o), stride, [(q, q) for q in pad], (1, 1), dilate)
    if bias is not None:
        y = b.add(y, b.broadcast_in_dim(bias, y.shape, [3]))
    return y


def conv_grad(b: Emitter, p, g: Value, x: Value, x_nhwc: bool, w: Value, x_logical) -> list[Value]:
    """[d data (NHWC when x is), d weight (OIHW), d bias] from an NHWC head gradient."""
    xl = x if x_nhwc else to_nhwc(b, x)
    n, h, wd, c = xl.shape
    _, oh, ow, o = g.shape
    kernel, stride, dilate, pad = p.kernel, p.spatial("stride", 1), p.spatial("dilate", 1), p.spatial("pad", 0)
    # data: g convolved (lhs-dilated by the stride) with the flipped weight, in/out swapped
    wt = b.fence(b.transpose(b.reverse(w, [2, 3]), (2, 3, 0, 1)))              # (KH, KW, O, C)
    pads = [(d * (k - 1) - q, xi - s * (gi - 1) - 1 + q)
            for xi, gi, k, s, d, q in zip((h, wd), (oh, ow), kernel, stride, dilate, pad)]
    pos = [(max(lo, 0), max(hi, 0)) for lo, hi in pads]
    full = [xi + max(-lo, 0) + max(-hi, 0) for xi, (lo, hi) in zip((h, wd), pads)]
    dx = b.conv_nhwc(g, wt, (n, full[0], full[1], c), (1, 1), pos, stride, dilate)
    if pos != pads:
        start = (0, max(-pads[0][0], 0), max(-pads[1][0], 0), 0)
        dx = b.slice(dx, start, (n, start[1] + h, start[2] + wd, c))
    if not x_nhwc:
        dx = b.transpose(dx, TO_NCHW)
    # weight: one (N*OH*OW)-contraction per kernel offset, of g with the offset's input slice
    need = [(k - 1) * d + (gi - 1) * s + 1 for k, d, s, gi in zip(kernel, dilate, stride, (oh, ow))]
    xp = b.pad(xl, 0.0, (0, pad[0], pad[1], 0),
               (0, max(need[0] - pad[0] - h, 0), max(need[1] - pad[1] - wd, 0), 0))
    # Each offset's slice goes through Emitter.after (on g, which the contraction reads
    # anyway): a bare slice became a copy that IREE copied again into the matmul's data-tiled
    # layout, all nine offsets alive at once; an elementwise op on the slice fuses with that
    # packing. ResNet-8 b16's backward arena 15.4 -> 7.9 MB, same speed (ordering the
    # offsets a kernel row at a time helped before the fusion, and changes nothing after it).
    # The input slice is the contraction's lhs and g its rhs ([N*OH*OW, O], already the
    # matmul's K x N layout), giving dW^T per offset; with g as lhs IREE stored a transposed
    # copy of it next to the NHWC one for every layer. ResNet-8 b16 training 37 -> 30.5 ms,
    # backward arena 12.5 -> 10.5 MB with the default recomputation.
    parts = [b.reshape(b.dot_general(b.after(s, g), g, contract=([0, 1, 2], [0, 1, 2])), (c, o, 1))
             for s in b.windows(xp, kernel, stride, dilate, (oh, ow), spatial=NHWC_SPATIAL)]
    dw = b.transpose(b.reshape(b.concatenate(parts, 2), (c, o) + tuple(kernel)), (1, 0, 2, 3))
    out = [dx, dw]
    if not p.no_bias:
        # over the batch first, then space: reducing dims 0-2 at once fused with the weight
        # contractions above into a dispatch IREE 3.13's llvm-cpu codegen rejects
        out.append(b.reduce(b.reduce(g, [0], "add"), [0, 1], "add"))
    return out


def global_pool(b: Emitter, p, x: Value) -> Value:
    """Global avg/sum pooling of NHWC ``x``: (N, C, 1, 1) is NHWC and NCHW at once."""
    n, h, w, c = x.shape
    y = b.reduce(x, [1, 2], "add")
    if p.pool_type == "avg":
        y = b.div(y, float(h * w))
    return b.reshape(y, (n, c, 1, 1))


def global_pool_grad(b: Emitter, p, g: Value, x_logical) -> Value:
    n, c, h, w = x_logical
    dx = b.broadcast_in_dim(b.reshape(g, (n, c)), (n, h, w, c), [0, 3])
    return b.div(dx, float(h * w)) if p.pool_type == "avg" else dx


def _tiles(b: Emitter, x: Value, kernel) -> tuple[Value, tuple[int, ...]]:
    """NHWC ``x`` cropped to whole windows and split (N, OH, KH, OW, KW, C)."""
    n, h, w, c = x.shape
    oh, ow = h // kernel[0], w // kernel[1]
    if (oh * kernel[0], ow * kernel[1]) != (h, w):
        x = b.slice(x, (0, 0, 0, 0), (n, oh * kernel[0], ow * kernel[1], c))
    split = (n, oh, kernel[0], ow, kernel[1], c)
    return b.reshape(x, split), split


def tiled_pool(b: Emitter, p, x: Value) -> Value:
    xs, _ = _tiles(b, x, p.kernel)
    if p.pool_type == "max":
        return b.reduce(xs, [2, 4], "max")
    y = b.reduce(xs, [2, 4], "add")
    return b.div(y, float(p.kernel[0] * p.kernel[1])) if p.pool_type == "avg" else y


def tiled_pool_grad(b: Emitter, p, g: Value, g_nhwc: bool, x: Value | None, x_logical) -> Value:
    """d input (NHWC): each window's g to its first maximum (MXNet's pool.h), or spread evenly."""
    g = g if g_nhwc else b.transpose(g, TO_NHWC)
    n, c, h, w = x_logical
    kh, kw = p.kernel
    oh, ow = h // kh, w // kw
    split = (n, oh, kh, ow, kw, c)
    outer = [0, 1, 3, 5]
    gs = b.broadcast_in_dim(g, split, outer)
    if p.pool_type == "max":
        xs, _ = _tiles(b, x, p.kernel)
        eq = b.compare(xs, b.broadcast_in_dim(b.reduce(xs, [2, 4], "max"), split, outer), "EQ")
        pos = b.add(b.mul(b.iota(split, 2, "int32"), kw), b.iota(split, 4, "int32"))   # row-major in the window
        first = b.reduce(b.select(eq, pos, b.full_like(pos, kh * kw)), [2, 4], "min")
        hit = b.compare(pos, b.broadcast_in_dim(first, split, outer), "EQ")
        dx = b.select(hit, gs, b.full_like(gs, 0.0))
    else:
        dx = b.div(gs, float(kh * kw)) if p.pool_type == "avg" else gs
    dx = b.reshape(dx, (n, oh * kh, ow * kw, c))
    if (oh * kh, ow * kw) != (h, w):
        dx = b.pad(dx, 0.0, (0, 0, 0, 0), (0, h - oh * kh, w - ow * kw, 0))
    return dx


def axis3(p):
    """BatchNorm's params for a channels-last input: the channel axis is 3."""
    return dataclasses.replace(p, axis=3)

