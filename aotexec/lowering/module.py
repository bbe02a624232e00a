"""Graph -> StableHLO module: one ``func.func`` per entry point.

Reads: the IndexedGraph, its Typing (shapes and dtypes of every entry), the layout pass's
channels-last assignment and each op's ``lower`` rule (``lowering.node``).  Produces MLIR
text; ``compiler.verify_mlir`` checks it before IREE compiles it, and every op carries
``loc("<node name>")``.
"""
from __future__ import annotations

import dataclasses

from typing import Sequence

import numpy as np

from ..base import AotexecError
from ..emitter import RESIDENT_ARG, Emitter, Value, mlir_string
from ..graph import Entry, Node
from ..kernels import epilogue as kernel_epilogue
from ..kernels import concat as kernel_concat
from ..kernels import executable as kernel_executable
from ..kernels.code import Kernels
from ..ops.nhwc import TO_NCHW
from ..ops.registry import draws_random, reads_value
from ..passes import layout
from ..passes.infer import Typing
from ..signature import RESIDENT_SCOPE
from .monitor import monitor_input_name, monitor_output_names, trace_inputs, trace_outputs
from .node import LowerCtx, lower_channels_last, lower_node

__all__ = ["LowerCtx", "lower_function", "lower_node", "module_text", "monitor_input_name",
           "monitor_output_names", "uses_rng"]

Key = tuple[int, int]            # (id(node), output index): an entry


