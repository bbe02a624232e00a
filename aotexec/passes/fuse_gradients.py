"""Gradient fusion: full graph -> full graph where an op's backward node also takes the gradient
of the op applied to its output (BatchNorm's through the ReLU after it), as one node.

Reads: each op's ``fused_gradients`` (``ops.registry.fused_gradient``): the op after it, when
that op's params allow, and the fused backward op with the tokens it reads.
Returns: a ``GradientGraph`` whose fused nodes keep the name of the backward node they replace
and read the later op's output gradient instead of its input gradient; the later op's backward
node is gone. It applies only where that node's gradient has no other reader and the later op
reads the earlier one's output 0 directly.

Why a pass: each rule alone stores the gradient between them, which two consumers then read
(IREE 3.13 materializes a value read by two dispatches); the fused rule recomputes it where it
is needed. The executor's monitor and ``debug_str`` show MXNet's graph, so they run without it.
"""
from __future__ import annotations

import dataclasses

from ..graph import Entry, IndexedGraph, Node
from .gradient import GradientGraph, read_token


def _fused(n: Node, readers: dict[tuple[int, int], int]) -> Node | None:
    """The fused node replacing backward node ``n`` (and the backward node of the op after its
    forward node), or None."""
    fwd = n.control_deps[0]
    if n.op is not fwd.op.backward:
        return None
    # n's output gradient: the later op's input gradient
    r = n.inputs[fwd.op.grad_reads(n.params).index("ograd0")].node
    for after, when, op in fwd.op.fused_gradients:
        if r.op is not after.backward or not when(r.params) or readers[(id(r), 0)] != 1:
            continue
        t = r.control_deps[0]
        if r.num_outputs != 1 or not t.inputs or t.inputs[0].node is not fwd or t.inputs[0].index != 0:
            continue
        dz = r.inputs[after.grad_reads(r.params).index("ograd0")]
        ins = [read_token(fwd, tok, lambda node, k: dz) for tok in op.inputs(n.params)]
        return Node(op, n.name, dict(n.attrs), ins, n.params, [fwd])
    return None


def fuse_gradients(gg: GradientGraph) -> GradientGraph:
    g = IndexedGraph(gg.heads)
    readers: dict[tuple[int, int], int] = {}
    for e in [e for n in g.nodes for e in n.inputs] + gg.heads:
        readers[(id(e.node), e.index)] = readers.get((id(e.node), e.index), 0) + 1
    forward = {id(n) for n in IndexedGraph(gg.forward_heads).nodes}
    rebuilt: dict[int, Node] = {}

    def mapped(e: Entry) -> Entry:
        return Entry(rebuilt.get(id(e.node), e.node), e.index)

    for n in g.nodes:                             # execution order: inputs are rebuilt first
        if n.op is None or id(n) in forward:
            continue
        fused = _fused(n, readers) if n.op.forward_op is not None and n.op.forward_op.fused_gradients else None
        new = fused or n
        ins = [mapped(e) for e in new.inputs]
        if fused is not None or any(a.node is not e.node for a, e in zip(ins, n.inputs)):
            rebuilt[id(n)] = dataclasses.replace(new, inputs=ins, control_deps=list(new.control_deps))
    if not rebuilt:
        return gg
    return GradientGraph(list(gg.forward_heads), {k: mapped(e) for k, e in gg.grad_heads.items()},
                         {k: mapped(e) for k, e in gg.aux_updates.items()}, dict(gg.head_grad_vars))
