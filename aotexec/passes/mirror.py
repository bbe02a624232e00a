"""Mirroring (rematerialization): full graph -> full graph whose backward recomputes
cheap forward values instead of keeping them alive from forward to backward.

Reads: the ``GradientGraph`` and a policy saying which forward outputs are kept.
Returns: a ``GradientGraph`` whose backward nodes read ``<node>_mirror`` copies (nnvm's
name) of the forward nodes the policy does not keep, built from kept values.

Policies:
- ``auto`` (aotexec's default): ``dots`` where it saves at least ``AUTO_GAIN`` fewer bytes
  of activations for backward than ``none`` and plans at least that much less memory
  (``passes.plan_memory``, what ``debug_str`` reports), else ``none``.  As TorchInductor's
  default partitioner does, recompute only cheap values that fuse into their readers, and
  only where that buys memory: ResNet-8 b16 training saves 5.25 MB instead of 9.76 and
  plans 7.0 MB instead of 10.25 at the same speed.  LeNet (the plan does not shrink, 6.33
  MB either way, and what the executor holds grows, 7.1 -> 9.8 MB, with IREE's arena) and
  MLPs (a ReLU output saved either way; recomputing it cost 20% on the benchmark MLP) keep
  MXNet's graph.
- ``none``: keep everything backward reads (MXNet's default; MXNET_BACKWARD_DO_MIRROR=0);
- ``mxnet``: MXNET_BACKWARD_DO_MIRROR=1 (recompute all but the ops marked ``mirror_kept``);
- ``dots``: keep only the outputs of matrix products (``matmul_like``, JAX's ``dots_saveable``)
  and of strided pooling (``downsamples``: recomputing it reads its 4x larger input): a
  Convolution's output is kept, the BatchNorm / ReLU / add after it are recomputed,
  so a conv-BN-ReLU block saves one activation instead of two (ResNet-8 b16: 9.8 -> 5.3 MB
  of saved activations).  Where the kept values a node is recomputed from are alive in
  backward anyway, each backward reader gets its own recomputation, placed right before it
  (``<node>_mirror``, ``<node>_mirror_1``, ...), so no recomputed value stays alive between
  two distant readers (``_per_reader``); the lowering makes every recomputation wait for
  the backward pass to reach it (``Emitter.after``), which also keeps IREE from merging
  the copies.
An op can keep some outputs when it is recomputed (``ops.registry.rematerializes``):
BatchNorm's copy normalizes with forward's batch statistics instead of reducing over its
input again.
A node with ``__force_mirroring__`` is recomputed under every policy (as in MXNet);
random ops never are, since their recomputed values would differ; the graph's outputs
never are, since the executor keeps them anyway.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..graph import Entry, IndexedGraph, Node
from ..ops.registry import draws_random, reads_value
from .gradient import GradientGraph, residuals
from .infer import Typing, infer
from .plan_memory import entry_bytes, plan_memory

# ``auto`` recomputes when the saved activations and the plan shrink by this fraction at least
AUTO_GAIN = 0.1
# ``dots`` keeps a node whose recomputation would read more kept activations than this
MAX_SOURCES = 3


def _forced(node: Node) -> bool:
    return node.attrs.get("__force_mirroring__", "").lower() in ("true", "1")


def _kept(policy: str) -> Callable[[Node], bool]:
    def kept(node: Node) -> bool:
        if node.op is None or draws_random(node, True):
            return True
        if _forced(node):
            return False
        if policy == "mxnet":
            return node.op.mirror_kept      # MXNet's mirror policy (graph_executor.cc)
        if policy == "dots":               # the expensive ops, and the small outputs of large inputs
            return node.op.matmul_like or (node.op.downsamples is not None and node.op.downsamples(node.params))
        return True
    return kept


def mirror(gg: GradientGraph, policy: str) -> GradientGraph:
    """The graph with backward reads of not-kept forward values redirected to mirror copies."""
    by_policy = _kept(policy)
    outputs = {id(e.node) for e in gg.forward_heads}      # alive anyway: the executor's outputs

    forward = IndexedGraph(gg.forward_heads).nodes
    fanned_in = _fanned_in(forward, by_policy) if policy == "dots" else set()

    def kept(node: Node) -> bool:
        return id(node) in outputs and not _forced(node) or by_policy(node) or id(node) in fanned_in

    if all(kept(n) for n in forward):
        return gg
    fwd = {id(n) for n in forward}
    backward = [n for n in IndexedGraph(gg.heads).nodes if n.op is not None and id(n) not in fwd]
    per_reader = _per_reader(policy, backward, fwd, kept)
    shared: dict[int, Node] = {}          # forward node -> its mirror
    local: dict[int, Node] = {}           # the same, for the backward node being rebuilt
    made: dict[int, int] = {}             # forward node -> copies made so far (for names)
    rebuilt: dict[int, Node] = {}         # backward node -> its copy reading mirrors

    def remat(e: Entry) -> Entry:
        n = e.node
        keeps = _keeps(n)
        if kept(n) or e.index in keeps:
            return e
        copies = local if id(n) in per_reader else shared
        c = copies.get(id(n))
        if c is None:
            k = made[id(n)] = made.get(id(n), 0) + 1
            c = copies[id(n)] = dataclasses.replace(n, name=f"{n.name}_mirror" + (f"_{k - 1}" if k > 1 else ""),
                                                    attrs=dict(n.attrs),
                                                    inputs=[remat(x) for x in n.inputs] + [Entry(n, i) for i in keeps],
                                                    control_deps=[], mirror_of=n)
        return Entry(c, e.index)

    def mapped(e: Entry) -> Entry:
        return Entry(rebuilt.get(id(e.node), e.node), e.index)

    for n in backward:
        local.clear()
        ins = [remat(e) if id(e.node) in fwd and reads_value(n, pos) else mapped(e)
               for pos, e in enumerate(n.inputs)]
        rebuilt[id(n)] = dataclasses.replace(n, inputs=ins, control_deps=list(n.control_deps))
    return GradientGraph(list(gg.forward_heads), {k: mapped(e) for k, e in gg.grad_heads.items()},
                         {k: mapped(e) for k, e in gg.aux_updates.items()}, dict(gg.head_grad_vars))


def _fanned_in(forward: list[Node], kept: Callable[[Node], bool]) -> set[int]:
    """Forward nodes (topological order) that ``dots`` keeps although recomputable: elementwise
    nodes joining computed values whose recomputation would read more than ``MAX_SOURCES``
    kept activations.  Recomputing a ResNet v1 block's output reads its BatchNorm's input and
    the previous block's output, itself recomputed: each reader of a stage's last block output
    would read every block's convolution output of the stage.  Concatenations are not cut:
    keeping DenseNet's made its step slower."""
    sources: dict[int, frozenset[int]] = {}
    out: set[int] = set()
    for n in forward:
        if kept(n):
            sources[id(n)] = frozenset() if n.op is None else frozenset((id(n),))
            continue
        s = frozenset().union(*(sources[id(e.node)] for e in n.inputs))
        joins = n.op.inplace and sum(e.node.op is not None for e in n.inputs) > 1
        if joins and len(s) > MAX_SOURCES and not _forced(n):
            out.add(id(n))
            s = frozenset((id(n),))
        sources[id(n)] = s
    return out


