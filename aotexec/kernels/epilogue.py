"""Per-channel epilogues folded into kernel calls: a peephole over a finished function body.

IREE fuses an elementwise consumer into the dispatch of its producer, but not into an external
one: a kernel's result with BatchNorm (inference: a per-channel affine map) and ReLU after it
would be read and written again by a dispatch of their own. ``fuse`` finds, for each kernel
call (``executable.KernelCall``), the chain of single-use ops after its result: reshapes that
keep the channel (last) axis, add / subtract / multiply with a per-channel vector (or a
scalar) broadcast along that axis, then at most one add of a same-shaped tensor (a residual),
then maximum / minimum with scalar constants or a clamp (ReLU, ReLU6); it folds the chain into
y = clamp(acc * scale + shift + residual, lo, hi) and emits the call again with that epilogue
in place of the chain's last op (``*_ep`` exports). A value with any other use (training's
saved activations, batch statistics, a monitor, a function result) ends the chain there.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..mlir_values import Value
from . import executable

if TYPE_CHECKING:
    from ..emitter import Emitter

_NAME = re.compile(r"%[A-Za-z_][\w]*(?:#\d+)?")
_AFFINE = {"stablehlo.add", "stablehlo.subtract", "stablehlo.multiply"}
EPILOGUE_EXPORT = {"sgemm": "sgemm_ep", "conv": "conv_ep"}
FOLD = True     # off: every chain stays a pass of its own (measurements)


def users_of(b: "Emitter") -> dict[str, list[str | None]]:
    """name -> the names of the ops reading it (None: a line without a result, e.g. the return)."""
    users: dict[str, list[str | None]] = {}
    for line in [*b.prologue, *(ln for ln in b.lines if ln is not None)]:
        for part in line.split("\n"):
            lhs, sep, rhs = part.partition(" = ")
            if not sep or not lhs.strip().startswith("%"):
                lhs, rhs = None, part
            else:
                lhs = lhs.strip().split(":")[0]
            for name in _NAME.findall(rhs.split(" loc(")[0]):
                users.setdefault(name.split("#")[0], []).append(lhs)
    return users


def _channel_operand(b: "Emitter", name: str, channels: int, axis: int) -> tuple[Value, float | None] | None:
    """(source, its scalar value if a constant) of a broadcast of a (channels,) vector along
    ``axis`` or of a scalar; None for anything else."""
    d = b.defs.get(name)
    if d is None or d[0] != "stablehlo.broadcast_in_dim" or len(d[1]) != 1:
        return None
    src = d[1][0]
    if src.shape == () and "array<i64>" in d[2]:
        c = b.defs.get(src.name)
        scalar = _scalar(c[2]) if c is not None and c[0] == "stablehlo.constant" else None
        return src, scalar
    if tuple(src.shape) == (channels,) and f"array<i64: {axis}>" in d[2]:
        return src, None
    return None


def _scalar(dense: str) -> float | None:
    m = re.fullmatch(r"dense<([^>\[\]]+)>", dense.strip())
    try:
        return float(m.group(1)) if m else None
    except ValueError:
        return None


def fuse(b: "Emitter") -> int:
    """Fold the epilogue chains of ``b``'s kernel calls; returns how many were folded."""
    calls = [c for c in b.kernel_calls if c.export in EPILOGUE_EXPORT and (c.export != "sgemm" or c.workgroups[2] == 1)]
    if not calls or not FOLD:
        return 0
    users = users_of(b)
    # a residual add reads two products (ResNet's block output and its projected shortcut): the
    # first chain takes it, the other one stops before it (its last value is that residual)
    plans, claimed = [], set()
    for call in calls:
        plan = _chain(b, call, users, claimed)
        if plan is not None:
            plans.append(plan)
            claimed.update(plan.chain)
    for plan in sorted(plans, key=lambda p: -b.defs[p.chain[-1]][3]):
        _rewrite(b, plan)
    return len(plans)


@dataclass
class _Plan:
    call: "executable.KernelCall"
    chain: list[str]                    # the ops folded, in order; the last one is re-defined
    steps: list[tuple[str, Value, bool]]    # (affine op, its channel operand, the chain's value first)
    residual: Value | None = None
    lo: float = -math.inf
    hi: float = math.inf


def _scalar_constant(b: "Emitter", v: Value) -> float | None:
    c = b.defs.get(v.name)
    return _scalar(c[2]) if c is not None and c[0] == "stablehlo.constant" and v.shape == () else None