class FunctionBuilder:
    """One ``func.func`` being emitted: its parameters (and resident globals), the values of
    the entries computed so far, and the NCHW copies made of channels-last values."""

    def __init__(self, name: str, typing: Typing, lay: layout.Layouts, reductions: str, target: str = "llvm-cpu",
                 fenced_pointwise: bool = False, kernels: Kernels | None = None):
        self.name, self.typing, self.lay = name, typing, lay
        self.b = Emitter(reductions=reductions, target=target, fenced_pointwise=fenced_pointwise, kernels=kernels)
        self.values: dict[Key, Value] = {}
        self.nchw: dict[Key, Value] = {}
        self.params: list[str] = []
        self.globals: list[str] = []

    def _value(self, name: str, e: Entry, shape) -> Value:
        return Value(name, shape, np.dtype(self.typing.dtype_of(e)))

    def bind_inputs(self, inputs: Sequence[Entry | Node], resident: Sequence[int]) -> None:
        """Arguments ``%arg<i>`` (channels-last ones in their physical shape); a resident input
        is loaded from its ``util.global`` parameter instead."""
        b = self.b
        for i, inp in enumerate(inputs):
            e = Entry(inp) if isinstance(inp, Node) else inp
            shape = layout.physical(self.typing.shape_of(e), self.lay.of(e.node, e.index))
            if i in resident:
                k = len(self.globals)
                v = self._value(f"{RESIDENT_ARG}{k}", e, shape)
                # keyed by variable name: the artifact's params.irpa serves IREE's tools too
                self.globals.append(f'  util.global private @{self.name}_p{k} = #flow.parameter.named<'
                                    f'"{RESIDENT_SCOPE}"::"{mlir_string(e.node.name)}"> : {v.type}')
                b.prologue.append(f"{b.indent}{v.name} = util.global.load @{self.name}_p{k} : {v.type}")
            else:
                v = self._value(f"%arg{i}", e, shape)
                self.params.append(f"%arg{i}: {v.type}")
                b.register_dims(v)
            self.values[(id(e.node), e.index)] = v

    def add_to_args(self, outputs: Sequence[Entry], add_to: Sequence[int], first: int) -> list[Value]:
        """grad_req 'add': one argument per output in ``add_to``, the old value it is added to."""
        old = []
        for k, out_idx in enumerate(add_to):
            e = outputs[out_idx]
            v = self._value(f"%arg{first + k}", e, tuple(self.typing.shape_of(e)))
            old.append(v)
            self.params.append(f"{v.name}: {v.type}")
            self.b.register_dims(v)
        return old

    def rng_arg(self) -> Value:
        """The (seed, counter) state random ops draw from, after the other arguments."""
        v = Value(f"%arg{len(self.params)}", (2,), np.dtype("uint64"))
        self.params.append(f"{v.name}: {v.type}")
        return v

    def as_nchw(self, key: Key, v: Value) -> Value:
        """``v`` in the logical layout: one transposed copy per channels-last entry."""
        if key not in self.lay.nhwc or v.name == "%unused":
            return v
        if key not in self.nchw:
            self.nchw[key] = self.b.transpose(v, TO_NCHW)
        return self.nchw[key]

    def node_inputs(self, node: Node) -> list[Value]:
        """The values ``node`` reads; an input read for its shape only is a placeholder."""
        ins = []
        for pos, e in enumerate(node.inputs):
            v = self.values.get((id(e.node), e.index))
            if v is None and not reads_value(node, pos):
                v = self._value("%unused", e, tuple(self.typing.shape_of(e)))
            if v is None:
                raise AotexecError(f"entry point {self.name}: node '{node.name}' reads {e.name}, which is neither "
                                   "an input of the entry point nor computed in it")
            ins.append(v)
        return ins

    def lower(self, node: Node, ins: list[Value], is_train: bool, rng: Value | None,
              unused: frozenset[int]) -> list[Value | None]:
        """By the channels-last variant the layout pass chose (inputs as stored), else by the
        op's rule on NCHW inputs."""
        variant = self.lay.variants.get(id(node))
        if variant is not None:
            return lower_channels_last(self.b, node, variant, ins, [self.lay.of(e.node, e.index) for e in node.inputs],
                                       self.typing, is_train, rng, self.lay)
        self.b.loc = node.name
        ins = [self.as_nchw((id(e.node), e.index), v) for e, v in zip(node.inputs, ins)]
        return lower_node(self.b, node, ins, self.typing, is_train, rng, unused=unused)

    def store(self, node: Node, res: list[Value | None], early: dict[Key, int]) -> None:
        """Record the node's outputs; one bound early to its output argument is read from there."""
        for k, v in enumerate(res):
            if v is not None:
                i = early.get((id(node), k))
                if i is not None:
                    self.b.loc = node.name
                    v = self.b.alias(v, f"%out{i}")
                self.values[(id(node), k)] = v

    def results(self, outputs: Sequence[Entry], physical_outputs: Sequence[int], add_to: Sequence[int],
                old: list[Value]) -> list[Value]:
        """The returned values: NCHW unless physical, plus the old value for grad_req 'add'."""
        results = []
        for i, e in enumerate(outputs):
            v = self.values.get((id(e.node), e.index))
            if v is None:
                raise AotexecError(f"entry point {self.name}: output {e.name} was not computed")
            if i not in physical_outputs:
                self.b.loc = e.node.name
                v = self.as_nchw((id(e.node), e.index), v)
            if i in add_to:
                self.b.loc = e.node.name
                v = self.b.add(old[list(add_to).index(i)], v)
            results.append(v)
        return results

    def output_params(self, results: list[Value], aliased: set[int]) -> None:
        """Planned buffers: an output argument per result (a buffer view when bound early),
        then the transient arena."""
        self.params += [f"%out{i}: !hal.buffer_view" if i in aliased
                        else f"%out{i}: {v.type} {{iree.abi.output = {i} : index}}" for i, v in enumerate(results)]
        # IREE 3.13's EmplaceTransients breaks dominance ("operand #1 does not dominate this use")
        # placing allocations made inside loops: a function with a loop keeps the parameter but
        # no arena (IREE allocates its intermediates per call)
        arena = "" if self.b.loops else " {iree.abi.transients}"
        self.params.append(f"%transients: !hal.buffer{arena}")

    def text(self, results: list[Value]) -> str:
        b, name = self.b, self.name
        b.loc = name
        b.lines.append(f'    "func.return"({", ".join(v.name for v in results)}) : '
                       f'({", ".join(v.type for v in results)}) -> () loc("{name}")')
        kernel_epilogue.fuse(b)
        kernel_concat.write_in_place(b)
        sig = ", ".join(self.params)
        rtypes = ", ".join(v.type for v in results)
        return "".join(g + "\n" for g in self.globals) + f"  func.func @{name}({sig}) -> ({rtypes}) {{\n" + \
            "\n".join(b.body()) + "\n  }"


