"""A program (vmfb + signatures) for a typed graph: memoized in-process by a key over
everything that shapes the code, cached on disk by ``compiler.compile_mlir``."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import re
import threading
from math import prod
from typing import Sequence

import numpy as np

from ..base import AotexecError
from ..compiler import FUNCTION, CompileError, CompileOptions, CompileTimeout, compile_mlir, remember_as, verify_mlir
from .kernel_build import kernels_for
from ..options import Options
from ..passes.infer import Typing
from ..signature import ProgramSpec
from . import generic
from .entry_points import entry_points
from .plan import TRAIN_MODES

_log = logging.getLogger("aotexec.pipeline")
_programs: dict[str, tuple[bytes, ProgramSpec]] = {}
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0}


def options_for(ctx, cpu: str = "host", cuda_arch: str = "sm_80", options: Options | None = None) -> CompileOptions:
    """The compile options for a context (``options.iree_flags`` appended to the target's)."""
    return CompileOptions(target=ctx.target, cpu=cpu, cuda_arch=cuda_arch,
                          extra_flags=tuple(options.iree_flags) if options else ())


def resident_enabled(opts: CompileOptions, options: Options) -> bool:
    """Inference on llvm-cpu keeps parameters resident unless ``options.resident`` is off (to
    compare, or to bisect).  Measured there (docs/PERFORMANCE.md); GPU targets pass them per call."""
    return opts.target == "llvm-cpu" and options.resident


def reductions_for(opts: CompileOptions) -> str:
    """How reductions are emitted (``emitter.REDUCTIONS``): every one its own dispatch
    on Vulkan, column reductions in row blocks elsewhere (``Emitter.reduce`` says why)."""
    return "split" if opts.target == "vulkan-spirv" else "blocks"


def program_key(symbol_json: str, shapes: dict, dtypes: dict, modes: Sequence[str], opts: CompileOptions,
                reqs: dict[str, str] | None, mirror: str, monitor: str | None, layout: str,
                resident: Sequence[str] = ()) -> str:
    doc = json.dumps([symbol_json, sorted((k, list(v)) for k, v in shapes.items()),
                      sorted((k, np.dtype(v).name) for k, v in dtypes.items()), list(modes), repr(opts),
                      sorted((reqs or {}).items()), mirror, monitor, layout, list(resident)])
    return hashlib.sha256(doc.encode()).hexdigest()


def compile_program(symbol, typing: Typing, modes: Sequence[str], opts: CompileOptions,
                    options: Options | None = None, reqs: dict[str, str] | None = None,
                    mirror: str = "none", monitor: str | None = None,
                    resident: Sequence[str] = (), shape_generic: bool = False) -> tuple[bytes, ProgramSpec]:
    """vmfb bytes + spec for ``symbol`` at the shapes/dtypes of ``typing``; ``shape_generic``:
    may be a program shared by other shapes (``pipeline.generic``: executors, not artifacts,
    whose manifests describe static modules)."""
    options = options or Options()
    g = typing.graph
    shapes = {n.name: typing.node_shape(n) for n in g.variables()}
    dtypes = {n.name: typing.node_dtype(n) for n in g.variables()}
    train = any(m in TRAIN_MODES for m in modes)
    if resident and (list(modes) != ["forward_infer"] or monitor):
        raise ValueError("resident parameters are for a forward_infer-only, unmonitored program")
    symbol_json = symbol.tojson()
    key = program_key(symbol_json, shapes, dtypes, modes, opts, reqs if train else None, mirror, monitor,
                      options.layout, resident)
    with _lock:
        hit = _programs.get(key) if options.cache else None
    if hit is not None:
        stats["hits"] += 1
        _log.debug("program cache hit %s", key[:16])
        return hit
    check_target_dtypes(typing, opts.target)
    if shape_generic and options.cache and generic.eligible(modes, opts, options, monitor):
        skey = generic.structure_key(symbol_json, shapes, dtypes, modes, opts, reqs if train else None, mirror,
                                     options.layout)
        hit = generic.lookup(skey, shapes)
        if hit is None and generic.wanted(skey, key, options):
            hit = generic.compile_generic(skey, symbol, typing, modes, opts, options, reqs if train else None, mirror,
                                          reductions_for(opts),
                                          lambda build, o: compile_with_fallback(build, reductions_for(o), o, options))
        if hit is not None:
            return hit
    stats["misses"] += 1
    build = functools.partial(entry_points, symbol, typing, modes, reqs, mirror, monitor,
                              channels_last=opts.target == "llvm-cpu" and options.layout == "nhwc",
                              resident=resident, target=opts.target, kernels=kernels_for(opts, options, g))
    vmfb, spec = compile_with_fallback(build, reductions_for(opts), opts, options)
    if options.cache:
        with _lock:
            _programs[key] = (vmfb, spec)
    return vmfb, spec


_GROUPED_CONV = re.compile(r"feature_group_count = (?!1 )\d+ ")
# a module compiled with tuned_for's switches runs in an iree-compile child within these bounds:
# with pads fused into consumers IREE 3.13 ran out of memory on a module with a one-channel
# 3x3/2 convolution (its zero second channel is a pad) beside a grouped one
TUNED_TIMEOUT_S = 120.0
TUNED_MEMORY_BYTES = 2 << 30


def tuned_for(text: str, opts: CompileOptions) -> CompileOptions:
    """``opts`` with the module-wide IREE switches the module ``text`` is measured faster with.

    Pads fused into their consumers (``CompileOptions.pads_into_consumers``): a depthwise
    convolution then reads its input unpadded instead of after a copy into a padded buffer
    (MobileNet v1 b16 inference 114 -> 95 ms, MobileNet v2 105 -> 83), but IREE 3.13's direct
    convolutions got slower with the pad inside (ResNet-18 b16 243 -> 265 ms; ResNet-50,
    SqueezeNet, Inception-v3 neutral to slower), and the switch is one per module: on for
    llvm-cpu inference modules with a grouped convolution. Not for training modules (2-8%
    faster on the MobileNets, but IREE's codegen failed on ResNet-18's 7x7 stem gradients with
    it and ran out of memory on a small module of gradients)."""
    if (opts.target == "llvm-cpu" and not opts.pads_into_consumers and _GROUPED_CONV.search(text)
            and set(FUNCTION.findall(text)) == {"forward_infer"}):
        return dataclasses.replace(opts, pads_into_consumers=True)
    return opts


# the check off can make LLVM's codegen slow (a CI-sized densenet's training module took 5 min):
# past this the retry is stopped and the slower forms below are compiled instead
LARGE_VECTORS_TIMEOUT_S = 120.0
# rejected vectors over this many bytes (the check's own limit): the module is emitted again with
# its 1x1 data gradients fenced rather than compiled with the check off. MobileNet v2's b16
# training step (2x16x16x16 f32, 32 KB) compiles with the check off in ~50 s and runs 1-12% faster
# than fenced; with DenseNet-121's (2x28x16x16 at CI size, 7x12x16x16 at b16) LLVM ran past 120 s.
LARGE_VECTOR_BYTES = 32768
# IREE 3.13 on CUDA, training modules with depthwise layers (NCHW forms): dispatch formation fused
# a depthwise weight gradient's reduction into a region its operand is not defined in (MobileNet
# v1 / v2, CI-sized and b16), or codegen failed to distribute a dispatch (a conv-depthwise-BN net);
# without multi-use fusion both compile
MULTI_USE_FUSION_ERRORS = ("does not dominate this use", "op failed to distribute")
_VECTOR = re.compile(r"vector<((?:\d+x)+)(?:f|i|bf)(\d+)>")


def compile_with_fallback(build, reductions: str, opts: CompileOptions, options: Options):
    """Compile ``build(reductions=...)``, falling back on IREE 3.13 codegen failures that only
    cost speed to avoid. On llvm-cpu, a dispatch over codegen's vector-size check ("operations
    with large vector sizes": a data-tiled matmul whose epilogue unpacks several results, e.g.
    MobileNet v2's 1x1 data gradients fused with the gradient sum and BatchNorm gradient after
    them) is compiled again with the check off, the module otherwise unchanged (MobileNet v2's
    training step 824 ms, against 3.5 s for the next form), within ``LARGE_VECTORS_TIMEOUT_S``.
    Where the rejected vectors are larger than the check's limit (DenseNet-121's dense layers,
    whose 1x1 data gradients take the BatchNorm gradient after them as a three-result consumer;
    ResNet v2's strided 1x1 shortcuts, the residual sum and the next BatchNorm-ReLU), the module
    is emitted again with 1x1 layers' outputs and data gradients behind barriers first
    (``Emitter.fenced_pointwise``): the check off made LLVM run for minutes on those.
    A module that IREE rejects with ``tuned_for``'s switches for any other reason is compiled
    without them first; the forms below never use them.
    Still rejected: a module whose blocked column reductions are rejected (``Emitter.reduce``)
    is compiled again with whole ones; one still rejected on llvm-cpu (stack allocations over
    the limit) without data tiling. Other failures, and failures of the last form, are raised.
    The form that compiled is cached under the first one's key too (``remember_as``): a cached
    bind of MobileNet v2's training module took 35 s, the failing first compile, without it;
    except where a form was stopped at its time limit (``CompileTimeout``, which load decides):
    the check-off retry timing out goes on to the fenced form (whole reductions ran MobileNet v2's
    training step 8x slower), and the next bind tries the first form again."""
    text, spec = build(reductions=reductions)
    verify_mlir(text)
    tuned = tuned_for(text, opts)
    bounds = {} if tuned == opts else {"timeout": TUNED_TIMEOUT_S, "memory_limit": TUNED_MEMORY_BYTES}
    try:
        return compile_mlir(text, tuned, options=options, **bounds), spec
    except CompileError as e:
        first = e
    if tuned != opts and not _codegen_limit(first):
        # IREE 3.13 failed or ran out of memory with pads fused into consumers on some modules
        _log.warning("IREE rejected the module with pads fused into their consumers (%s); compiling it "
                     "without", _first_line(first))
        try:
            vmfb = compile_mlir(text, opts, options=options)
            remember_as(text, tuned, vmfb, options)
            return vmfb, spec
        except CompileError as e:
            first = e
    # the fallback forms compile without tuned_for's switches (unbounded there)
    timed_out: list[CompileTimeout] = []
    vmfb, spec = _fallback(build, text, spec, first, reductions, opts, options, timed_out)
    if not timed_out:
        remember_as(text, tuned, vmfb, options)     # the next bind of this module starts here
    return vmfb, spec


def _fallback(build, text: str, spec, first: CompileError, reductions: str, opts: CompileOptions, options: Options,
              timed_out: list[CompileTimeout]):
    """The forms ``compile_with_fallback`` tries after ``text`` failed with ``first``; a form
    stopped at its time limit is added to ``timed_out``."""
    if opts.multi_use_fusion and any(m in line for line in first.lines for m in MULTI_USE_FUSION_ERRORS):
        _log.warning("IREE's dispatch formation broke the module (%s); compiling it without multi-use fusion",
                     _first_line(first))
        return compile_mlir(text, dataclasses.replace(opts, multi_use_fusion=False), options=options), spec
    large_vectors = opts.target == "llvm-cpu" and not opts.large_vectors
    fenced_first = large_vectors and _rejected_vector_bytes(first) > LARGE_VECTOR_BYTES
    if fenced_first:
        _log.warning("IREE rejected %d-byte vectors (%s); compiling the module with its 1x1 layers fenced",
                     _rejected_vector_bytes(first), _first_line(first))
        compiled = _fenced(build, text, reductions, opts, options)
        if compiled is not None:
            return compiled
    if large_vectors and _codegen_limit(first):
        _log.warning("IREE rejected a dispatch's vector sizes (%s); compiling with its check off",
                     _first_line(first))
        try:
            return compile_mlir(text, dataclasses.replace(opts, large_vectors=True), options=options,
                                timeout=LARGE_VECTORS_TIMEOUT_S), spec
        except CompileError as e:     # the next forms answer the first failure
            _log.warning("that failed too (%s)", _first_line(e))
            if isinstance(e, CompileTimeout):
                timed_out.append(e)
                if not fenced_first:
                    _log.warning("compiling the module with its 1x1 layers fenced")
                    compiled = _fenced(build, text, reductions, opts, options)
                    if compiled is not None:
                        return compiled
    if reductions != "blocks":
        raise first
    whole, spec = build(reductions="whole")
    if whole != text:
        _log.warning("IREE rejected the module with blocked column reductions (%s); compiling it with "
                     "whole ones (slower)", _first_line(first))
        try:
            return compile_mlir(whole, opts, options=options), spec
        except CompileError as second:
            first = second
    if opts.target != "llvm-cpu" or not opts.data_tiling or not _codegen_limit(first):
        raise first
    _log.warning("IREE rejected the module with data tiling (%s); compiling it without (slower)",
                 _first_line(first))
    return compile_mlir(whole, dataclasses.replace(opts, data_tiling=False), options=options), spec


def _first_line(e: CompileError) -> str:
    return e.diagnostics[0][:200] if e.diagnostics else str(e)


def _rejected_vector_bytes(e: CompileError) -> int:
    """The largest vector the notes of a vector-size rejection show (0 for other failures)."""
    if not any("large vector sizes" in d for d in e.lines):
        return 0
    return max((prod(int(d) for d in dims[:-1].split("x")) * int(bits) // 8
                for line in e.lines for dims, bits in _VECTOR.findall(line)), default=0)


def _fenced(build, text: str, reductions: str, opts: CompileOptions, options: Options):
    """(vmfb, spec) of the module emitted with its 1x1 layers fenced; None where that form is
    the module itself or fails too (the next forms answer the first failure)."""
    fenced, fenced_spec = build(reductions=reductions, fenced_pointwise=True)
    if fenced == text:
        return None
    try:
        return compile_mlir(fenced, opts, options=options), fenced_spec
    except CompileError as e:
        _log.warning("that failed too (%s)", _first_line(e))
        return None


def _codegen_limit(e: CompileError) -> bool:
    return any("large vector sizes" in d or "stack allocation limit" in d for d in e.diagnostics)


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
                raise AotexecError(f"{d.name} is not supported on Vulkan ({VULKAN_UNSUPPORTED[d.name]}): "
                                   f"node '{n.name}' ({n.op_name}) produces {d.name}; use float32 or ax.cpu()")
