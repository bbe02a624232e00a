"""Shape and dtype inference to a fixed point (nnvm's InferShape / InferType).

Reads: each op's ``infer_shape`` / ``infer_type`` rule, variable attributes
``__shape__`` / ``__dtype__``, and the caller's known values.
Returns: a ``Typing`` (one shape and one dtype per graph entry).

Forward and backward sweeps repeat until a sweep learns nothing new, so an
input's shape can come from a sibling or from an output (``fc(a + b)`` given
only ``b``).  A contradiction raises with the node and both shapes, in MXNet's
words.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..base import AotexecError
from ..graph import IndexedGraph, Node
from ..ops.rules import IncompatibleAttr, known, merge

# MXNet's integer dtype codes (mshadow type flags), used by the __dtype__ attribute
DTYPE_CODES = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8",
               6: "int64", 7: "bool", 12: "bfloat16"}
DTYPE_TO_CODE = {v: k for k, v in DTYPE_CODES.items()}


def fmt_shape(s) -> str:
    """MXNet's TShape printing: ``[3,5]``."""
    return "[" + ",".join(str(d) for d in s) + "]" if s is not None else "[]"


def fmt_tuple(s) -> str:
    return "(" + ",".join(str(d) for d in s) + ")" if s is not None else "()"


@dataclass
class Typing:
    graph: IndexedGraph
    shapes: list[Any]          # per entry: tuple (with -1 unknown dims) or None
    dtypes: list[Any]          # per entry: np.dtype or None

    def shape_of(self, entry) -> Any:
        return self.shapes[self.graph.eid(entry)]

    def dtype_of(self, entry) -> Any:
        return self.dtypes[self.graph.eid(entry)]

    def node_shape(self, node: Node, index: int = 0):
        return self.shapes[self.graph.row_ptr[self.graph.nid(node)] + index]

    def node_dtype(self, node: Node, index: int = 0):
        return self.dtypes[self.graph.row_ptr[self.graph.nid(node)] + index]

    def complete_shapes(self) -> bool:
        return all(known(s) for s in self.shapes)

    def complete_dtypes(self) -> bool:
        return all(d is not None for d in self.dtypes)


def _variable_shape(node: Node):
    raw = node.attrs.get("__shape__")
    if not raw:
        return None
    import ast
    v = ast.literal_eval(raw)
    v = (v,) if isinstance(v, int) else tuple(v)
    if not v:
        return None
    return tuple(-1 if d in (0, -1, None) else int(d) for d in v)


def _variable_dtype(node: Node):
    raw = node.attrs.get("__dtype__")
    if raw is None:
        return None
    return np.dtype(DTYPE_CODES[int(raw)]) if raw.lstrip("-").isdigit() else np.dtype(raw)


def _fixed_point(g: IndexedGraph, values: list, rule_of: Callable[[Node], Any], merge_fn, what: str) -> None:
    changed = True
    order = list(range(len(g.nodes)))
    while changed:
        changed = False
        for sweep in (order, order[::-1]):
            for nid in sweep:
                node = g.nodes[nid]
                if node.op is None:
                    continue
                in_ids = [g.eid(e) for e in node.inputs]
                out_ids = list(range(g.row_ptr[nid], g.row_ptr[nid + 1]))
                ins = [values[i] for i in in_ids]
                outs = [values[i] for i in out_ids]
                rule = _backward_rule(g, node, values) if node.op.forward_op is not None else rule_of(node)
                if rule is None:
                    raise AotexecError(f"Operator {node.op.name} has no {what} inference rule (node {node.name})")
                # a recomputed copy's extra inputs are its forward node's kept outputs (passes.mirror)
                k = len(node.op.input_names(node.params)) if node.mirror_of is not None else len(ins)
                try:
                    new_ins, new_outs = rule(node.params, ins[:k], outs)
                    new_ins = list(new_ins) + ins[k:]
                except AotexecError:
                    raise
                except IncompatibleAttr as e:
                    raise AotexecError(f"Error in operator {node.name}: {e.message(node.name)}") from None
                except (ValueError, IndexError, ZeroDivisionError, TypeError) as e:
                    raise AotexecError(f"Error in operator {node.name}: {e}\n  while inferring the {what} of "
                                       f"{node.format()} with inputs {ins}") from None
                for ids, old, new in ((in_ids, ins, new_ins), (out_ids, outs, new_outs)):
                    for k, (i, a, b) in enumerate(zip(ids, old, new)):
                        m = merge_fn(node, values[i], b)
                        # identity first: np.dtype(...) == None is True (np.dtype(None) is float64)
                        if (m is None) != (values[i] is None) or (m is not None and _differs(m, values[i])):
                            values[i] = m
                            changed = True