def lower_function(name: str, typing: Typing, inputs: Sequence[Entry | Node], outputs: Sequence[Entry],
                   is_train: bool = False, add_to: Sequence[int] = (), monitor: str | None = None,
                   output_args: bool = False, layouts: layout.Layouts | None = None,
                   physical_outputs: Sequence[int] = (), alias_early: Sequence[int] = (),
                   reductions: str = "blocks", resident: Sequence[int] = (), target: str = "llvm-cpu",
                   fenced_pointwise: bool = False, kernels: Kernels | None = None) -> str:
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

    ``reductions``: how reductions are emitted (``emitter.REDUCTIONS``, ``Emitter.reduce``);
    ``fenced_pointwise``: ``Emitter.fenced_pointwise`` (both forms of
    ``pipeline.program.compile_with_fallback``); ``kernels``: ``Emitter.kernels`` (the module
    then needs ``module_text``'s executable of them).
    ``target``: the IREE target the module is for (``Emitter.target``: rules avoid its
    miscompiles, e.g. grouped convolutions run one per group on Vulkan).

    ``resident``: inputs (by position) read from IREE parameters (``util.global`` with a
    ``#flow.parameter.named<"aotexec"::"<variable name>">`` initial value) instead of function
    arguments.  IREE hoists what depends on them alone (weight
    packing, layout transposes) into the module's initializer, run once per parameter set
    instead of on every call (``Program.bind_parameters``, ``Executor._resident_module``).
    """
    if kernels is not None and not is_train:
        kernels = dataclasses.replace(kernels, epilogues=True)
    fb = FunctionBuilder(name, typing, layouts or layout.Layouts(), reductions, target, fenced_pointwise, kernels)
    fb.bind_inputs(inputs, resident)
    old = fb.add_to_args(outputs, add_to, first=len(inputs))
    needed = _needed_nodes(outputs, fb.values)
    early = _early_aliases(outputs, alias_early, fb.values, add_to, physical_outputs, fb.lay) if output_args else {}
    rng = fb.rng_arg() if any(id(n) in needed and draws_random(n, is_train) for n in typing.graph.nodes) else None
    _lower_nodes(fb, outputs, needed, is_train, rng, monitor, early)
    results = fb.results(outputs, physical_outputs, add_to, old)
    if output_args:
        fb.output_params(results, set(early.values()))
    return fb.text(results)


def _lower_nodes(fb: FunctionBuilder, outputs: Sequence[Entry], needed: set[int], is_train: bool,
                 rng: Value | None, monitor: str | None, early: dict[Key, int]) -> None:
    """Every needed node in execution order."""
    graph = fb.typing.graph
    read = {(id(e.node), e.index) for e in outputs} | {
        (id(e.node), e.index) for n in graph.nodes if id(n) in needed for e in n.inputs}
    latest: Value | None = None        # the last value a node (not a recomputation) produced
    for node in graph.nodes:
        if node.op is None or id(node) not in needed:
            continue
        ins = fb.node_inputs(node)
        if monitor == "all":
            trace_inputs(fb.b, node, ins)
        if node.mirror_of is not None and latest is not None:
            _wait_for(fb.b, ins, latest)
        unused = frozenset() if monitor else \
            frozenset(k for k in range(node.num_outputs) if (id(node), k) not in read)   # a monitor sees every output
        res = fb.lower(node, ins, is_train, rng, unused)
        if monitor:
            res = trace_outputs(fb.b, node, res)
        if node.mirror_of is None and res and res[0] is not None:
            latest = res[0]
        fb.store(node, res, early)


def _wait_for(b: Emitter, ins: list[Value], latest: Value) -> None:
    """A recomputation waits for the backward pass to reach it (IREE would run it as soon as
    its saved inputs are ready, holding the result until its late reader)."""
    k = next((k for k, v in enumerate(ins) if v.name != "%unused"), None)
    if k is not None:
        ins[k] = b.after(ins[k], latest)


def _early_aliases(outputs: Sequence[Entry], alias_early: Sequence[int], inputs: dict[Key, Value],
                   add_to: Sequence[int], physical_outputs: Sequence[int], lay: layout.Layouts) -> dict[Key, int]:
    """Entry -> the output argument it is bound to where computed (``alias_early``): not an
    input, not added to, and stored as returned."""
    early: dict[Key, int] = {}
    for i in alias_early:
        e = outputs[i]
        key = (id(e.node), e.index)
        if (key not in early and key not in inputs and i not in add_to
                and (i in physical_outputs or key not in lay.nhwc)):
            early[key] = i
    return early


def uses_rng(typing: Typing, outputs: Sequence[Entry], provided: Sequence[Entry | Node], is_train: bool) -> bool:
    """Whether ``lower_function`` adds the trailing ``rng`` parameter."""
    values = {(id(e.node), e.index) if isinstance(e, Entry) else (id(e), 0): None for e in provided}
    needed = _needed_nodes(outputs, values)
    return any(id(n) in needed and draws_random(n, is_train) for n in typing.graph.nodes)


def _needed_nodes(outputs: Sequence[Entry], provided: dict[Key, Value]) -> set[int]:
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


def module_text(functions: Sequence[str], kernels: Kernels | None = None) -> str:
    """The module of ``functions``, with the kernels' executable if one of them calls it."""
    used = kernels is not None and any(kernel_executable.uses_kernels(f) for f in functions)
    return "module {\n" + (kernel_executable.executable_text(kernels) if used else "") + "\n".join(functions) + "\n}\n"
