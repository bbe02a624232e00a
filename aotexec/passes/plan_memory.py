"""Memory planning over the full graph (forward + backward), MXNet's PlanMemory idea.

Reads: the IndexedGraph, its Typing (shapes, dtypes), which entries are external
(variables, and the graph's heads, which the executor owns).
Returns: ``MemoryPlan`` with a storage id per intermediate entry and the bytes.

Algorithm (ExecuTorch's greedy-by-size shared objects, after MXNet's in-place pass):
1. liveness: each intermediate entry lives from its producer to its last reader;
2. in place: an elementwise op's output joins its first input's group when that input
   dies at this op and has no other reader (nnvm FInplaceOption);
3. groups are placed largest first into the first shared block whose groups' lifetimes
   do not overlap theirs (the block grows to the largest member), else a new block.
``total_bytes`` is the sum of the blocks.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph import IndexedGraph
from .infer import Typing

# ops whose output may overwrite their first input (nnvm FInplaceOption {0, 0})
INPLACE_OPS = {"Activation", "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "square", "abs", "negative",
               "_copy", "BlockGrad", "Dropout", "LeakyReLU", "_plus_scalar", "_minus_scalar", "_mul_scalar",
               "_div_scalar", "_rminus_scalar", "_rdiv_scalar", "elemwise_add", "elemwise_sub", "elemwise_mul",
               "_identity_with_attr_like_rhs", "Reshape", "Flatten", "expand_dims", "squeeze", "clip",
               "_backward_Activation", "_backward_relu", "_backward_BatchNorm", "MakeLoss", "SoftmaxOutput",
               "softmax", "log_softmax"}


@dataclass
class MemoryPlan:
    storage_id: dict[int, int] = field(default_factory=dict)     # entry id -> block
    block_bytes: list[int] = field(default_factory=list)
    inplace: dict[int, int] = field(default_factory=dict)        # entry id -> input entry id it overwrote

    @property
    def total_bytes(self) -> int:
        return sum(self.block_bytes)


def entry_bytes(typing: Typing, eid: int) -> int:
    shape, dtype = typing.shapes[eid], typing.dtypes[eid]
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize if shape is not None else 0


def plan_memory(typing: Typing, external: set[int] | None = None) -> MemoryPlan:
    """``external``: entry ids the executor allocates itself (besides the graph's heads)."""
    g: IndexedGraph = typing.graph
    external = set(external or ()) | {g.eid(h) for h in g.heads}
    last: dict[int, int] = {}
    readers: dict[int, int] = {}
    for i, n in enumerate(g.nodes):
        for e in n.inputs:
            last[g.eid(e)] = i
            readers[g.eid(e)] = readers.get(g.eid(e), 0) + 1
    plan = MemoryPlan()
    group: dict[int, int] = {}                      # entry -> group root
    span: dict[int, list[int]] = {}                 # root -> [start, end, bytes]
    for i, n in enumerate(g.nodes):
        if n.op is None:
            continue
        for k in range(n.num_outputs):
            eid = g.row_ptr[i] + k
            if eid in external:
                continue
            size, end = entry_bytes(typing, eid), last.get(eid, i)
            src = g.eid(n.inputs[0]) if n.inputs else None
            if k == 0 and n.op.name in INPLACE_OPS and src in group and readers.get(src) == 1 \
                    and last.get(src) == i and span[group[src]][2] >= size:
                root = group[eid] = group[src]
                span[root][1] = max(span[root][1], end)
                plan.inplace[eid] = src
                continue
            group[eid] = eid
            span[eid] = [i, end, size]
    blocks: list[list[tuple[int, int]]] = []        # per block: lifetimes placed there
    block_of: dict[int, int] = {}
    for root, (start, end, size) in sorted(span.items(), key=lambda kv: -kv[1][2]):
        for b, lives in enumerate(blocks):
            if all(end < s or start > e for s, e in lives):
                lives.append((start, end))
                plan.block_bytes[b] = max(plan.block_bytes[b], size)
                block_of[root] = b
                break
        else:
            blocks.append([(start, end)])
            plan.block_bytes.append(size)
            block_of[root] = len(blocks) - 1
    plan.storage_id = {eid: block_of[root] for eid, root in group.items()}
    return plan
