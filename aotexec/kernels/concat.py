"""Channel concatenations written in place by the kernels: a peephole over a finished function
body, after ``epilogue.fuse``.

A concatenation along the channel (last) axis copies its parts into a new tensor: a pass over
every part (SqueezeNet's fire modules, Inception's branches, DenseNet's layers). A part that is
a kernel call's result read by nothing else (through reshapes) is emitted again writing its
output window of the concatenation (``executable.OUTPUT_WINDOW``: rows the concatenation's
channel count apart, from the part's channel offset on), tied to the concatenation's flat
tensor; the other parts are inserted with ``stablehlo.dynamic_update_slice``; the
concatenation becomes a reshape of the last tensor of that chain. A call with a residual
epilogue keeps its own result (the residual is read with the output's stride).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from ..mlir_values import Value
from . import executable
from .epilogue import users_of

if TYPE_CHECKING:
    from ..emitter import Emitter

IN_PLACE = True     # off: every concatenation copies its parts (measurements)
_DIMENSION = re.compile(r"dimension = (\d+)")


def write_in_place(b: "Emitter") -> int:
    """Rewrite ``b``'s channel concatenations with kernel-call parts; returns how many."""
    if not IN_PLACE or not b.kernel_calls:
        return 0
    users = users_of(b)
    parts: dict[str, dict[int, tuple[executable.KernelCall, list[str]]]] = {}
    for call in b.kernel_calls:
        found = _concat_reading(b, call, users)
        if found is not None:
            concat, position, chain = found
            parts.setdefault(concat, {})[position] = (call, chain)
    for concat, by_position in parts.items():
        _rewrite(b, concat, by_position)
    return len(parts)


def _windowed(call: executable.KernelCall) -> bool:
    """Whether the call can write a window of a wider output: one product, no residual."""
    if call.export not in executable.OUTPUT_WINDOW or call.workgroups[2] != 1:
        return False
    return not (call.export.endswith("_ep") and call.consts[-1])


def _concat_reading(b: "Emitter", call: executable.KernelCall, users) -> tuple[str, int, list[str]] | None:
    """(the concatenation, the operand position, the reshapes between) where the call's result
    reaches a channel concatenation as one of its operands and goes nowhere else."""
    if not _windowed(call) or users.get(call.flat.name) != [call.result.name]:
        return None
    cur, chain = call.result.name, [call.result.name]
    while True:
        us = users.get(cur, [])
        if len(us) != 1 or us[0] is None or us[0] not in b.defs:
            return None
        op, operands, attrs, _, value = b.defs[us[0]]
        if op == "stablehlo.reshape":
            cur = us[0]
            chain.append(cur)
            continue
        if op != "stablehlo.concatenate" or value.dtype != np.float32 or value.ndim < 2:
            return None
        m = _DIMENSION.search(attrs)
        names = [v.name for v in operands]
        if m is None or int(m.group(1)) != value.ndim - 1 or names.count(cur) != 1:
            return None
        columns = call.result.shape[-1] if call.result.shape else 0
        if operands[names.index(cur)].shape[-1] != columns:
            return None
        return us[0], names.index(cur), chain


def _rewrite(b: "Emitter", concat: str, by_position: dict[int, tuple[executable.KernelCall, list[str]]]) -> None:
    _, operands, _, line, value = b.defs[concat]
    total = int(value.shape[-1])
    pixels = int(np.prod(value.shape[:-1]))
    offsets = np.cumsum([0] + [int(v.shape[-1]) for v in operands])
    lines, b.lines = b.lines, []
    try:
        buf = Value(b.fresh(), (pixels * total,), np.dtype("float32"))
        b.lines.append(f"{b.indent}{buf.name} = flow.tensor.empty : {buf.type}")
        for position, (call, _) in sorted(by_position.items()):
            stride, first = executable.OUTPUT_WINDOW[call.export]
            consts = list(call.consts)
            names = executable.EXPORTS[call.export][2]
            consts[names.index(stride)], consts[names.index(first)] = total, int(offsets[position])
            buf = executable.dispatch_lines(b, call.export, call.workgroups, call.inputs, consts, 0, into=buf)
        for position, part in enumerate(operands):
            if position in by_position:
                continue
            rows = b.reshape(buf, (pixels, total))
            start = [b.constant(0, (), "int64"), b.constant(int(offsets[position]), (), "int64")]
            update = b.reshape(part, (pixels, int(part.shape[-1])))
            rows = b.op("stablehlo.dynamic_update_slice", [rows, update, *start], rows.shape)
            buf = b.reshape(rows, buf.shape)
        out = b.reshape(buf, value.shape)
        new = [ln for ln in b.lines if ln is not None]
        new[-1] = new[-1].replace(out.name + " = ", concat + " = ", 1)
    finally:
        b.lines = lines
    for call, chain in by_position.values():
        for name in [call.flat.name, *chain]:
            _drop(b, b.defs[name][3] if name in b.defs else call.line, name)
        _drop(b, call.line, call.flat.name)
    b.lines[line] = "\n".join(new)


def _drop(b: "Emitter", line: int, name: str) -> None:
    """Removes the op defining ``name`` from line ``line`` (a line may hold a block of ops)."""
    text = b.lines[line]
    if text is None:
        return
    kept = [p for p in text.split("\n") if not p.lstrip().startswith(name + " = ")]
    b.lines[line] = "\n".join(kept) if kept else None
