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
from ..graph import Entry, Node
from ..emitter import Emitter, Value
from ..ops.nhwc import TO_NCHW, ChannelsLast
from ..ops.registry import draws_random, reads_value
from ..passes import layout
from ..passes.infer import Typing
from ..signature import RESIDENT_SCOPE


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


def uses_rng(typing: Typing, outputs: Sequence[Entry], provided: Sequence[Entry | Node], is_train: bool) -> bool:
    """Whether ``lower_function`` adds the trailing ``rng`` parameter."""
    values = {(id(e.node), e.index) if isinstance(e, Entry) else (id(e), 0): None for e in provided}
    needed = _needed_nodes(outputs, values)
    return any(id(n) in needed and draws_random(n, is_train) for n in typing.graph.nodes)


def monitor_input_name(node: Node, pos: int) -> str:
    """MXNet's monitor name of a node input: ``fc1_data``, ``relu1_input0``, ``fc1_backward_input1``."""
    if node.op.forward_op is not None or not node.op.listed_inputs:
        return f"{node.name}_input{pos}"
    return f"{node.name}_{node.input_names()[pos]}"


def monitor_output_names(node: Node) -> list[str]:
    if node.op.forward_op is not None:
        return [f"{node.name}_{n}" for n in node.output_names()]
    return [node.entry_name(i) for i in range(node.num_visible_outputs)]


def _trace(b: Emitter, key: str, v: Value) -> None:
    # IREE may run traces out of program order; the sequence prefix restores it (Program._trace)
    seq = b.extra_count = getattr(b, "extra_count", 0) + 1
    b.lines.append(f'{b.indent}flow.tensor.trace "{seq:06d}|{key}" = [{v.name} : {v.type}] loc("{b.loc}")')


def lower_channels_last(b: Emitter, node: Node, variant: ChannelsLast, ins: list[Value], in_nhwc: list[bool],
                        typing: Typing, is_train: bool, rng_state: Value | None, lay: layout.Layouts) -> list:
    """``node`` lowered by the channels-last ``variant`` its op's rule chose (``passes.layout``)."""
    g = typing.graph
    nid = g.nid(node)
    logical = [typing.shapes[i] for i in range(g.row_ptr[nid], g.row_ptr[nid + 1])]
    phys = [layout.physical(s, lay.of(node, k)) for k, s in enumerate(logical)]
    return lower_node(b, node, ins, typing, is_train, rng_state, params=variant.params, out_shapes=phys,
                      lower=variant.lower, in_nhwc=in_nhwc)


