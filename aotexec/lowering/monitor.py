"""Monitor builds: ``flow.tensor.trace`` ops named as MXNet's monitor names node inputs and
outputs (a separate debug build: traces stop fusion).
"""
from __future__ import annotations

from ..emitter import Emitter, Value
from ..graph import Node


def monitor_input_name(node: Node, pos: int) -> str:
    """MXNet's monitor name of a node input: ``fc1_data``, ``relu1_input0``, ``fc1_backward_input1``."""
    if node.op.forward_op is not None or not node.op.listed_inputs:
        return f"{node.name}_input{pos}"
    return f"{node.name}_{node.input_names()[pos]}"


def monitor_output_names(node: Node) -> list[str]:
    """Every output MXNet's executor holds for the node, hidden ones too (``bn_mean``,
    ``lrn_tmp_norm``); not aotexec's aux-update outputs of backward nodes, which MXNet's have not."""
    if node.op.forward_op is not None:
        return [f"{node.name}_{n}" for n in node.output_names() if not n.startswith("aux_update")]
    return [node.entry_name(i) for i in range(node.num_outputs)]


def _trace(b: Emitter, key: str, v: Value) -> None:
    # IREE may run traces out of program order; the sequence prefix restores it (Program._trace)
    seq = b.extra_count = getattr(b, "extra_count", 0) + 1
    b.lines.append(f'{b.indent}flow.tensor.trace "{seq:06d}|{key}" = [{v.name} : {v.type}] loc("{b.loc}")')


def trace_inputs(b: Emitter, node: Node, ins: list[Value]) -> None:
    """monitor_all: each input a node reads (a variable also under its own name)."""
    b.loc = node.name
    for pos, (e, v) in enumerate(zip(node.inputs, ins)):
        if v.name == "%unused":
            continue
        if e.node.is_variable:
            _trace(b, e.node.name, v)
        _trace(b, monitor_input_name(node, pos), v)


def trace_outputs(b: Emitter, node: Node, res: list[Value | None]) -> list[Value | None]:
    """The node's outputs, each behind a barrier and traced."""
    # one dispatch per node, like MXNet without op bulking; tracing a value that is
    # fused into its consumer miscompiles in IREE 3.13 (workgroup distribution error)
    b.loc = node.name
    res = [None if v is None else b.op("stablehlo.optimization_barrier", [v], v.shape, v.dtype) for v in res]
    for k, key in enumerate(monitor_output_names(node)):
        if res[k] is not None:
            _trace(b, key, res[k])
    return res
