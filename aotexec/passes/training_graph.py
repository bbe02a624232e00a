"""The full graph a training executor runs: forward, backward (``gradient``), fused gradient
nodes (``fuse_gradients``) and the recomputations of the mirror policy (``mirror``), typed.
What build compiles and what ``debug_str`` shows (unfused: MXNet's nodes) come from this one
function."""
from __future__ import annotations

from .fuse_gradients import fuse_gradients
from .gradient import GradientGraph, build_gradient_graph
from .infer import Typing
from .mirror import mirrored_typing


def training_graph(heads: list, typing: Typing, wrt: list[str], policy: str,
                   fuse: bool = False) -> tuple[GradientGraph, Typing]:
    """``heads``: the forward graph's outputs; ``typing``: its shapes and dtypes; ``wrt``: the
    arguments needing gradients; ``policy``: a mirror policy name (``options.MIRROR_POLICIES``);
    ``fuse``: fuse backward nodes (not where the monitor or ``debug_str`` shows MXNet's)."""
    g = typing.graph
    shapes = {n.name: typing.node_shape(n) for n in g.variables()}
    dtypes = {n.name: typing.node_dtype(n) for n in g.variables()}
    gg = build_gradient_graph(heads, wrt)
    return mirrored_typing(fuse_gradients(gg) if fuse else gg, policy, shapes, dtypes)