def lower_function(name: str, typing: Typing, inputs: Sequence[Entry | Node], outputs: Sequence[Entry],
                   is_train: bool = False, add_to: Sequence[int] = (), monitor: str | None = None,
                   output_args: bool = False, layouts: layout.Layouts | None = None,
                   physical_outputs: Sequence[int] = (), alias_early: Sequence[int] = (),
                   reductions: str = "blocks", resident: Sequence[int] = ()) -> str:
    """A ``func.func @name`` taking ``inputs`` (variables or entries) and returning ``outputs``.

    ``monitor`` ("outputs" | "all") adds ``flow.tensor.trace`` ops named as MXNet's
    monitor names them, in execution order (a separate debug build: traces stop fusion).

    For each output index in ``add_to`` one more parameter (typed like that output)
    follows the inputs and is added to it: grad_req 'add' returns old + computed.

    ``output_args``: planned buffers at the IREE ABI.  One parameter per output marked
    ``iree.abi.output`` receives that result in caller-owned storage, and a last
    ``!hal.buffer`` parameter marked ``iree.abi.transients`` holds every intermediate,
    so a steady-state call allocates nothing.  Parameter order: inputs, ``add_to``
    extras, ``rng``, outputs, transients.

    ``alias_early``: outputs whose storage is bound (``hal.tensor.alias``) right where they
    are computed, and that later nodes read from there.  IREE 3.13 only writes a result
    straight into caller storage when that is its one use (EmplaceAllocations); a saved
    activation the next layer also reads was computed in the transient arena and copied out
    at the end, so every one of them counted in the arena.  Only for outputs whose storage
    aliases no input (the executor's own result and residual buffers).

    ``reductions``: how reductions are emitted (``emitter.REDUCTIONS``, ``Emitter.reduce``).

    ``resident``: inputs (by position) read from IREE parameters (``util.global`` with a
    ``#flow.parameter.named<"aotexec"::"p<k>">`` initial value, k counting the resident inputs
    in order) instead of function arguments.  IREE hoists what depends on them alone (weight
    packing, layout transposes) into the module's initializer, run once per parameter set
    instead of on every call (``Program.bind_parameters``, ``Executor._resident_module``).
    """
    b = Emitter(reductions=reductions)
    lay = layouts or layout.Layouts()
    values: dict[tuple[int, int], Value] = {}
    nchw: dict[tuple[int, int], Value] = {}          # NCHW copies of channels-last values

    def as_nchw(key: tuple[int, int], v: Value) -> Value:
        if key not in lay.nhwc or v.name == "%unused":
            return v
        if key not in nchw:
            nchw[key] = b.transpose(v, TO_NCHW)
        return nchw[key]

    params = []
    arg_values = []
    globals_ = []
    for i, inp in enumerate(inputs):
        e = Entry(inp) if isinstance(inp, Node) else inp
        shape = layout.physical(typing.shape_of(e), lay.of(e.node, e.index))
        if i in resident:
            k = len(globals_)
            v = Value(f"%argp{k}", shape, np.dtype(typing.dtype_of(e)))
            globals_.append(f'  util.global private @{name}_p{k} = #flow.parameter.named<"{RESIDENT_SCOPE}"::"p{k}"> '
                            f': {v.type}')
            b.prologue.append(f"{b.indent}{v.name} = util.global.load @{name}_p{k} : {v.type}")
        else:
            v = Value(f"%arg{i}", shape, np.dtype(typing.dtype_of(e)))
            params.append(f"%arg{i}: {v.type}")
        values[(id(e.node), e.index)] = v
    for k, out_idx in enumerate(add_to):
        e = outputs[out_idx]
        v = Value(f"%arg{len(inputs) + k}", tuple(typing.shape_of(e)), np.dtype(typing.dtype_of(e)))
        arg_values.append(v)
        params.append(f"{v.name}: {v.type}")
    needed = _needed_nodes(outputs, values)
    read = {(id(e.node), e.index) for e in outputs} | {
        (id(e.node), e.index) for n in typing.graph.nodes if id(n) in needed for e in n.inputs}
    early: dict[tuple[int, int], int] = {}
    if output_args:
        for i in alias_early:
            e = outputs[i]
            key = (id(e.node), e.index)
            if (key not in early and key not in values and i not in add_to
                    and (i in physical_outputs or key not in lay.nhwc)):
                early[key] = i
    latest: Value | None = None        # the last value a node (not a recomputation) produced
    rng_state = None
    if any(id(n) in needed and draws_random(n, is_train) for n in typing.graph.nodes):
        rng_state = Value(f"%arg{len(params)}", (2,), np.dtype("uint64"))
        params.append(f"{rng_state.name}: {rng_state.type}")
    for node in typing.graph.nodes:
        if node.op is None or id(node) not in needed:
            continue
        ins = []
        for pos, e in enumerate(node.inputs):
            v = values.get((id(e.node), e.index))
            if v is None and not reads_value(node, pos):
                v = Value("%unused", tuple(typing.shape_of(e)), np.dtype(typing.dtype_of(e)))
            if v is None:
                raise AotexecError(f"entry point {name}: node '{node.name}' reads {e.name}, which is neither "
                                   "an input of the entry point nor computed in it")
            ins.append(v)
        if monitor == "all":
            b.loc = node.name
            for pos, (e, v) in enumerate(zip(node.inputs, ins)):
                if v.name == "%unused":
                    continue
                if e.node.is_variable:
                    _trace(b, e.node.name, v)
                _trace(b, monitor_input_name(node, pos), v)
        if node.mirror_of is not None and latest is not None:
            # a recomputation waits for the backward pass to reach it (IREE would run it as
            # soon as its saved inputs are ready, holding the result until its late reader)
            k = next((k for k, v in enumerate(ins) if v.name != "%unused"), None)
            if k is not None:
                ins[k] = b.after(ins[k], latest)
        variant = lay.variants.get(id(node))
        if variant is not None:
            res = lower_channels_last(b, node, variant, ins, [lay.of(e.node, e.index) for e in node.inputs],
                                      typing, is_train, rng_state, lay)
        else:
            b.loc = node.name
            ins = [as_nchw((id(e.node), e.index), v) for e, v in zip(node.inputs, ins)]
            res = lower_node(b, node, ins, typing, is_train, rng_state,
                             unused=frozenset() if monitor else  # a monitor sees every output
                             frozenset(k for k in range(node.num_outputs) if (id(node), k) not in read))
        if monitor:
            # one dispatch per node, like MXNet without op bulking; tracing a value that is
            # fused into its consumer miscompiles in IREE 3.13 (workgroup distribution error)
            b.loc = node.name
            res = [None if v is None else b.op("stablehlo.optimization_barrier", [v], v.shape, v.dtype)
                   for v in res]
            for k, key in enumerate(monitor_output_names(node)):
                if res[k] is not None:
                    _trace(b, key, res[k])
        if node.mirror_of is None and res and res[0] is not None:
            latest = res[0]
        for k, v in enumerate(res):
            if v is not None:
                i = early.get((id(node), k))
                if i is not None:
                    b.loc = node.name
                    v = b.alias(v, f"%out{i}")
                values[(id(node), k)] = v
    results = []
    for i, e in enumerate(outputs):
        v = values.get((id(e.node), e.index))
        if v is None:
            raise AotexecError(f"entry point {name}: output {e.name} was not computed")
        if i not in physical_outputs:
            b.loc = e.node.name
            v = as_nchw((id(e.node), e.index), v)
        if i in add_to:
            b.loc = e.node.name
            v = b.add(arg_values[list(add_to).index(i)], v)
        results.append(v)
    if output_args:
        aliased = set(early.values())
        params += [f"%out{i}: !hal.buffer_view" if i in aliased else f"%out{i}: {v.type} {{iree.abi.output = {i} : index}}"
                   for i, v in enumerate(results)]
        params.append("%transients: !hal.buffer {iree.abi.transients}")
    b.loc = name
    b.lines.append(f'    "func.return"({", ".join(v.name for v in results)}) : '
                   f'({", ".join(v.type for v in results)}) -> () loc("{name}")')
    sig = ", ".join(params)
    rtypes = ", ".join(v.type for v in results)
    return "".join(g + "\n" for g in globals_) + f"  func.func @{name}({sig}) -> ({rtypes}) {{\n" + \
        "\n".join(b.body()) + "\n  }"


def _needed_nodes(outputs: Sequence[Entry], provided: dict[tuple[int, int], Value]) -> set[int]:
    """Nodes that must be computed: walk back from the outputs, stopping at provided entries."""
    need: set[int] = set()
    stack = [e for e in outputs]
    while stack:
        e = stack.pop()
        if (id(e.node), e.index) in provided or id(e.node) in need:
            continue
        need.add(id(e.node))
        for pos, i in enumerate(e.node.inputs):
            if not reads_value(e.node, pos):
                continue
            stack.append(i)
    return need


def module_text(functions: Sequence[str]) -> str:
    return "module {\n" + "\n".join(functions) + "\n}\n"
