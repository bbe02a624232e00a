"""What the compiled functions compute: the full graph of a training executor and how it
splits into forward_train / backward, and partial_forward's steps."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..graph import Entry
from ..options import mirror_policy
from ..passes.training_graph import training_graph
from ..passes.gradient import GradientGraph, residuals
from ..passes.infer import Typing
from ..passes.plan_memory import entry_bytes

TRAIN_MODES = ("forward_train", "backward", "train_step")


@dataclass
class TrainingPlan:
    """The full graph and how it splits into forward_train / backward."""
    gg: GradientGraph
    typing: Typing
    residuals: list[Entry]
    head_grads: list[int]            # output indices whose head gradient backward reads
    wrt: list[str]
    add: list[str]                   # arguments with grad_req 'add'


def training_plan(symbol, typing: Typing, reqs: dict[str, str], mirror: bool | str = "none",
                  fuse: bool = True) -> TrainingPlan:
    """The full graph (mirrored by the ``mirror`` policy, see ``passes.mirror``; gradients fused
    unless ``fuse`` is off, ``passes.fuse_gradients``) and the forward values backward reads:
    what forward_train returns and backward takes."""
    wrt = [n for n in symbol.list_arguments() if reqs.get(n, "null") != "null"]
    gg, full_typing = training_graph(symbol._outputs, typing, wrt, mirror_policy(mirror), fuse)
    heads = sorted(gg.head_grad_vars)
    add = [n for n in wrt if reqs[n] == "add"]
    return TrainingPlan(gg, full_typing, residuals(gg, full_typing.graph), heads, wrt, add)


def chosen_mirror(symbol, typing: Typing, reqs: dict[str, str], mirror: bool | str) -> str:
    """The policy ``auto`` picks for these shapes (``none`` or ``dots``), other policies as given."""
    policy = mirror_policy(mirror)
    if policy != "auto":
        return policy
    plan = training_plan(symbol, typing, reqs, policy)
    return "dots" if any(n.mirror_of is not None for n in plan.typing.graph.nodes) else "none"


def saved_activation_bytes(symbol, typing: Typing, reqs: dict[str, str], mirror: bool | str) -> int:
    """Bytes of the activations forward_train saves for backward (what mirroring reduces)."""
    plan = training_plan(symbol, typing, reqs, mirror)
    g = plan.typing.graph
    return sum(entry_bytes(plan.typing, g.eid(e)) for e in plan.residuals)


def step_plan(typing: Typing, heads: Sequence[Entry]) -> list[tuple]:
    """partial_forward's steps: each op node with the entries it reads and the ones it must keep
    (visible outputs and outputs later nodes read)."""
    g = typing.graph
    read = {(id(e.node), e.index) for n in g.nodes for e in n.inputs} | {(id(e.node), e.index) for e in heads}
    steps = []
    for node in g.nodes:
        if node.op is None:
            continue
        outs = [Entry(node, i) for i in range(node.num_outputs)
                if i < node.num_visible_outputs or (id(node), i) in read]
        steps.append((node, list(node.inputs), outs))
    return steps
