"""Graph -> StableHLO module: one ``func.func`` per entry point.

Reads: the IndexedGraph, its Typing (shapes and dtypes of every entry) and each
op's ``lower`` rule.  Produces MLIR text; ``compiler.verify_mlir`` checks it
before IREE compiles it, and every op carries ``loc("<node name>")``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..base import AotexecError
from ..graph import Entry, IndexedGraph, Node
from ..passes.infer import Typing
from .emitter import Emitter, Value, tensor_type


@dataclass
class LowerCtx:
    """What a lowering rule may read besides its params and input values."""
    b: Emitter
    node: Node
    in_shapes: list[tuple[int, ...]]
    out_shapes: list[tuple[int, ...]]
    out_dtypes: list[np.dtype]
    is_train: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def lower_node(b: Emitter, node: Node, inputs: list[Value], typing: Typing, is_train: bool) -> list[Value | None]:
    g = typing.graph
    nid = g.nid(node)
    out_shapes = [typing.shapes[i] for i in range(g.row_ptr[nid], g.row_ptr[nid + 1])]
    out_dtypes = [typing.dtypes[i] for i in range(g.row_ptr[nid], g.row_ptr[nid + 1])]
    if node.op.lower is None:
        raise AotexecError(f"Operator {node.op.name} has no StableHLO lowering yet (node '{node.name}'); "
                           f"it cannot be compiled.\n  {node.format()}")
    b.loc = node.name
    ctx = LowerCtx(b, node, [v.shape for v in inputs], out_shapes, out_dtypes, is_train)
    try:
        res = node.op.lower(ctx, node.params, *inputs)
    except AotexecError:
        raise
    except Exception as e:  # a rule bug: name the node, not a deep stack
        raise AotexecError(f"lowering {node.op.name} failed at node '{node.name}': {type(e).__name__}: {e}\n"
                           f"  {node.format()}\n  input shapes {[v.shape for v in inputs]}") from e
    res = list(res) if isinstance(res, (list, tuple)) else [res]
    res += [None] * (len(out_shapes) - len(res))
    for i, (v, s) in enumerate(zip(res, out_shapes)):
        if v is not None and tuple(v.shape) != tuple(s):
            raise AotexecError(f"lowering bug at node '{node.name}' ({node.op.name}): output {i} has shape "
                               f"{v.shape}, inference says {s}")
        if v is not None and v.dtype != out_dtypes[i]:
            res[i] = b.convert(v, out_dtypes[i])
    return res


def lower_function(name: str, typing: Typing, inputs: Sequence[Node], outputs: Sequence[Entry],
                   is_train: bool = False) -> str:
    """A ``func.func @name`` taking ``inputs`` (variables) and returning ``outputs`` (entries)."""
    g = typing.graph
    b = Emitter()
    values: dict[tuple[int, int], Value] = {}
    params = []
    for i, var in enumerate(inputs):
        shape, dtype = typing.node_shape(var), typing.node_dtype(var)
        v = Value(f"%arg{i}", tuple(shape), np.dtype(dtype))
        values[(id(var), 0)] = v
        params.append(f"%arg{i}: {v.type}")
    needed = _needed_nodes(g, outputs)
    for node in g.nodes:
        if node.op is None or id(node) not in needed:
            continue
        ins = []
        for e in node.inputs:
            v = values.get((id(e.node), e.index))
            if v is None:
                raise AotexecError(f"node '{node.name}' reads {e.name}, which this entry point does not compute")
            ins.append(v)
        for k, v in enumerate(lower_node(b, node, ins, typing, is_train)):
            if v is not None:
                values[(id(node), k)] = v
    results = []
    for e in outputs:
        v = values.get((id(e.node), e.index))
        if v is None:
            raise AotexecError(f"entry point {name}: output {e.name} was not computed")
        results.append(v)
    b.loc = name
    b.lines.append(f'    "func.return"({", ".join(v.name for v in results)}) : '
                   f'({", ".join(v.type for v in results)}) -> () loc("{name}")')
    sig = ", ".join(params)
    rtypes = ", ".join(v.type for v in results)
    return f"  func.func @{name}({sig}) -> ({rtypes}) {{\n" + "\n".join(b.lines) + "\n  }"


def _needed_nodes(g: IndexedGraph, outputs: Sequence[Entry]) -> set[int]:
    need: set[int] = set()
    stack = [e.node for e in outputs]
    while stack:
        n = stack.pop()
        if id(n) in need:
            continue
        need.add(id(n))
        stack.extend(e.node for e in n.inputs)
    return need


def module_text(functions: Sequence[str]) -> str:
    return "module {\n" + "\n".join(functions) + "\n}\n"