def _differs(new, old) -> bool:
    """A shape that gained a constant where it had a symbolic dimension differs (``symbolic``)."""
    if isinstance(new, tuple) and isinstance(old, tuple) and len(new) == len(old):
        return any(type(a) is not type(b) or a != b for a, b in zip(new, old))
    return new != old


def _backward_rule(g: IndexedGraph, node: Node, values: list):
    """A backward node's outputs are typed like its forward node's (non-aux, then aux) inputs."""
    fwd = node.control_deps[0]
    aux = fwd.aux_positions()
    order = [i for i in range(len(fwd.inputs)) if i not in aux] + aux[:fwd.op.aux_updates]

    def rule(p, ins, outs):
        return ins, [values[g.eid(fwd.inputs[i])] for i in order]
    return rule


def _merge_shape(node: Node, current, inferred):
    try:
        return merge(current, inferred)
    except ValueError:
        raise AotexecError(f"Error in operator {node.name}: Shape inconsistent, Provided = "
                           f"{fmt_shape(current)}, inferred shape={fmt_tuple(inferred)}") from None


def _merge_dtype(node: Node, current, inferred):
    if inferred is None:
        return current
    inferred = np.dtype(inferred)
    if current is not None and current != inferred:
        raise AotexecError(f"Error in operator {node.name}: Type inconsistent, Provided = {current}, "
                           f"inferred type = {inferred}")
    return inferred


def _given_or_hint(given, hint, complete: Callable[[Any], bool]):
    """MXNet's rule for a variable: a complete value the caller gives wins; otherwise the
    variable's declared ``__shape__`` / ``__dtype__`` (a hint) replaces what was given."""
    if given is not None and complete(given):
        return given
    return hint if hint is not None else given


def infer_shapes(g: IndexedGraph, known_shapes: dict[str, tuple] | None = None) -> list:
    """Shapes of every entry; ``known_shapes`` maps variable names to (partial) shapes."""
    values: list = [None] * g.num_entries
    known_shapes = known_shapes or {}
    for nid, node in enumerate(g.nodes):
        if node.op is None:
            values[g.row_ptr[nid]] = _given_or_hint(known_shapes.get(node.name), _variable_shape(node), known)
    _fixed_point(g, values, lambda n: n.op.infer_shape, _merge_shape, "shape")
    return values


def infer_dtypes(g: IndexedGraph, known_dtypes: dict[str, Any] | None = None) -> list:
    values: list = [None] * g.num_entries
    known_dtypes = known_dtypes or {}
    for nid, node in enumerate(g.nodes):
        if node.op is None:
            given = known_dtypes.get(node.name)
            values[g.row_ptr[nid]] = _given_or_hint(None if given is None else np.dtype(given),
                                                    _variable_dtype(node), lambda d: True)
    _fixed_point(g, values, lambda n: n.op.infer_type, _merge_dtype, "type")
    return values


def infer(g: IndexedGraph, shapes: dict[str, tuple] | None = None,
          dtypes: dict[str, Any] | None = None) -> Typing:
    return Typing(g, infer_shapes(g, shapes), infer_dtypes(g, dtypes))
