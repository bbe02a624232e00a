"""The ``stream.executable`` a module's kernel calls dispatch, and the ``flow.dispatch`` of one.

Each export binds its tensors (inputs, then the one result) as ``memref<?xf32>`` and passes
its index constants on to the C function with the workgroup ids appended (``avx512_kernels.c``:
memrefs arrive as (base, aligned, offset, size, stride) tuples, indices as size_t).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..mlir_values import Value, mlir_string
from .code import Kernels

if TYPE_CHECKING:
    from ..emitter import Emitter

EXECUTABLE = "@aotexec_kernels"
# export -> (C function, number of tensor inputs, index constants' names, workgroup ids passed)
EXPORTS = {
    # ldc / ldy, coff / yoff: the output's row (pixel) stride and first element (``concat.py``
    # writes into a wider tensor; ``OUTPUT_WINDOW``)
    "sgemm": ("aotexec_sgemm_workgroup", 2, ("m", "n", "k", "tr", "mc", "pc", "ldc", "coff"), 3),
    "conv": ("aotexec_conv_workgroup", 2, ("n", "h", "w", "c", "oh", "ow", "o", "geom", "rc", "pc", "ldy", "yoff"), 2),
    # with the epilogue (``epilogue.py``): two more inputs, [scale, shift, lo, hi] and a residual
    # (laid out as the output), and whether that residual is one
    "sgemm_ep": ("aotexec_sgemm_ep_workgroup", 4, ("m", "n", "k", "tr", "mc", "pc", "ldc", "coff", "res"), 2),
    "conv_ep": ("aotexec_conv_ep_workgroup", 4,
                ("n", "h", "w", "c", "oh", "ow", "o", "geom", "rc", "pc", "ldy", "yoff", "res"), 2),
    "conv_wgrad": ("aotexec_conv_wgrad_workgroup", 2, ("n", "hp", "wp", "c", "oh", "ow", "o", "geom", "rc"), 2),
    "maxpool_grad": ("aotexec_maxpool_grad_workgroup", 2, ("n", "h", "w", "c", "oh", "ow", "geom"), 2),
    "dwgrad": ("aotexec_dwgrad_workgroup", 2, ("n", "h", "w", "c", "oh", "ow", "geom", "rows"), 2),
    "colstats": ("aotexec_colstats_workgroup", 1, ("r", "c", "rows"), 2),
    "colstats_combine": ("aotexec_colstats_combine_workgroup", 1, ("r", "c", "rows"), 2),
    "bngrad_sums": ("aotexec_bngrad_sums_workgroup", 3, ("r", "c", "rows"), 2),
    "bnrelu_grad_sums": ("aotexec_bnrelu_grad_sums_workgroup", 3, ("r", "c", "rows"), 2),
    "sum_parts": ("aotexec_sum_parts_workgroup", 1, ("g", "k"), 2),
    "wino_tiles": ("aotexec_wino_tiles_workgroup", 2, ("n", "h", "w", "c", "th", "tw", "t", "i", "s", "pt", "pl", "r", "packed"), 2),
}
MREF = "memref<?xf32>"
# export -> the names of its output window's (row stride, first element) constants
OUTPUT_WINDOW = {"sgemm": ("ldc", "coff"), "sgemm_ep": ("ldc", "coff"), "conv": ("ldy", "yoff"),
                 "conv_ep": ("ldy", "yoff")}


@dataclass(frozen=True)
class KernelCall:
    """One dispatch as emitted: what ``epilogue.fuse`` needs to emit it again with an epilogue."""
    export: str
    workgroups: tuple[int, ...]
    inputs: tuple[Value, ...]           # flat
    consts: tuple[int, ...]
    line: int                           # the dispatch's line in ``Emitter.lines``
    flat: Value                         # its flat result
    result: Value                       # that result reshaped (what the caller got)


def dispatch(b: "Emitter", export: str, workgroups: Sequence[int], inputs: Sequence[Value],
             consts: Sequence[int], out_shape: Sequence[int]) -> Value:
    """``export`` of the kernels' executable on the (flat f32) ``inputs``, its index ``consts``
    in ``EXPORTS`` order, over ``workgroups`` (x, y, z); the result, reshaped to ``out_shape``."""
    flat = [b.reshape(v, (int(np.prod(v.shape)),)) for v in inputs]
    flat_out = dispatch_lines(b, export, workgroups, flat, consts, int(np.prod(out_shape)))
    line = len(b.lines) - 1
    result = b.reshape(flat_out, tuple(out_shape))
    b.kernel_calls.append(KernelCall(export, tuple(workgroups), tuple(flat), tuple(int(c) for c in consts),
                                     line, flat_out, result))
    return result


def dispatch_lines(b: "Emitter", export: str, workgroups: Sequence[int], flat: Sequence[Value],
                   consts: Sequence[int], size: int, into: Value | None = None) -> Value:
    """Appends the index constants and the ``flow.dispatch`` of ``export`` to ``b.lines``; its
    flat result of ``size`` floats, or, with ``into``, ``into`` written in place (a tied result:
    the kernel writes its output window, ``OUTPUT_WINDOW``, and the rest keeps its values)."""
    operands = [*flat, *([into] if into is not None else [])]
    if into is not None:
        size = into.shape[0]
    names = []
    for v in (*workgroups, *consts, *(f.shape[0] for f in flat), size):
        names.append(b.fresh())
        b.lines.append(f"{b.indent}{names[-1]} = arith.constant {int(v)} : index")
    index_types = ", ".join(["index"] * (len(names) - 3))
    out = b.fresh()
    result = into.name if into is not None else f"tensor<{size}xf32>"
    b.lines.append(f"{b.indent}{out} = flow.dispatch {EXECUTABLE}::@{export}[{', '.join(names[:3])}]"
                   f"({', '.join(f.name for f in operands)}, {', '.join(names[3:])}) : "
                   f"({', '.join(f.type for f in operands)}, {index_types}) -> {result} loc(\"{b.loc}\")")
    return Value(out, (size,), np.dtype("float32"))


def _export_text(export: str) -> str:
    func, n_in, consts, n_ids = EXPORTS[export]
    bindings = [f"%t{i}" for i in range(n_in + 1)]
    sizes = [f"%s{i}" for i in range(n_in + 1)]
    ids = ["%wx", "%wy", "%wz"][:n_ids]
    args = ", ".join([f"{t}: !stream.binding" for t in bindings] + [f"%{c}: index" for c in consts]
                     + [f"{s}: index" for s in sizes])
    subspans = "\n".join(f"        %m{i} = stream.binding.subspan {t}[%c0] : !stream.binding -> {MREF}{{{s}}}"
                         for i, (t, s) in enumerate(zip(bindings, sizes)))
    ids_text = "\n".join(f"        {v} = stream.dispatch.workgroup.id[{i}] : index" for i, v in enumerate(ids))
    call_args = [f"%m{i}" for i in range(n_in + 1)] + [f"%{c}" for c in consts] + ids
    types = ", ".join([MREF] * (n_in + 1) + ["index"] * (len(consts) + n_ids))
    return f"""      func.func private @{func}({types}) attributes {{hal.import.static}}
      func.func @{export}({args}) {{
        %c0 = arith.constant 0 : index
{ids_text}
{subspans}
        func.call @{func}({', '.join(call_args)}) : ({types}) -> ()
        return
      }}"""


def executable_text(kernels: Kernels) -> str:
    """The ``stream.executable`` every kernel call of a module dispatches: one export per C
    function, all linked from the one object."""
    target = '#hal.executable.target<"llvm-cpu", "embedded-elf-x86_64", {target_triple = "x86_64-unknown-unknown-eabi-elf"}>'
    path = mlir_string(str(kernels.object_path))
    exports = "\n".join(f"""    stream.executable.export public @{e} workgroups(%wx: index, %wy: index, %wz: index) -> (index, index, index) {{
      stream.return %wx, %wy, %wz : index, index, index
    }}""" for e in EXPORTS)
    bodies = "\n".join(_export_text(e) for e in EXPORTS)
    return f"""  stream.executable private {EXECUTABLE} attributes {{
    hal.executable.objects = #hal.executable.objects<{{{target} = [#hal.executable.object<{{path = "{path}"}}>]}}>
  }} {{
{exports}
    builtin.module {{
{bodies}
    }}
  }}
"""


def uses_kernels(function_text: str) -> bool:
    return f"{EXECUTABLE}::@" in function_text
