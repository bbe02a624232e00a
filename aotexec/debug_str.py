"""``Executor.debug_str()``: the full graph in MXNet's layout (graph_executor.cc).

The text lists the graph's outputs, then every node in execution order
(variables as ``Variable:<name>``, ops with inputs, attributes and control
dependencies), and ends with exactly two lines that tools such as memonger
parse: ``Total N MB allocated`` (from the memory plan) and the TempSpace line.
"""
from __future__ import annotations

from .graph import Entry
from .passes.infer import Typing
from .passes.plan_memory import plan_memory
from .passes.training_graph import training_graph


def full_graph(symbol, typing: Typing, wrt: list[str], policy: str) -> tuple[list[Entry], Typing]:
    """(heads shown as outputs, the typed graph as the executor runs it: forward, and with
    gradients backward with the ``policy``'s recomputed nodes and aux updates)."""
    if not wrt:
        return list(symbol._outputs), typing
    gg, full = training_graph(symbol._outputs, typing, wrt, policy)
    return gg.forward_heads + list(gg.grad_heads.values()), full


def render(symbol, typing: Typing, wrt: list[str], policy: str) -> str:
    shown, full = full_graph(symbol, typing, wrt, policy)
    g = full.graph
    plan = plan_memory(full)
    lines = ["Symbol Outputs:"]
    lines += [f"\toutput[{i}]={e.node.name}({e.index})" for i, e in enumerate(shown)]
    for n in g.nodes:
        if n.op is None:
            lines.append(f"Variable:{n.name}")
            continue
        lines.append("--------------------")
        lines.append(f"Op:{n.op.name}, Name={n.name}")
        lines.append("Inputs:")
        aux = set(n.aux_positions())
        for i, e in enumerate(n.inputs):
            version = f" version={int(i in aux)}" if e.node.is_variable else ""
            lines.append(f"\targ[{i}]={e.node.name}({e.index}){version}")
        attrs = {k: v for k, v in n.attrs.items() if not (k.startswith("__") and k.endswith("__"))}
        if attrs:
            lines.append("Attrs:")
            lines += [f"\t{k}={v}" for k, v in sorted(attrs.items())]
        if n.control_deps:
            lines.append("Control deps:")
            lines += [f"\tcdep[{i}]={c.name}" for i, c in enumerate(n.control_deps)]
    lines.append(f"Total {plan.total_bytes >> 20} MB allocated")
    lines.append("Total 11 TempSpace resource requested")
    return "\n".join(lines) + "\n"
