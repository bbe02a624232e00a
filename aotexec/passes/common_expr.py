"""Common subexpression elimination: graph heads -> graph heads, MXNet's bind-time pass.

MXNet 1.9.1 (src/executor/eliminate_common_expr_pass.cc, on unless
MXNET_ELIMINATE_COMMON_EXPR=0) merges operator nodes of the same op, the same attributes
and the same inputs, until none are left; a graph output that then repeats another gets a
``_copy`` node (``<node>_<k>_copy``) so every output keeps its own array.  Never merged:
variables, ops that mutate an input (aux states: BatchNorm's moving statistics), ops that
draw random numbers, and MXNet's stateful ops (``OpDef.stateful``).  What it changes is what
the executor's graph shows (``debug_str``, monitor callbacks, ``get_optimized_symbol``);
IREE merged the computations anyway.
"""
from __future__ import annotations

from ..graph import Entry, Node, dfs_post_order
from ..ops.elemwise import copy as copy_op
from ..ops.params import parse_params


def _mergeable(n: Node) -> bool:
    return (n.op is not None and not n.op.stateful and not n.op.random and not n.aux_positions())


def _key(n: Node) -> tuple:
    return tuple((id(e.node), e.index) for e in n.inputs)


def _common_nodes(heads: list[Entry]) -> list[tuple[Node, Node]]:
    """(kept, replaced) pairs: nodes grouped by their inputs, then equal ones within a group."""
    groups: dict[tuple, list[Node]] = {}
    for n in dfs_post_order(heads):
        if n.inputs:
            groups.setdefault(_key(n), []).append(n)
    pairs = []
    for group in groups.values():
        replaced: set[int] = set()
        for i, a in enumerate(group):
            if i in replaced or not _mergeable(a):
                continue
            for j in range(i + 1, len(group)):
                b = group[j]
                if j not in replaced and b.op is a.op and b.attrs == a.attrs:
                    replaced.add(j)
                    pairs.append((a, b))
    return pairs


def has_common_expr(heads: list[Entry]) -> bool:
    """Whether ``eliminate_common_expr`` would change the graph of ``heads``."""
    seen: set[tuple[int, int]] = set()
    return bool(_common_nodes(heads)) or any((id(e.node), e.index) in seen or seen.add((id(e.node), e.index))
                                             for e in heads)


def eliminate_common_expr(heads: list[Entry]) -> list[Entry]:
    """The heads of the graph with common nodes merged (mutates the nodes: pass a clone) and
    repeated heads isolated by ``_copy`` nodes."""
    heads = list(heads)
    while pairs := _common_nodes(heads):
        nodes = dfs_post_order(heads)
        for kept, gone in pairs:
            for n in nodes:
                n.inputs = [Entry(kept, e.index) if e.node is gone else e for e in n.inputs]
                n.control_deps = [kept if d is gone else d for d in n.control_deps]
            kept.control_deps.extend(gone.control_deps)
            heads = [Entry(kept, e.index) if e.node is gone else e for e in heads]
    copies: dict[tuple[int, int], int] = {}
    for i, e in enumerate(heads):
        k = (id(e.node), e.index)
        if k not in copies:
            copies[k] = 0
            continue
        name = f"{e.node.name}_{copies[k]}_copy"
        node = Node(copy_op, name, {}, [e], parse_params(copy_op.params, {}, copy_op.name, name))
        copies[k] += 1
        heads[i] = Entry(node, 0)
    return heads
