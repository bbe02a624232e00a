"""Graph IR: nodes, entries and the indexed (topologically ordered) view.

A ``Node`` is a variable (``op is None``) or an operator application; an
``Entry`` is one output of a node.  ``IndexedGraph`` numbers nodes in nnvm's
post-order DFS (inputs in order, then control dependencies), which fixes the
order of ``list_arguments()``, the JSON node list and execution.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, NamedTuple

if TYPE_CHECKING:       # a node's op is an OpDef; the graph needs nothing else of ops/
    from .ops.registry import OpDef


@dataclass(eq=False)
class Node:
    op: OpDef | None
    name: str
    attrs: dict[str, str] = field(default_factory=dict)   # raw MXNet attrs, hidden keys included
    inputs: list["Entry"] = field(default_factory=list)
    params: Any = None                                      # parsed op parameters
    control_deps: list["Node"] = field(default_factory=list)
    mirror_of: "Node | None" = None                         # set on passes.mirror's recomputed copies

    @property
    def is_variable(self) -> bool:
        return self.op is None

    @property
    def op_name(self) -> str:
        return "null" if self.op is None else self.op.name

    @property
    def num_outputs(self) -> int:
        return 1 if self.op is None else len(self.op.output_names(self.params))

    @property
    def num_visible_outputs(self) -> int:
        return 1 if self.op is None else self.op.visible_outputs(self.params)

    def output_names(self) -> list[str]:
        return ["output"] if self.op is None else self.op.output_names(self.params)

    def input_names(self) -> list[str]:
        return [] if self.op is None else self.op.input_names(self.params)

    def aux_positions(self) -> list[int]:
        if self.op is None:
            return []
        names = self.input_names()
        return [names.index(a) for a in self.op.aux_names(self.params)]

    def entry_name(self, index: int) -> str:
        """MXNet's output naming: a variable is its name, op outputs are ``<node>_<output>``."""
        if self.op is None:
            return self.name
        out = self.output_names()[index]
        return f"{self.name}_{out}" if self.name else out

    def format(self) -> str:
        """One line per node (torch.fx style), used in error messages."""
        if self.op is None:
            return f"%{self.name} = Variable()"
        ins = ", ".join(f"%{e.node.name}" + (f"[{e.index}]" if e.node.num_outputs > 1 else "")
                        for e in self.inputs)
        shown = {k: v for k, v in self.attrs.items() if not k.startswith("__")}
        attrs = " {" + ", ".join(f"{k}={v}" for k, v in sorted(shown.items())) + "}" if shown else ""
        return f"%{self.name} = {self.op.name}({ins}){attrs}"

    def __repr__(self) -> str:
        return f"<Node {self.format()}>"


class Entry(NamedTuple):
    node: Node
    index: int = 0

    @property
    def name(self) -> str:
        return self.node.entry_name(self.index)


def dfs_post_order(heads: Iterable[Entry | Node]) -> list[Node]:
    """nnvm's PostOrderDFSVisit, iterative so deep graphs don't hit the recursion limit."""
    order: list[Node] = []
    seen: set[int] = set()
    for head in heads:
        root = head.node if isinstance(head, Entry) else head
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            node, i = stack[-1]
            children = len(node.inputs) + len(node.control_deps)
            if i < children:
                stack[-1] = (node, i + 1)
                child = node.inputs[i].node if i < len(node.inputs) else node.control_deps[i - len(node.inputs)]
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, 0))
            else:
                stack.pop()
                order.append(node)
    return order


class IndexedGraph:
    """Nodes in topological order with integer ids for nodes and entries."""

    def __init__(self, heads: list[Entry]):
        self.heads = list(heads)
        self.nodes = dfs_post_order(self.heads)
        self.node_id = {id(n): i for i, n in enumerate(self.nodes)}
        self.row_ptr = [0]
        for n in self.nodes:
            self.row_ptr.append(self.row_ptr[-1] + n.num_outputs)
        mutable: set[int] = set()
        for n in self.nodes:
            for pos in n.aux_positions():
                mutable.add(id(n.inputs[pos].node))
        self.aux_ids = mutable

    def nid(self, node: Node) -> int:
        return self.node_id[id(node)]

    def eid(self, entry: Entry) -> int:
        return self.row_ptr[self.node_id[id(entry.node)]] + entry.index

    @property
    def num_entries(self) -> int:
        return self.row_ptr[-1]

    def variables(self) -> list[Node]:
        return [n for n in self.nodes if n.is_variable]

    def arguments(self) -> list[Node]:
        return [n for n in self.nodes if n.is_variable and id(n) not in self.aux_ids]

    def aux_states(self) -> list[Node]:
        return [n for n in self.nodes if n.is_variable and id(n) in self.aux_ids]

    def __str__(self) -> str:
        return "\n".join(n.format() for n in self.nodes) + "\nheads: " + ", ".join(h.name for h in self.heads)

    def lint(self) -> None:
        """Cheap structural checks: topological order, unique names, input counts."""
        from .base import AotexecError
        seen_names: dict[str, Node] = {}
        for i, n in enumerate(self.nodes):
            for e in n.inputs:
                if self.node_id[id(e.node)] >= i:
                    raise AotexecError(f"graph not topologically ordered at {n.format()}\n{self}")
                if e.index >= e.node.num_outputs:
                    raise AotexecError(f"{n.format()} reads output {e.index} of {e.node.name}, which has {e.node.num_outputs}")
            if n.op is not None and len(n.inputs) != len(n.input_names()):
                raise AotexecError(f"{n.format()}: {n.op.name} expects {len(n.input_names())} inputs "
                                   f"({', '.join(n.input_names())}), got {len(n.inputs)}")
            if n.is_variable and n.name in seen_names and seen_names[n.name] is not n:
                raise AotexecError(f"two different variables are named '{n.name}'\n{self}")
            if n.is_variable:
                seen_names[n.name] = n
