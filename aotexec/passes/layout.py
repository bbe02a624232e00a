"""The layout pass: graph -> which values of a 2-D convolution net are stored channels-last.

Why: IREE 3.13 runs NCHW convolutions 13-70x slower than NHWC ones, and folds a layout
transpose next to a convolution back into it unless the transpose is fenced by an
optimization barrier; every barrier splits the function into execution regions whose
transient memory IREE sums. Keeping activations channels-last *between* convolutions
removes those transposes and barriers: only the weights change layout, once, fenced at
the top of the function (``Emitter.fence``).

``assign`` decides, over the full graph in execution order, which entries are stored
NHWC (physical shape (N, H, W, C) for logical (N, C, H, W)); the decision depends only on
the graph, so forward_train and backward agree on the layout of the activations passed
between them. It asks each op: a layout-agnostic op (``OpDef.layout_agnostic``) keeps
NHWC when all its inputs are NHWC and 4-D; an op with a channels-last rule
(``OpDef.channels_last``, declared beside the op) says whether and how it applies
(``ops.nhwc``).  A node no rule applies to reads NCHW values (``lower_function``
transposes NHWC inputs back) and produces NCHW ones: correctness never depends on a rule
applying. Entry-point outputs the user sees are always NCHW.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..graph import IndexedGraph, Node
from ..ops.nhwc import TO_NHWC, ChannelsLast, LayoutQuery


def physical(shape, nhwc: bool) -> tuple[int, ...]:
    return tuple(shape[i] for i in TO_NHWC) if nhwc else tuple(shape)


@dataclass
class Layouts:
    nhwc: set[tuple[int, int]] = field(default_factory=set)     # (id(node), output) stored channels-last
    variants: dict[int, ChannelsLast] = field(default_factory=dict)   # id(node) -> the rule applied
    # id(node) -> input shapes of a node whose op has a channels-last rule: its backward
    # node's rule reads them (a tiled pooling's gradient tiles the forward input)
    shapes: dict[int, list] = field(default_factory=dict)
    inference: bool = False                                     # see ``assign``

    def of(self, node: Node, k: int) -> bool:
        return (id(node), k) in self.nhwc

    @property
    def rules(self) -> dict[int, str]:
        """id(node) -> the name of the channels-last variant applied ('conv', 'elementwise'...)."""
        return {k: v.name for k, v in self.variants.items()}


def _decide(node: Node, ins: list[bool], shapes: list, lay: Layouts) -> ChannelsLast | None:
    op = node.op
    if op.channels_last is not None:
        fwd = node.control_deps[0] if op.forward_op is not None else None
        return op.channels_last(LayoutQuery(
            node.params, ins, shapes, node.num_outputs, lay.inference,
            fwd_in_shapes=lay.shapes.get(id(fwd)) if fwd is not None else None,
            fwd_in_nhwc=[lay.of(e.node, e.index) for e in fwd.inputs] if fwd is not None else None))
    if op.layout_agnostic and ins and all(ins) and all(s is not None and len(s) == 4 for s in shapes):
        return ChannelsLast("elementwise", (True,) * node.num_outputs)
    return None


def assign(g: IndexedGraph, shape_of: Callable, inference: bool = False) -> Layouts:
    """The channels-last entries of ``g`` (nodes in execution order); ``shape_of(entry)``
    gives logical shapes.  ``inference``: no weight gradients, so the kernel size does not
    bound the convolutions that run channels-last (``ops.conv_forms.MAX_OFFSETS``)."""
    lay = Layouts(inference=inference)
    for node in g.nodes:
        if node.op is None:
            continue
        ins = [lay.of(e.node, e.index) for e in node.inputs]
        shapes = [shape_of(e) for e in node.inputs]
        if node.op.channels_last is not None:
            lay.shapes[id(node)] = shapes
        got = _decide(node, ins, shapes, lay)
        if got is None:
            continue
        lay.variants[id(node)] = got
        lay.nhwc.update((id(node), k) for k, nhwc in enumerate(got.nhwc) if nhwc)
    return lay
