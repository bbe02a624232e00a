"""One node -> StableHLO: its op's lowering rule called with a ``LowerCtx``, its results
checked against inference (shapes) and converted to the inferred dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..base import AotexecError
from ..emitter import Emitter, Value
from ..graph import Node
from ..ops.nhwc import ChannelsLast
from ..passes import layout
from ..passes.infer import Typing


@dataclass
class LowerCtx:
    """What a lowering rule may read besides its params and input values."""
    b: Emitter
    node: Node
    in_shapes: list[tuple[int, ...]]
    out_shapes: list[tuple[int, ...]]
    out_dtypes: list[np.dtype]
    is_train: bool = False
    fwd_in_shapes: list[tuple[int, ...]] = field(default_factory=list)    # backward nodes only
    fwd_in_dtypes: list[np.dtype] = field(default_factory=list)
    fwd_out_shapes: list[tuple[int, ...]] = field(default_factory=list)
    rng_state: Value | None = None     # tensor<2xui64> (seed, call counter); random ops in training
    node_index: int = 0                # position in the graph: distinct random streams per node
    extra: dict[str, Any] = field(default_factory=dict)
    unused: frozenset[int] = frozenset()   # outputs nothing in the entry point reads
    in_nhwc: list[bool] = field(default_factory=list)   # channels-last lowerings: inputs stored NHWC

    def wants(self, k: int) -> bool:
        """Whether output ``k`` is read: a rule may skip computing the others (IREE would drop
        them too, but a skipped value cannot keep a shared intermediate alive)."""
        return k not in self.unused


def lower_node(b: Emitter, node: Node, inputs: list[Value], typing: Typing, is_train: bool,
               rng_state: Value | None = None, params: Any = None,
               out_shapes: list[tuple[int, ...]] | None = None, unused: frozenset[int] = frozenset(),
               lower=None, in_nhwc: Sequence[bool] = ()) -> list[Value | None]:
    """``params`` / ``out_shapes`` / ``lower`` override the node's (channels-last lowering:
    physical shapes, and the variant's rule reading ``in_nhwc``)."""
    g = typing.graph
    nid = g.nid(node)
    out_shapes = out_shapes or [typing.shapes[i] for i in range(g.row_ptr[nid], g.row_ptr[nid + 1])]
    out_dtypes = [typing.dtypes[i] for i in range(g.row_ptr[nid], g.row_ptr[nid + 1])]
    if node.op.lower is None:
        raise AotexecError(f"Operator {node.op.name} has no StableHLO lowering yet (node '{node.name}'); "
                           f"it cannot be compiled.\n  {node.format()}")
    b.loc = node.name
    ctx = LowerCtx(b, node, [v.shape for v in inputs], out_shapes, out_dtypes, is_train,
                   rng_state=rng_state, node_index=nid, unused=unused, in_nhwc=list(in_nhwc))
    if node.op.forward_op is not None:
        fwd = node.control_deps[0]
        ctx.fwd_in_shapes = [tuple(typing.shape_of(e)) for e in fwd.inputs]
        ctx.fwd_in_dtypes = [typing.dtype_of(e) for e in fwd.inputs]
        ctx.fwd_out_shapes = [tuple(typing.node_shape(fwd, i)) for i in range(fwd.num_outputs)]
        ctx.is_train = True
    if lower is None:
        lower = node.op.remat_lower if node.mirror_of is not None and node.op.remat_lower else node.op.lower
    try:
        res = lower(ctx, node.params if params is None else params, *inputs)
    except AotexecError:
        raise
    except Exception as e:  # a rule bug: name the node, not a deep stack
        raise AotexecError(f"lowering {node.op.name} failed at node '{node.name}': {type(e).__name__}: {e}\n"
                           f"  {node.format()}\n  input shapes {[v.shape for v in inputs]}") from e
    res = list(res) if isinstance(res, (list, tuple)) else [res]
    res += [None] * (len(out_shapes) - len(res))
    for i, (v, s) in enumerate(zip(res, out_shapes)):
        if v is None and node.op.forward_op is not None:
            v = res[i] = _zeros(b, s, out_dtypes[i])
        if v is not None and tuple(v.shape) != tuple(s):
            raise AotexecError(f"lowering bug at node '{node.name}' ({node.op.name}): output {i} has shape "
                               f"{v.shape}, inference says {s}")
        if v is not None and v.dtype != out_dtypes[i]:
            res[i] = b.convert(v, out_dtypes[i])
    return res


def _zeros(b: Emitter, shape, dtype) -> Value:
    c = b.constant(0.0, (), dtype)
    return b.broadcast_in_dim(c, shape, ()) if shape else c


def lower_channels_last(b: Emitter, node: Node, variant: ChannelsLast, ins: list[Value], in_nhwc: list[bool],
                        typing: Typing, is_train: bool, rng_state: Value | None, lay: layout.Layouts) -> list:
    """``node`` lowered by the channels-last ``variant`` its op's rule chose (``passes.layout``)."""
    g = typing.graph
    nid = g.nid(node)
    logical = [typing.shapes[i] for i in range(g.row_ptr[nid], g.row_ptr[nid + 1])]
    phys = [layout.physical(s, lay.of(node, k)) for k, s in enumerate(logical)]
    return lower_node(b, node, ins, typing, is_train, rng_state, params=variant.params, out_shapes=phys,
                      lower=variant.lower, in_nhwc=in_nhwc)
