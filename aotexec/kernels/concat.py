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
    """Rewrite ``b``'s channel concatenations with kernel-call parts, and chains of them; returns
    how many concatenations were rewritten."""
    if not IN_PLACE or not b.kernel_calls:
        return 0
    users = users_of(b)
    parts: dict[str, dict[int, tuple[executable.KernelCall, list[str]]]] = {}
    for call in b.kernel_calls:
        found = _concat_reading(b, call, users)
        if found is not None:
            concat, position, chain = found
            parts.setdefault(concat, {})[position] = (call, chain)
    outer = _chains(b, users)
    inner = {o: (d, position) for d, (o, position) in outer.items()}
    todo = sorted(set(parts) | set(outer) | set(inner), key=lambda name: b.defs[name][3])
    buffers: dict[str, Value] = {}
    for concat in todo:
        root, base = concat, 0
        while root in outer:            # the chain's last concatenation holds them all
            root, position = outer[root]
            base += _offsets(b, root)[position]
        buffers[concat] = _rewrite(b, concat, parts.get(concat, {}), inner.get(concat), buffers, root, base)
    return len(todo)


def _offsets(b: "Emitter", concat: str) -> list[int]:
    return [int(x) for x in np.cumsum([0] + [int(v.shape[-1]) for v in b.defs[concat][1]])]


def _channel_concat(b: "Emitter", name: str) -> bool:
    d = b.defs.get(name)
    if d is None or d[0] != "stablehlo.concatenate" or d[4].dtype != np.float32 or d[4].ndim < 2:
        return False
    m = _DIMENSION.search(d[2])
    return m is not None and int(m.group(1)) == d[4].ndim - 1


def _chains(b: "Emitter", users) -> dict[str, tuple[str, int]]:
    """inner concatenation -> (the concatenation that takes it as a part, at which position):
    DenseNet's feature maps, each layer's input concatenated with its new channels. The inner
    one's channels are then a slice of the outer one's tensor, written once."""
    out = {}
    for name, (op, operands, _, _, value) in list(b.defs.items()):
        if not _channel_concat(b, name):
            continue
        names = [v.name for v in operands]
        for position, part in enumerate(names):
            if not _channel_concat(b, part) or names.count(part) != 1:
                continue
            if sum(1 for u in users.get(part, []) if u is not None and _channel_concat(b, u)) != 1:
                continue
            if tuple(b.defs[part][4].shape[:-1]) == tuple(value.shape[:-1]):
                out[part] = (name, position)
    return out


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
        op, operands = b.defs[us[0]][:2]
        if op == "stablehlo.reshape":
            cur = us[0]
            chain.append(cur)
            continue
        names = [v.name for v in operands]
        if not _channel_concat(b, us[0]) or names.count(cur) != 1:
            return None
        columns = call.result.shape[-1] if call.result.shape else 0
        if operands[names.index(cur)].shape[-1] != columns:
            return None
        return us[0], names.index(cur), chain


def _rewrite(b: "Emitter", concat: str, by_position: dict[int, tuple[executable.KernelCall, list[str]]],
             inner: tuple[str, int] | None, buffers: dict[str, Value], root: str, base: int) -> Value:
    """Writes ``concat``'s parts into its chain's tensor (``root``'s, flat; ``concat``'s channels
    from ``base`` on) and defines ``concat`` from it; returns that tensor after the writes."""
    _, operands, _, line, value = b.defs[concat]
    total = int(b.defs[root][4].shape[-1])
    pixels = int(np.prod(value.shape[:-1]))
    offsets = [base + o for o in _offsets(b, concat)]
    lines, b.lines = b.lines, []
    try:
        if inner is not None:
            buf = buffers[inner[0]]
        else:
            buf = Value(b.fresh(), (pixels * total,), np.dtype("float32"))
            b.lines.append(f"{b.indent}{buf.name} = flow.tensor.empty : {buf.type}")
        for position, (call, _) in sorted(by_position.items()):
            stride, first = executable.OUTPUT_WINDOW[call.export]
            consts = list(call.consts)
            names = executable.EXPORTS[call.export][2]
            consts[names.index(stride)], consts[names.index(first)] = total, offsets[position]
            buf = executable.dispatch_lines(b, call.export, call.workgroups, call.inputs, consts, 0, into=buf)
        for position, part in enumerate(operands):
            if position in by_position or (inner is not None and position == inner[1]):
                continue
            rows = b.reshape(buf, (pixels, total))
            start = [b.constant(0, (), "int64"), b.constant(offsets[position], (), "int64")]
            update = b.reshape(part, (pixels, int(part.shape[-1])))
            rows = b.op("stablehlo.dynamic_update_slice", [rows, update, *start], rows.shape)
            buf = b.reshape(rows, buf.shape)
        if root == concat:
            out = b.reshape(buf, value.shape)
        else:       # a slice of the chain's tensor (its consumers read it in place, or copy it)
            rows = b.reshape(buf, (pixels, total))
            out = b.reshape(b.slice(rows, [0, base], [pixels, base + int(value.shape[-1])], [1, 1]), value.shape)
        new = [ln for ln in b.lines if ln is not None]
        new[-1] = new[-1].replace(out.name + " = ", concat + " = ", 1)
    finally:
        b.lines = lines
    for call, chain in by_position.values():
        for name in [call.flat.name, *chain]:       # the flat result has no def: its line is the call's
            _drop(b, b.defs[name][3] if name in b.defs else call.line, name)
    b.lines[line] = "\n".join(new)
    return buf


def _drop(b: "Emitter", line: int, name: str) -> None:
    """Removes the op defining ``name`` from line ``line`` (a line may hold a block of ops)."""
    text = b.lines[line]
    if text is None:
        return
    kept = [p for p in text.split("\n") if not p.lstrip().startswith(name + " = ")]
    b.lines[line] = "\n".join(kept) if kept else None
