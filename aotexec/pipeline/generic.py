"""Shape-generic programs: a graph structure compiled once, with dynamic dimensions, and shared
by every binding whose shapes satisfy the guards its trace recorded (``aotexec.symbolic``).

Keyed by what shapes the code except the shapes themselves: the symbol, dtypes, modes,
target, grad_req, recomputation policy, layout, and each variable's rank and empty dimensions
(``symbolic.shape_pattern``).  A binding then costs a guard check and filling in its port
shapes: no lowering, no compile.

Policy (``Options.shapes``): ``auto`` compiles the first ``STATIC_SHAPES`` distinct shapes of a
structure static (fixed shapes give IREE's codegen static tiles, data tiling and resident
weights: a net served at batch 1 and batch 16 runs both at full speed; a generic SqueezeNet ran
its batch-16 step 3.7x slower) and the next one generic, which then serves every later shape it
covers; ``generic`` goes generic from the first binding, ``static`` never.  Only llvm-cpu and
the planned entry points executors call (forward_infer / forward_train / backward / train_step); a structure whose
trace or compile fails is compiled static per shape, as before.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..compiler import CompileError, CompileOptions
from ..options import Options
from ..passes.infer import Typing, infer
from ..signature import Port, ProgramSpec
from ..symbolic import SYMBOL_MIN, Trace, binding_env, concrete, shape_pattern, symbolic_shape, tracing
from .entry_points import entry_points
from .plan import TRAIN_MODES, chosen_mirror

_log = logging.getLogger("aotexec.pipeline")
# IREE 3.13's aggressive dispatch fusion gives dynamic-shape dispatches its llvm-cpu codegen
# rejects ("'vector.store' op write affecting operations on global resources are restricted
# to workgroup distributed contexts": a softmax with its output also returned as a residual)
GENERIC_FLAGS = ("--iree-dispatch-creation-enable-aggressive-fusion=false",)
MAX_TRACES = 4
MAX_PROGRAMS = 8        # per structure: more means its pins (e.g. spatial sizes) vary; compile static
STATIC_SHAPES = 2       # auto: distinct shapes of a structure compiled static before going generic
GENERIC_MODES = {"forward_infer", "forward_train", "backward", "train_step"}


@dataclass
class GenericProgram:
    vmfb: bytes
    spec: ProgramSpec          # port shapes symbolic
    trace: Trace


_programs: dict[str, list[GenericProgram]] = {}
_failed: set[str] = set()                     # structures that stay static
_static_shapes: dict[str, set[str]] = {}      # structure -> shapes compiled static
_lock = threading.Lock()
stats = {"hits": 0, "compiles": 0, "unsupported": 0}


def eligible(modes: Sequence[str], opts: CompileOptions, options: Options, monitor: str | None) -> bool:
    return (options.shapes != "static" and opts.target == "llvm-cpu" and monitor is None
            and set(modes) <= GENERIC_MODES)


def structure_key(symbol_json: str, shapes: dict, dtypes: dict, modes: Sequence[str], opts: CompileOptions,
                  reqs: dict | None, mirror: str, layout: str) -> str:
    doc = json.dumps([symbol_json, shape_pattern(shapes), sorted((k, np.dtype(v).name) for k, v in dtypes.items()),
                      list(modes), repr(opts), sorted((reqs or {}).items()), mirror, layout])
    return hashlib.sha256(doc.encode()).hexdigest()


def lookup(skey: str, shapes: dict) -> tuple[bytes, ProgramSpec] | None:
    env = binding_env(shapes)
    with _lock:
        candidates = list(_programs.get(skey, ()))
    for gp in candidates:
        if gp.trace.holds(env):
            stats["hits"] += 1
            return gp.vmfb, instantiate(gp.spec, env)
    return None


def instantiate(spec: ProgramSpec, env: dict[str, int]) -> ProgramSpec:
    """The spec with each port's shape for one binding."""
    def ports(ps: Sequence[Port]) -> tuple[Port, ...]:
        return tuple(dataclasses.replace(p, shape=tuple(concrete(d, env) for d in p.shape)) for p in ps)
    return ProgramSpec({k: dataclasses.replace(e, params=ports(e.params), results=ports(e.results))
                        for k, e in spec.entries.items()})


