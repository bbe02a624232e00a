"""Memory planning over the full graph (forward + backward), MXNet's PlanMemory idea.

Reads: the IndexedGraph, its Typing (shapes, dtypes), which entries are external
(variables, and the graph's outputs, which the executor owns).
Returns: ``MemoryPlan`` with a storage id per intermediate entry and the bytes.

Algorithm: walk nodes in execution order; an entry's block is released after its
last reader.  A new entry takes a free block of the same size class (best fit,
free blocks at most 2x larger, as MXNet's ``match_range``), reuses its input's
block in place when the op is elementwise and that input dies here, or opens a
new block.  ``total_bytes`` is the sum of the blocks opened.
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
    """``external``: entry ids the executor allocates itself (outputs, gradients)."""
    g: IndexedGraph = typing.graph
    external = set(external or ())
    readers: dict[int, int] = {}
    for n in g.nodes:
        for e in n.inputs:
            readers[g.eid(e)] = readers.get(g.eid(e), 0) + 1
    for h in g.heads:
        external.add(g.eid(h))
    plan = MemoryPlan()
    free: list[int] = []   # block ids
    for nid, n in enumerate(g.nodes):
        if n.op is None:
            continue
        in_ids = [g.eid(e) for e in n.inputs]
        for k in range(n.num_outputs):
            eid = g.row_ptr[nid] + k
            if eid in external:
                continue
            size = entry_bytes(typing, eid)
            if k == 0 and n.op.name in INPLACE_OPS and in_ids:
                src = in_ids[0]
                if src in plan.storage_id and readers.get(src) == 1 and \
                        plan.block_bytes[plan.storage_id[src]] >= size:
                    plan.storage_id[eid] = plan.storage_id[src]
                    plan.inplace[eid] = src
                    readers[src] = 0
                    continue
            fits = [b for b in free if size <= plan.block_bytes[b] <= 2 * max(size, 1)]
            if fits:
                best = min(fits, key=lambda b: plan.block_bytes[b])
                free.remove(best)
                plan.storage_id[eid] = best
            else:
                plan.storage_id[eid] = len(plan.block_bytes)
                plan.block_bytes.append(size)
        # release inputs whose last reader ran
        for src in in_ids:
            if src in readers and readers[src] > 0:
                readers[src] -= 1
                if readers[src] == 0 and src in plan.storage_id and src not in plan.inplace.values():
                    blk = plan.storage_id[src]
                    if blk not in free and all(plan.storage_id.get(o) != blk for o in _live(plan, readers)):
                        free.append(blk)
        # outputs nobody reads die at once
        for k in range(n.num_outputs):
            eid = g.row_ptr[nid] + k
            if eid in plan.storage_id and readers.get(eid, 0) == 0 and eid not in plan.inplace.values():
                blk = plan.storage_id[eid]
                if blk not in free and all(plan.storage_id.get(o) != blk for o in _live(plan, readers)):
                    free.append(blk)
    return plan


def _live(plan: MemoryPlan, readers: dict[int, int]) -> list[int]:
    return [e for e, r in readers.items() if r > 0 and e in plan.storage_id]
