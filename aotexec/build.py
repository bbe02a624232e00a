"""Compile side: typed graph -> entry points -> StableHLO -> IREE vmfb.

Imported lazily (it needs ``iree.compiler``).  Results are memoized in-process
by a graph key (so a repeated ``bind`` skips lowering too) and on disk by the
compile cache in ``compiler.py``.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
from typing import Any, Sequence

import numpy as np

from .compiler import CompileOptions, compile_mlir, verify_mlir
from .graph import Entry
from .lowering.module import lower_function, module_text
from .passes.infer import Typing
from .runtime.program import EntryPoint, ProgramSpec

_log = logging.getLogger("aotexec.build")
_programs: dict[str, tuple[bytes, ProgramSpec]] = {}
_lock = threading.Lock()
stats = {"hits": 0, "misses": 0}

# entry point name -> is_train
MODES = {"forward_infer": False, "forward_train": True}


def entry_points(typing: Typing, heads: Sequence[Entry], modes: Sequence[str]) -> tuple[str, ProgramSpec]:
    """MLIR text holding one function per mode, and the signature of each."""
    g = typing.graph
    inputs = g.arguments() + g.aux_states()
    spec = ProgramSpec()
    funcs = []
    for mode in modes:
        funcs.append(lower_function(mode, typing, inputs, heads, is_train=MODES[mode]))
        spec.entries[mode] = EntryPoint(
            name=mode,
            inputs=[n.name for n in inputs],
            input_shapes=[list(typing.node_shape(n)) for n in inputs],
            input_dtypes=[typing.node_dtype(n).name for n in inputs],
            outputs=[e.name for e in heads],
            output_shapes=[list(typing.shape_of(e)) for e in heads],
            output_dtypes=[typing.dtype_of(e).name for e in heads])
    return module_text(funcs), spec


def program_key(symbol_json: str, shapes: dict, dtypes: dict, modes: Sequence[str], opts: CompileOptions) -> str:
    doc = json.dumps([symbol_json, sorted((k, list(v)) for k, v in shapes.items()),
                      sorted((k, np.dtype(v).name) for k, v in dtypes.items()), list(modes), repr(opts)])
    return hashlib.sha256(doc.encode()).hexdigest()


def compile_program(symbol, typing: Typing, modes: Sequence[str], opts: CompileOptions,
                    use_cache: bool | None = None) -> tuple[bytes, ProgramSpec]:
    """vmfb bytes + spec for ``symbol`` at the shapes/dtypes of ``typing``."""
    g = typing.graph
    shapes = {n.name: typing.node_shape(n) for n in g.variables()}
    dtypes = {n.name: typing.node_dtype(n) for n in g.variables()}
    key = program_key(symbol.tojson(), shapes, dtypes, modes, opts)
    from .compile_cache import cache_enabled
    memo = cache_enabled(use_cache)
    with _lock:
        hit = _programs.get(key) if memo else None
    if hit is not None:
        stats["hits"] += 1
        _log.debug("program cache hit %s", key[:16])
        return hit
    stats["misses"] += 1
    text, spec = entry_points(typing, symbol._outputs, modes)
    verify_mlir(text)
    vmfb = compile_mlir(text, opts, use_cache=use_cache)
    if memo:
        with _lock:
            _programs[key] = (vmfb, spec)
    return vmfb, spec


def options_for(ctx, cpu: str = "host", cuda_arch: str = "sm_80") -> CompileOptions:
    return CompileOptions(target=ctx.target, cpu=cpu, cuda_arch=cuda_arch)