def wanted(skey: str, shapes_key: str, options: Options) -> bool:
    """Whether this binding should compile a generic program (``Options.shapes``)."""
    with _lock:
        if skey in _failed or len(_programs.get(skey, ())) >= MAX_PROGRAMS:
            return False
        seen = _static_shapes.setdefault(skey, set())
        if options.shapes == "generic" or (len(seen) >= STATIC_SHAPES and shapes_key not in seen):
            return True
        seen.add(shapes_key)
        return False


def compile_generic(skey: str, symbol, typing: Typing, modes: Sequence[str], opts: CompileOptions, options: Options,
                    reqs: dict | None, mirror: str, reductions: str,
                    compile_fn) -> tuple[bytes, ProgramSpec] | None:
    """Trace ``symbol`` with symbolic shapes and compile it (``compile_fn(build, opts)``: the
    pipeline's compile with fallbacks); None when it cannot be made generic."""
    g = typing.graph
    shapes = {n.name: tuple(typing.node_shape(n)) for n in g.variables()}
    dtypes = {n.name: typing.node_dtype(n) for n in g.variables()}
    if any(m in TRAIN_MODES for m in modes):
        mirror = chosen_mirror(symbol, typing, reqs or {}, mirror)   # decided on this binding's sizes
    # no data tiling: IREE 3.13's encodings of dynamic matmul operands fail its codegen
    # ("affine.delinearize_index op no basis element may be statically non-positive")
    opts = dataclasses.replace(opts, extra_flags=tuple(opts.extra_flags) + GENERIC_FLAGS, data_tiling=False)
    try:
        # trace until what the rules pin is pinned from the start: every value then has its
        # final type where it is defined (a dim pinned half-way would be '?' before, static after)
        pins: dict = {}
        for _ in range(MAX_TRACES):
            trace = Trace(pins)
            with tracing(trace):
                sym_typing = infer(g, {n: symbolic_shape(n, s, pins) for n, s in shapes.items()}, dtypes)
                lower = functools.partial(entry_points, symbol, sym_typing, modes, reqs, mirror, None,
                                          channels_last=options.layout == "nhwc", resident=(), planned=False)
                built = {(reductions, False): lower(reductions=reductions)}
            if trace.pinned == pins:
                break
            pins = dict(trace.pinned)
        else:
            return _unsupported(skey, f"its pins did not settle in {MAX_TRACES} traces")

        def build(reductions: str, fenced_pointwise: bool = False):   # the settled trace's module
            form = (reductions, fenced_pointwise)
            if form not in built:
                built[form] = lower(reductions=reductions, fenced_pointwise=fenced_pointwise)
            return built[form]
        with tracing(trace):
            vmfb, spec = compile_fn(build, opts)
    except CompileError as e:
        return _unsupported(skey, f"IREE rejected the shape-generic module: {e.diagnostics[:1] or e}")
    except Exception as e:      # noqa: BLE001 - any rule that cannot trace: compile static instead
        return _unsupported(skey, f"{type(e).__name__}: {e}")
    gp = GenericProgram(vmfb, spec, trace)
    env = binding_env(shapes)
    if not trace.holds(env):
        return _unsupported(skey, "its guards reject the binding it was traced with")
    symbols = {k for k, v in env.items() if v >= SYMBOL_MIN}
    if symbols <= {k for k, v in trace.pinned.items() if isinstance(v, int)}:
        _unsupported(skey, "every dimension was pinned")   # as static as a static module: compile those
        return vmfb, instantiate(spec, env)
    with _lock:
        _programs.setdefault(skey, []).append(gp)
    stats["compiles"] += 1
    _log.info("compiled a shape-generic program (%d guards)", len(trace.guards))
    return vmfb, instantiate(spec, env)


def _unsupported(skey: str, why: str) -> None:
    stats["unsupported"] += 1
    _log.debug("structure stays shape-specialized: %s", why)
    with _lock:
        _failed.add(skey)
    return None


def reset() -> None:
    """Forget every generic program (tests)."""
    with _lock:
        _programs.clear()
        _failed.clear()
        _static_shapes.clear()
