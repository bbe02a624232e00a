"""The gradient pass (nnvm's Gradient): forward graph -> full graph.

Reads: each op's ``grad_reads`` / ``backward`` (``_backward_<op>``, declared beside the
op), ``zero_grad``, ``is_loss``, and which arguments need gradients.
Returns: ``GradientGraph`` with the full graph's heads (forward outputs, then one
gradient per argument that wants one, then aux updates) and the head-gradient
variables the backward half reads.

Backward nodes are named ``<node>_backward`` with the forward node as control
dependency, as MXNet names them; a head gradient enters through a variable
``_head_grad_<i>`` and an ``_identity_with_attr_like_rhs`` node.  Gradients of an
entry used several times are summed by one ``ElementWiseSum`` node.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..base import AotexecError
from ..graph import Entry, IndexedGraph, Node
from ..ops.autograd import identity_like_rhs
from ..ops.elemwise import add_n, zeros_like
from ..ops.params import parse_params
from ..ops.registry import reads_value


@dataclass
class GradientGraph:
    forward_heads: list[Entry]
    grad_heads: dict[str, Entry]                 # argument name -> its gradient
    aux_updates: dict[str, Entry]                # aux name -> its new value (BatchNorm moving stats)
    head_grad_vars: dict[int, Node] = field(default_factory=dict)   # output index -> variable

    @property
    def heads(self) -> list[Entry]:
        return self.forward_heads + list(self.grad_heads.values()) + list(self.aux_updates.values())

    @property
    def graph(self) -> IndexedGraph:
        return IndexedGraph(self.heads)


def residuals(gg: GradientGraph, full: IndexedGraph) -> list[Entry]:
    """The forward values the backward nodes of ``full`` (``gg``'s graph, possibly mirrored)
    read, in first-read order: what forward_train keeps for backward."""
    fwd = {id(n) for n in IndexedGraph(gg.forward_heads).nodes}
    out: list[Entry] = []
    seen = set()
    for n in full.nodes:
        if id(n) in fwd or n.op is None:
            continue
        for pos, e in enumerate(n.inputs):
            key = (id(e.node), e.index)
            if id(e.node) in fwd and e.node.op is not None and reads_value(n, pos) and key not in seen:
                seen.add(key)
                out.append(e)
    return out

_ZERO = object()   # a gradient contribution known to be zero (nnvm's zero_ops)


@dataclass(frozen=True)
class _HeadGrad:
    """Placeholder for output ``index``'s head gradient, made a variable only if read."""
    index: int


def _reachable_from(g: IndexedGraph, sources: set[int]) -> set[int]:
    """Nodes that depend on any of ``sources`` (ids of variable nodes)."""
    hit: set[int] = set(sources)
    for n in g.nodes:
        if any(id(e.node) in hit for e in n.inputs):
            hit.add(id(n))
    return hit


def _sum(entries: list[Entry], name: str) -> Entry:
    if len(entries) == 1:
        return entries[0]
    attrs = {"num_args": str(len(entries))}
    return Entry(Node(add_n, name, attrs, list(entries), parse_params(add_n.params, attrs, add_n.name, name)))


def _zeros_like(e: Entry) -> Entry:
    return Entry(Node(zeros_like, f"{e.node.name}_zeros_like{e.index}", {}, [e]))


def build_gradient_graph(heads: list[Entry], wrt: list[str]) -> GradientGraph:
    """Backward nodes for the arguments named in ``wrt`` (their grad_req is not 'null').

    Like nnvm, a node whose output gradients are all zero (BlockGrad above it, unused
    outputs) gets no backward node: zeros flow on without costing memory or time.
    """
    g = IndexedGraph(heads)
    by_name = {n.name: n for n in g.arguments()}
    targets = [by_name[n] for n in wrt]
    need = _reachable_from(g, {id(n) for n in targets})
    contrib: dict[tuple[int, int], list] = {}
    head_vars: dict[int, Node] = {}
    for i, h in enumerate(heads):
        contrib.setdefault((id(h.node), h.index), []).append(_HeadGrad(i))

    def ograd(node: Node, k: int) -> Entry:
        parts = []
        for c in contrib.get((id(node), k), []):
            if isinstance(c, _HeadGrad):
                var = head_vars.setdefault(c.index, Node(None, f"_head_grad_{c.index}"))
                parts.append(Entry(Node(identity_like_rhs, f"_head_grad_{c.index}_id", {},
                                        [Entry(var), Entry(node, k)])))
            elif c is not _ZERO:
                parts.append(c)
        return _sum(parts, f"{node.entry_name(k)}_grad_sum") if parts else _zeros_like(Entry(node, k))

    aux_updates: dict[str, Entry] = {}
    for node in reversed(g.nodes):
        if node.op is None or id(node) not in need:
            continue
        op = node.op
        grad_inputs = [(pos, e) for pos, e in enumerate(node.inputs) if pos not in node.aux_positions()]
        all_zero = not any(c is not _ZERO for k in range(node.num_outputs) for c in contrib.get((id(node), k), []))
        if op.zero_grad or all_zero:
            for _, e in grad_inputs:
                if id(e.node) in need:
                    contrib.setdefault((id(e.node), e.index), []).append(_ZERO)
            continue
        if op.clone_gradient:       # elemwise_add: the output gradient flows on as it is
            og = ograd(node, 0)
            for _, e in grad_inputs:
                if id(e.node) in need:
                    contrib.setdefault((id(e.node), e.index), []).append(og)
            continue
        bnode = _backward_node(node, ograd)
        for k, (_, e) in enumerate(grad_inputs):
            if id(e.node) in need:
                contrib.setdefault((id(e.node), e.index), []).append(Entry(bnode, k))
        for j, pos in enumerate(node.aux_positions()[:op.aux_updates]):
            aux_updates[node.inputs[pos].node.name] = Entry(bnode, len(grad_inputs) + j)
    grads: dict[str, Entry] = {}
    for var in targets:
        parts = [c for c in contrib.get((id(var), 0), []) if isinstance(c, Entry)]
        grads[var.name] = _sum(parts, f"{var.name}_grad_sum") if parts else _zeros_like(Entry(var))
    # a head gradient read only by pruned (all-zero) branches is not an input after all
    used = {id(n) for n in IndexedGraph(list(heads) + list(grads.values()) + list(aux_updates.values())).nodes}
    head_vars = {i: v for i, v in head_vars.items() if id(v) in used}
    return GradientGraph(list(heads), grads, aux_updates, head_vars)


def _backward_node(node: Node, ograd) -> Node:
    """``<node>_backward`` reading what the op's gradient rule declares."""
    op = node.op
    if op.no_fgradient:
        raise AotexecError(f"Operator {op.name} is non-differentiable because it didn't register FGradient "
                           f"attribute.")
    if op.grad_reads is None:
        raise AotexecError(f"Operator {op.name} has no gradient rule (node '{node.name}'), so gradients "
                           f"cannot flow through it; bind with grad_req='null' for the arguments before it.\n"
                           f"  {node.format()}")
    reads = [read_token(node, token, ograd) for token in op.grad_reads(node.params)]
    return Node(op.backward, f"{node.name}_backward", dict(node.attrs), reads, node.params, [node])


def read_token(node: Node, token: str, ograd) -> Entry:
    """What a gradient rule's read ``token`` of forward ``node`` names: ``ograd<i>`` (from
    ``ograd(node, i)``), ``in<i>`` or ``out<i>``."""
    kind = token.rstrip("0123456789")
    idx = int(token[len(kind):])
    if kind == "ograd":
        return ograd(node, idx)
    if kind == "in":
        return node.inputs[idx]
    if kind == "out":
        return Entry(node, idx)
    raise AotexecError(f"bad gradient read '{token}' declared by {node.op.name}")


def check_differentiable(heads: list[Entry], wrt: list[str]) -> None:
    """Raise, as MXNet's bind does, where a gradient for ``wrt`` must flow through an op MXNet
    registers no gradient for (``OpDef.no_fgradient``); aotexec builds its gradients lazily."""
    if wrt and any(n.op is not None and n.op.no_fgradient for n in IndexedGraph(heads).nodes):
        build_gradient_graph(heads, wrt)
