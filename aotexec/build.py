"""Compile side: typed graph -> entry points -> StableHLO -> IREE vmfb.

Imported lazily (it needs ``iree.compiler``).  Results are memoized in-process
by a graph key (so a repeated ``bind`` skips lowering too) and on disk by the
compile cache in ``compiler.py``.

Entry points (names are the function names in the vmfb):
- ``forward_infer(args, aux) -> outputs``
- ``forward_train(args, aux) -> outputs, residuals``   (activations backward reads)
- ``backward(args, aux, residuals, head_grads, old_grads) -> grads, aux_updates``
- ``train_step(args, aux, head_grads, old_grads) -> outputs, grads, aux_updates``  (one call, no host round trip)
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .compiler import CompileError, CompileOptions, compile_mlir, verify_mlir
from .graph import Entry, IndexedGraph
from .passes import layout
from .lowering.module import lower_function, module_text, uses_rng
from .ops.registry import reads_value
from .passes.gradient import GradientGraph, build_gradient_graph, residuals
from .passes.mirror import mirrored_typing, resolve
from .passes.infer import Typing
from .runtime.program import EntryPoint, ProgramSpec, resident_allowed

_log = logging.getLogger("aotexec.build")
_programs: dict[str, tuple[bytes, ProgramSpec]] = {}
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0}

TRAIN_MODES = ("forward_train", "backward", "train_step")


@dataclass
class TrainingPlan:
    """The full graph and how it splits into forward_train / backward."""
    gg: GradientGraph
    typing: Typing
    residuals: list[Entry]
    head_grads: list[int]            # output indices whose head gradient backward reads
    wrt: list[str]
    add: list[str]                   # arguments with grad_req 'add'


def training_plan(symbol, typing: Typing, reqs: dict[str, str], mirror: bool | str | None = "none") -> TrainingPlan:
    """The full graph (mirrored by the ``mirror`` policy, see ``passes.mirror``) and the
    forward values backward reads: what forward_train returns and backward takes."""
    wrt = [n for n in symbol.list_arguments() if reqs.get(n, "null") != "null"]
    fg = typing.graph
    shapes = {n.name: typing.node_shape(n) for n in fg.variables()}
    dtypes = {n.name: typing.node_dtype(n) for n in fg.variables()}
    gg, full_typing = mirrored_typing(build_gradient_graph(symbol._outputs, wrt), resolve(mirror), shapes, dtypes)
    heads = sorted(gg.head_grad_vars)
    add = [n for n in wrt if reqs[n] == "add"]
    return TrainingPlan(gg, full_typing, residuals(gg, full_typing.graph), heads, wrt, add)


def saved_activation_bytes(symbol, typing: Typing, reqs: dict[str, str], mirror: bool | str | None) -> int:
    """Bytes of the activations forward_train saves for backward (what mirroring reduces)."""
    plan = training_plan(symbol, typing, reqs, mirror)
    from .passes.plan_memory import entry_bytes
    g = plan.typing.graph
    return sum(entry_bytes(plan.typing, g.eid(e)) for e in plan.residuals)


def _sig(name: str, typing: Typing, inputs, in_names, outputs, out_names, rng: bool = False,
         output_args: bool = False, lay: layout.Layouts | None = None, physical_inputs=(),
         physical_outputs=(), resident: Sequence[int] = ()) -> EntryPoint:
    """The signature; residuals stored channels-last (``lay``) have their physical shapes;
    ``resident`` inputs (positions) are IREE parameters, not arguments."""
    def es(x):
        return Entry(x) if not isinstance(x, Entry) else x

    def shape(e: Entry, phys: bool) -> list[int]:
        return list(layout.physical(typing.shape_of(e), phys and lay is not None and lay.of(e.node, e.index)))
    args = [k for k in range(len(inputs)) if k not in resident]
    extra = ([[2]], ["uint64"]) if rng else ([], [])
    return EntryPoint(name=name, inputs=[in_names[k] for k in args] + (["rng"] if rng else []),
                      input_shapes=[shape(es(inputs[k]), k in physical_inputs) for k in args] + extra[0],
                      input_dtypes=[np.dtype(typing.dtype_of(es(inputs[k]))).name for k in args] + extra[1],
                      outputs=list(out_names),
                      output_shapes=[shape(o, k in physical_outputs) for k, o in enumerate(outputs)],
                      output_dtypes=[np.dtype(typing.dtype_of(o)).name for o in outputs],
                      output_args=output_args, resident=[in_names[k] for k in sorted(resident)])


# MXNet names the parameters its layers create <layer>_<suffix>; aux states are parameters too
PARAMETER_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta", "_alpha")


def resident_enabled(opts: CompileOptions) -> bool:
    """Inference on llvm-cpu keeps parameters resident unless AOTEXEC_RESIDENT=0 (to compare,
    or to bisect).  Measured there (docs/PERFORMANCE.md); GPU targets pass them per call."""
    return opts.target == "llvm-cpu" and resident_allowed()


def resident_parameters(symbol, typing: Typing) -> list[str]:
    """The variables an inference program keeps resident (read from IREE parameters, see
    ``lower_function``): aux states and arguments named like layer parameters, not empty.
    The choice only affects speed: the runtime re-reads them whenever they were written."""
    names = [n for n in symbol.list_arguments() if n.endswith(PARAMETER_SUFFIXES)]
    names += symbol.list_auxiliary_states()
    nodes = {n.name: n for n in typing.graph.variables()}
    return [n for n in names if int(np.prod(typing.node_shape(nodes[n]))) > 0]


def _reductions(opts: CompileOptions) -> str:
    """How reductions are emitted (``lowering.emitter.REDUCTIONS``): every one its own dispatch
    on Vulkan, column reductions in row blocks elsewhere (``Emitter.reduce`` says why)."""
    return "split" if opts.target == "vulkan-spirv" else "blocks"


def entry_points(symbol, typing: Typing, modes: Sequence[str], reqs: dict[str, str] | None = None,
                 mirror: bool | str | None = "none", monitor: str | None = None,
                 channels_last: bool = False, reductions: str = "blocks",
                 resident: Sequence[str] = ()) -> tuple[str, ProgramSpec]:
    """MLIR text holding one function per mode, and the signature of each.

    ``channels_last``: 2-D convolution nets run NHWC between convolutions (lowering/layout.py);
    only for llvm-cpu, where it was measured (IREE 3.13's Vulkan backend miscompiled a LeNet
    data gradient in that form).  ``reductions``: ``lowering.emitter.REDUCTIONS``.
    ``resident``: variables ``forward_infer`` reads from IREE parameters (``resident_parameters``);
    such a module needs them at load (``Program.bind_parameters``), so it holds no other mode."""
    lower = functools.partial(lower_function, reductions=reductions)
    planned = monitor is None   # the debug (traced) build returns fresh results instead
    g = typing.graph
    channels_last = channels_last and planned and layout.enabled()
    fwd_lay = layout.assign(g, typing.shape_of, inference=True) if channels_last else None
    variables = g.arguments() + g.aux_states()
    var_names = [n.name for n in variables]
    heads = symbol._outputs
    spec = ProgramSpec()
    funcs = []
    if "forward_infer" in modes:
        kept = [k for k, n in enumerate(var_names) if n in resident]
        funcs.append(lower("forward_infer", typing, variables, heads, monitor=monitor, output_args=planned,
                           layouts=fwd_lay, resident=kept))
        spec.entries["forward_infer"] = _sig("forward_infer", typing, variables, var_names, heads,
                                             [e.name for e in heads], output_args=planned,
                                             rng=uses_rng(typing, heads, variables, False), resident=kept)
    for mode in ("steps_infer", "steps_train"):
        if mode in modes:
            for k, (node, ins, outs) in enumerate(step_plan(typing, heads)):
                fn = f"{mode}_{k}"
                funcs.append(lower(fn, typing, ins, outs, is_train=mode == "steps_train", monitor=monitor))
                spec.entries[fn] = _sig(fn, typing, ins, [e.name for e in ins], outs, [e.name for e in outs],
                                        rng=uses_rng(typing, outs, ins, mode == "steps_train"))
    train = [m for m in modes if m in TRAIN_MODES]
    if train:
        plan = training_plan(symbol, typing, reqs or {}, mirror)
        t = plan.typing
        full = t.graph
        lay = layout.assign(full, t.shape_of) if channels_last else None
        fvars = [full.nodes[full.nid(n)] for n in variables]          # same Node objects
        out_names = [e.name for e in heads]
        res_names = [f"res:{e.name}" for e in plan.residuals]
        hg_vars = [plan.gg.head_grad_vars[i] for i in plan.head_grads]
        hg_names = [f"head_grad:{i}" for i in plan.head_grads]
        grad_entries = [plan.gg.grad_heads[n] for n in plan.wrt]
        grad_names = [f"grad:{n}" for n in plan.wrt]
        aux_entries = list(plan.gg.aux_updates.values())
        aux_names = [f"aux:{n}" for n in plan.gg.aux_updates]
        old_names = [f"old_grad:{n}" for n in plan.add]   # extra inputs, typed like the gradient
        if "forward_train" in train:
            outs = list(heads) + plan.residuals
            kept = range(len(heads), len(outs))          # residuals stay in their (channels-last) layout
            funcs.append(lower("forward_train", t, fvars, outs, is_train=True, monitor=monitor,
                               output_args=planned, layouts=lay, physical_outputs=kept,
                               alias_early=range(len(outs))))
            spec.entries["forward_train"] = _sig("forward_train", t, fvars, var_names, outs, out_names + res_names,
                                                 rng=uses_rng(t, outs, fvars, True), output_args=planned,
                                                 lay=lay, physical_outputs=kept)
        if "backward" in train:
            ins = list(fvars) + plan.residuals + hg_vars
            outs = grad_entries + aux_entries
            add_to = [plan.wrt.index(n) for n in plan.add]
            funcs.append(lower("backward", t, ins, outs, is_train=True, add_to=add_to, monitor=monitor,
                               output_args=planned, layouts=lay))
            spec.entries["backward"] = _sig("backward", t, ins + [plan.gg.grad_heads[n] for n in plan.add],
                                            var_names + res_names + hg_names + old_names,
                                            outs, grad_names + aux_names, rng=uses_rng(t, outs, ins, True),
                                            output_args=planned, lay=lay,
                                            physical_inputs=range(len(fvars), len(fvars) + len(plan.residuals)))
        if "train_step" in train:
            ins = list(fvars) + hg_vars
            outs = list(heads) + grad_entries + aux_entries
            add_to = [len(heads) + plan.wrt.index(n) for n in plan.add]
            funcs.append(lower("train_step", t, ins, outs, is_train=True, add_to=add_to, monitor=monitor,
                               output_args=planned, layouts=lay))
            spec.entries["train_step"] = _sig("train_step", t, ins + [plan.gg.grad_heads[n] for n in plan.add],
                                              var_names + hg_names + old_names, outs,
                                              out_names + grad_names + aux_names, rng=uses_rng(t, outs, ins, True),
                                              output_args=planned)
    return module_text(funcs), spec


def step_plan(typing: Typing, heads: Sequence[Entry]) -> list[tuple]:
    """partial_forward's steps: each op node with the entries it reads and the ones it must keep
    (visible outputs and outputs later nodes read)."""
    g = typing.graph
    read = {(id(e.node), e.index) for n in g.nodes for e in n.inputs} | {(id(e.node), e.index) for e in heads}
    steps = []
    for node in g.nodes:
        if node.op is None:
            continue
        outs = [Entry(node, i) for i in range(node.num_outputs)
                if i < node.num_visible_outputs or (id(node), i) in read]
        steps.append((node, list(node.inputs), outs))
    return steps


def program_key(symbol_json: str, shapes: dict, dtypes: dict, modes: Sequence[str], opts: CompileOptions,
                reqs: dict[str, str] | None, mirror: bool | str | None, monitor: str | None = None,
                resident: Sequence[str] = ()) -> str:
    doc = json.dumps([symbol_json, sorted((k, list(v)) for k, v in shapes.items()),
                      sorted((k, np.dtype(v).name) for k, v in dtypes.items()), list(modes), repr(opts),
                      sorted((reqs or {}).items()), mirror, monitor, layout.enabled(), list(resident)])
    return hashlib.sha256(doc.encode()).hexdigest()


def compile_program(symbol, typing: Typing, modes: Sequence[str], opts: CompileOptions,
                    use_cache: bool | None = None, reqs: dict[str, str] | None = None,
                    mirror: bool | str | None = "none", monitor: str | None = None,
                    resident: Sequence[str] = ()) -> tuple[bytes, ProgramSpec]:
    """vmfb bytes + spec for ``symbol`` at the shapes/dtypes of ``typing``."""
    g = typing.graph
    shapes = {n.name: typing.node_shape(n) for n in g.variables()}
    dtypes = {n.name: typing.node_dtype(n) for n in g.variables()}
    train = any(m in TRAIN_MODES for m in modes)
    mirror = resolve(mirror)
    if resident and (list(modes) != ["forward_infer"] or monitor):
        raise ValueError("resident parameters are for a forward_infer-only, unmonitored program")
    key = program_key(symbol.tojson(), shapes, dtypes, modes, opts, reqs if train else None, mirror, monitor,
                      resident)
    from .compile_cache import cache_enabled
    memo = cache_enabled(use_cache)
    with _lock:
        hit = _programs.get(key) if memo else None
    if hit is not None:
        stats["hits"] += 1
        _log.debug("program cache hit %s", key[:16])
        return hit
    stats["misses"] += 1
    check_target_dtypes(typing, opts.target)
    build = functools.partial(entry_points, symbol, typing, modes, reqs, mirror, monitor,
                              channels_last=opts.target == "llvm-cpu", resident=resident)
    vmfb, spec = _compile_with_fallback(build, _reductions(opts), opts, use_cache)
    if memo:
        with _lock:
            _programs[key] = (vmfb, spec)
    return vmfb, spec


def _compile_with_fallback(build, reductions: str, opts: CompileOptions, use_cache: bool | None):
    """Compile ``build(reductions=...)``; a module whose blocked column reductions IREE 3.13's
    codegen rejects (``Emitter.reduce``) is compiled again with whole ones, which only costs
    speed. Other failures, and failures of the whole form, are raised."""
    text, spec = build(reductions=reductions)
    verify_mlir(text)
    try:
        return compile_mlir(text, opts, use_cache=use_cache), spec
    except CompileError as first:
        if reductions != "blocks":
            raise
        whole, spec = build(reductions="whole")
        if whole == text:
            raise
        _log.warning("IREE rejected the module with blocked column reductions (%s); compiling it with "
                     "whole ones (slower)", first.diagnostics[0][:200] if first.diagnostics else first)
        return compile_mlir(whole, opts, use_cache=use_cache), spec


# IREE 3.13's default Vulkan target (vp_android_baseline_2022) has 32-bit storage only:
# float64 fails to compile and float16 silently computes wrong values (checked on lavapipe).
VULKAN_UNSUPPORTED = {"float64": "SPIR-V has no 64-bit float storage in IREE's default Vulkan target",
                      "float16": "IREE's default Vulkan target lacks 16-bit storage; results would be wrong"}


def check_target_dtypes(typing: Typing, target: str) -> None:
    if target != "vulkan-spirv":
        return
    for n in typing.graph.nodes:
        for i in range(n.num_outputs):
            d = typing.node_dtype(n, i)
            if d is not None and d.name in VULKAN_UNSUPPORTED:
                from .base import AotexecError
                raise AotexecError(f"{d.name} is not supported on Vulkan ({VULKAN_UNSUPPORTED[d.name]}): "
                                   f"node '{n.name}' ({n.op_name}) produces {d.name}; use float32 or ax.cpu()")


def options_for(ctx, cpu: str = "host", cuda_arch: str = "sm_80") -> CompileOptions:
    return CompileOptions(target=ctx.target, cpu=cpu, cuda_arch=cuda_arch)


# ------------------------------------------------------------------ placement (group2ctx)
@dataclass
class Segment:
    """A run of consecutive nodes on one context, compiled as one function ``name``."""
    name: str
    ctx: object
    nodes: list
    inputs: list[Entry]
    outputs: list[Entry]
    backward: bool


def node_contexts(g: IndexedGraph, forward_ids: set[int], group2ctx: dict, default) -> dict[int, object]:
    """MXNet's placement: ``__ctx_group__`` picks the context of a forward node; a backward
    node runs where its forward node runs; helper nodes follow their first computed input."""
    place: dict[int, object] = {}
    for n in g.nodes:
        if n.op is None:
            continue
        if id(n) in forward_ids or "__ctx_group__" in n.attrs:   # forward nodes and their mirrors
            place[id(n)] = group2ctx.get(n.attrs.get("__ctx_group__"), default)
        elif n.control_deps:
            place[id(n)] = place[id(n.control_deps[0])]
        else:
            src = next((e.node for e in n.inputs if e.node.op is not None), None)
            place[id(n)] = place.get(id(src), default) if src is not None else default
    return place


def segment_plan(g: IndexedGraph, place: dict[int, object], forward_ids: set[int], heads: list[Entry]) -> list[Segment]:
    segments: list[Segment] = []
    for n in g.nodes:
        if n.op is None:
            continue
        bwd = id(n) not in forward_ids
        if segments and segments[-1].ctx == place[id(n)] and segments[-1].backward == bwd:
            segments[-1].nodes.append(n)
        else:
            segments.append(Segment(f"seg{len(segments)}", place[id(n)], [n], [], [], bwd))
    where = {id(n): k for k, s in enumerate(segments) for n in s.nodes}
    wanted = {(id(h.node), h.index) for h in heads}
    for k, seg in enumerate(segments):
        seen = set()
        for n in seg.nodes:
            for pos, e in enumerate(n.inputs):
                key = (id(e.node), e.index)
                if not reads_value(n, pos) or key in seen or where.get(id(e.node)) == k:
                    continue
                seen.add(key)
                seg.inputs.append(e)
    read_later: set[tuple[int, int]] = set(wanted)
    for seg in segments:
        read_later |= {(id(e.node), e.index) for e in seg.inputs}
    for seg in segments:
        seg.outputs = [Entry(n, i) for n in seg.nodes for i in range(n.num_outputs)
                       if (id(n), i) in read_later]
    return segments


def compile_segments(segments: list[Segment], typing: Typing, is_train: bool, cpu: str = "host") -> dict:
    """One vmfb per context holding its segments' functions: {ctx: (vmfb, spec)}."""
    by_ctx: dict = {}
    for seg in segments:
        by_ctx.setdefault(seg.ctx, []).append(seg)
    out = {}
    for ctx, segs in by_ctx.items():
        opts = options_for(ctx, cpu=cpu)
        spec = ProgramSpec()
        for seg in segs:
            spec.entries[seg.name] = _sig(seg.name, typing, seg.inputs, [e.name for e in seg.inputs],
                                          seg.outputs, [e.name for e in seg.outputs],
                                          rng=uses_rng(typing, seg.outputs, seg.inputs, is_train))

        def build(reductions: str, segs=segs, spec=spec) -> tuple[str, ProgramSpec]:
            return module_text([lower_function(seg.name, typing, seg.inputs, seg.outputs, is_train=is_train,
                                               reductions=reductions) for seg in segs]), spec
        check_target_dtypes(typing, opts.target)
        out[ctx] = _compile_with_fallback(build, _reductions(opts), opts, None)
    return out
