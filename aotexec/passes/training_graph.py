"""The full graph a training executor runs: forward, backward (``gradient``) and the
recomputations of the mirror policy (``mirror``), typed. What build compiles and what
``debug_str`` shows come from this one function."""
from __future__ import annotations

from .gradient import GradientGraph, build_gradient_graph
from .infer import Typing
from .mirror import mirrored_typing


def training_graph(heads: list, typing: Typing, wrt: list[str], policy: str) -> tuple[GradientGraph, Typing]:
    """``heads``: the forward graph's outputs; ``typing``: its shapes and dtypes; ``wrt``: the
    arguments needing gradients; ``policy``: a mirror policy name (``options.MIRROR_POLICIES``)."""
    g = typing.graph
    shapes = {n.name: typing.node_shape(n) for n in g.variables()}
    dtypes = {n.name: typing.node_dtype(n) for n in g.variables()}
    return mirrored_typing(build_gradient_graph(heads, wrt), policy, shapes, dtypes)