def _keeps(node: Node) -> tuple[int, ...]:
    """Outputs of ``node`` its recomputation reads from it (``ops.registry.rematerializes``):
    they are kept, and follow the copy's inputs."""
    op = node.op
    return () if op is None or op.remat_keeps is None else tuple(op.remat_keeps(node.params))


def _per_reader(policy: str, backward: list[Node], fwd: set[int], kept: Callable[[Node], bool]) -> set[int]:
    """Forward nodes that ``dots`` recomputes once per backward reader rather than once.

    A copy shared by two distant readers stays alive in between; a copy per reader does not,
    but keeps the kept values it is recomputed from alive until the last reader. So a node
    is recomputed per reader when those kept values are read by backward anyway (ResNet's
    conv outputs, which BatchNorm's gradient reads; not LeNet's, which only the recomputed
    tanh reads)."""
    if policy != "dots":
        return set()
    read = {id(e.node) for n in backward for pos, e in enumerate(n.inputs)
            if id(e.node) in fwd and reads_value(n, pos)}

    memo: dict[int, frozenset[int]] = {}

    def leaves(root: Node) -> frozenset[int]:
        """The kept op nodes ``root`` is recomputed from (memoized, iterative: compile time
        stays linear in the graph and deep chains need no recursion)."""
        stack = [(root, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in memo:
                continue
            if kept(n):
                memo[id(n)] = frozenset() if n.op is None else frozenset((id(n),))   # variables live anyway
            elif ready:
                memo[id(n)] = frozenset().union(*(memo[id(e.node)] for e in n.inputs))
            else:
                stack.append((n, True))
                stack.extend((e.node, False) for e in n.inputs if id(e.node) not in memo)
        return memo[id(root)]

    out: set[int] = set()
    visited: set[int] = set()
    stack = [e.node for b in backward for e in b.inputs if id(e.node) in fwd]
    while stack:
        m = stack.pop()
        if kept(m) or id(m) in visited:
            continue
        visited.add(id(m))
        if all(leaf in read for leaf in leaves(m)):
            out.add(id(m))
        stack.extend(e.node for e in m.inputs)
    return out


def saved_bytes(gg: GradientGraph, typing: Typing) -> int:
    """Bytes of the forward values backward reads (what forward_train keeps for backward)."""
    return sum(entry_bytes(typing, typing.graph.eid(e)) for e in residuals(gg, typing.graph))


def mirrored_typing(gg: GradientGraph, policy: str, shapes: dict, dtypes: dict) -> tuple[GradientGraph, Typing]:
    """The mirrored graph for ``policy`` and its shapes / dtypes."""
    if policy == "auto":
        plain, dots = (mirrored_typing(gg, p, shapes, dtypes) for p in ("none", "dots"))
        if all(t.complete_shapes() and t.complete_dtypes() for _, t in (plain, dots)) and \
                saved_bytes(*dots) <= (1 - AUTO_GAIN) * saved_bytes(*plain) and \
                plan_memory(dots[1]).total_bytes <= (1 - AUTO_GAIN) * plan_memory(plain[1]).total_bytes:
            return dots
        return plain
    g = mirror(gg, policy)
    return g, infer(IndexedGraph(g.heads), shapes, dtypes)
