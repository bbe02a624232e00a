"""Channels-last (NHWC) rules of ops: what a rule reads (``LayoutQuery``) and returns
(``ChannelsLast``), and the axis helpers the NHWC lowerings share.

An op's ``channels_last`` rule (``registry.lays_out``) tells the layout pass
(``passes.layout``, which says why aotexec runs conv nets channels-last) whether it
applies to a node and with which lowering.  Values are NCHW logically; a channels-last
value is stored as (N, H, W, C).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..emitter import Emitter, Value

TO_NHWC = (0, 2, 3, 1)      # logical NCHW axes in physical order
TO_NCHW = (0, 3, 1, 2)
NHWC_SPATIAL = (1, 2)       # H, W axes of a channels-last value


@dataclass(frozen=True)
class LayoutQuery:
    """What a channels-last rule sees of one node (nodes are asked in execution order)."""
    params: Any
    nhwc: list[bool]                        # input k is stored channels-last
    shapes: list                            # logical input shapes (None: unknown)
    num_outputs: int
    inference: bool                         # the graph has no weight gradients (forward_infer)
    fwd_in_shapes: list | None = None       # backward nodes: the forward node's input shapes, if it has a rule
    fwd_in_nhwc: list[bool] | None = None   # backward nodes: which forward inputs are channels-last

    def four_d(self, k: int) -> bool:
        return self.shapes[k] is not None and len(self.shapes[k]) == 4


@dataclass(frozen=True)
class ChannelsLast:
    """A channels-last rule applied to a node: the variant's ``name`` (debugging, tests), which
    outputs are stored NHWC, and how the node is lowered: ``lower(ctx, params, *inputs)`` with
    the inputs as stored (``ctx.in_nhwc`` says which are NHWC), or else the op's own rule with
    ``params`` (when given) and the physical output shapes."""
    name: str
    nhwc: tuple[bool, ...]
    lower: Callable | None = None
    params: Any = None


def first_nhwc(num_outputs: int, nhwc: bool = True) -> tuple[bool, ...]:
    """Output 0 stored as ``nhwc`` says, the others (statistics, workspaces) NCHW."""
    return (nhwc,) + (False,) * (num_outputs - 1)


def to_nhwc(b: Emitter, x: Value) -> Value:
    """An NCHW value channels-last; fenced so IREE keeps the convolution in the fast form
    (hoisted to the function's top when ``x`` is an argument, e.g. the data)."""
    return b.fence(b.transpose(x, TO_NHWC))


def nchw_to_nhwc_materialized(b: Emitter, g: Value) -> Value:
    """An NCHW value channels-last, the value itself behind a barrier: a head gradient from an
    NCHW op (Flatten's), whose transpose IREE 3.13 would otherwise fuse into the matmul producing
    it (a strided output form, 20x slower for LeNet's fc1 data gradient)."""
    return b.transpose(b.barrier(g), TO_NHWC)