def _chain(b: "Emitter", call: "executable.KernelCall", users, claimed: set[str]) -> _Plan | None:
    channels = call.result.shape[-1]
    plan, cur, phase = _Plan(call, [], []), call.result.name, 0     # 0 affine, 1 residual taken, 2 clamps
    while True:
        us = users.get(cur, [])
        if len(us) != 1 or us[0] is None or us[0] not in b.defs or us[0] in claimed:
            break
        op, operands, _, _, value = b.defs[us[0]]
        if value.dtype != np.float32 or not value.shape or value.shape[-1] != channels:
            break
        names = [v.name for v in operands]
        if names.count(cur) != 1:
            break
        if op == "stablehlo.reshape":
            pass
        elif op == "stablehlo.clamp" and names[1] == cur:
            lo, hi = _scalar_constant(b, operands[0]), _scalar_constant(b, operands[2])
            if lo is None or hi is None:
                break
            plan.lo, plan.hi, phase = max(plan.lo, lo), min(plan.hi, hi), 2
        elif op in _AFFINE | {"stablehlo.maximum", "stablehlo.minimum"} and len(names) == 2:
            other = operands[1] if names[0] == cur else operands[0]
            found = _channel_operand(b, other.name, channels, value.ndim - 1)
            if op in ("stablehlo.maximum", "stablehlo.minimum"):
                if found is None or found[1] is None:
                    break
                if op == "stablehlo.maximum":
                    plan.lo = max(plan.lo, found[1])
                else:
                    plan.hi = min(plan.hi, found[1])
                phase = 2
            elif found is not None and phase == 0:
                plan.steps.append((op, found[0], names[0] == cur))
            elif op == "stablehlo.add" and phase == 0 and found is None and tuple(other.shape) == tuple(value.shape) \
                    and other.dtype == np.float32:
                plan.residual, phase = other, 1
            else:
                break
        else:
            break
        plan.chain.append(us[0])
        cur = us[0]
    # the last op that folds: trailing reshapes stay as they are
    while plan.chain and b.defs[plan.chain[-1]][0] == "stablehlo.reshape":
        plan.chain.pop()
    if not plan.chain:
        return None
    return plan


def _rewrite(b: "Emitter", plan: _Plan) -> None:
    call, final = plan.call, plan.chain[-1]
    channels = call.result.shape[-1]
    final_line = b.defs[final][3]
    lines, b.lines = b.lines, []
    saved_calls, b.kernel_calls = b.kernel_calls, []
    try:
        vec = lambda v: v if v.shape == (channels,) else b.broadcast_in_dim(v, (channels,), ())  # noqa: E731
        scale = shift = None
        for op, src, chain_first in plan.steps:
            v = vec(src)
            if op == "stablehlo.add":
                shift = v if shift is None else b.add(shift, v)
            elif op == "stablehlo.multiply":
                scale = v if scale is None else b.mul(scale, v)
                shift = None if shift is None else b.mul(shift, v)
            elif chain_first:       # acc - v
                shift = b.sub(b.full_like(v, 0.0), v) if shift is None else b.sub(shift, v)
            else:                   # v - acc
                scale = b.full_like(v, -1.0) if scale is None else b.sub(b.full_like(v, 0.0), scale)
                shift = v if shift is None else b.sub(v, shift)
        scale = scale if scale is not None else b.full_like(call.result, 1.0, (channels,))
        shift = shift if shift is not None else b.full_like(call.result, 0.0, (channels,))
        ep = b.concatenate([scale, shift, b.constant(np.array([plan.lo, plan.hi], np.float32), (2,))], 0)
        residual = plan.residual if plan.residual is not None else ep
        out = executable.dispatch(b, EPILOGUE_EXPORT[call.export], call.workgroups, [*call.inputs, ep, residual],
                                  [*call.consts, int(plan.residual is not None)], b.defs[final][4].shape)
        new = [ln for ln in b.lines if ln is not None]
        new[-1] = new[-1].replace(out.name + " = ", final + " = ", 1)
        # the folded call, for later peepholes (concat.py): its lines are the block at final_line
        folded = dataclasses.replace(b.kernel_calls[-1], line=final_line, result=Value(final, out.shape, out.dtype))
    finally:
        b.lines, b.kernel_calls = lines, saved_calls
    b.kernel_calls[b.kernel_calls.index(call)] = folded
    for name in [call.result.name, *plan.chain]:
        if call.result is not call.flat or name != call.result.name:
            b.lines[b.defs[name][3]] = None
    b.lines[call.line] = None
    b.lines[final_line] = "\n".join(new)
