"""Loops and dynamic indexing for recurrent ops: ``stablehlo.while`` over a counter, and
``dynamic_slice`` / ``dynamic_update_slice`` at a step.

A recurrence lowered as one loop is emitted once whatever the sequence length, so the module
(and IREE's compile time) does not grow with it, where unrolling would add the step's ops per
step.  The body reads values of the enclosing function directly (implicit capture: StableHLO's
regions are not isolated from above, and IREE 3.13 compiles that on llvm-cpu and Vulkan).
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..emitter import Emitter, Value

Index = Value | int


def _index(b: Emitter, i: Index) -> Value:
    return i if isinstance(i, Value) else b.constant(int(i), (), "int32")


def dynamic_slice(b: Emitter, x: Value, starts: Sequence[Index], sizes: Sequence[int]) -> Value:
    """``x[starts : starts + sizes]`` with (tensor<i32>) run-time starts."""
    idx = [_index(b, s) for s in starts]
    sizes = tuple(int(s) for s in sizes)
    return b.op("stablehlo.dynamic_slice", [x, *idx], sizes, x.dtype,
                attrs="slice_sizes = array<i64: " + ", ".join(map(str, sizes)) + ">")


def dynamic_update_slice(b: Emitter, x: Value, update: Value, starts: Sequence[Index]) -> Value:
    """``x`` with ``update`` written at ``starts``."""
    idx = [_index(b, s) for s in starts]
    return b.op("stablehlo.dynamic_update_slice", [x, update, *idx], x.shape, x.dtype)


def step(b: Emitter, seq: Value, t: Value) -> Value:
    """Row ``t`` of a (T, ...) value, without the time axis."""
    row = dynamic_slice(b, seq, [t] + [0] * (seq.ndim - 1), (1,) + seq.shape[1:])
    return b.reshape(row, seq.shape[1:])


def put_step(b: Emitter, seq: Value, t: Value, row: Value) -> Value:
    """``seq`` with row ``t`` replaced by ``row`` (shaped like ``seq`` without the time axis)."""
    return dynamic_update_slice(b, seq, b.reshape(row, (1,) + seq.shape[1:]), [t] + [0] * (seq.ndim - 1))


def _return(b: Emitter, values: Sequence[Value]) -> str:
    names = ", ".join(v.name for v in values)
    types = ", ".join(v.type for v in values)
    return f'{b.indent}"stablehlo.return"({names}) : ({types}) -> ()'


def _block(b: Emitter, args: Sequence[Value]) -> str:
    return f"{b.indent[:-2]}^bb0(" + ", ".join(f"{v.name}: {v.type}" for v in args) + "):"


def while_loop(b: Emitter, n: int, init: Sequence[Value],
               body: Callable[[Value, list[Value]], Sequence[Value]]) -> list[Value]:
    """``for i in range(n): state = body(i, state)`` as one ``stablehlo.while``; ``i`` is a
    tensor<i32>.  Returns the final state."""
    carried = [b.constant(0, (), "int32"), *init]
    cond_args = [Value(b.fresh("w"), v.shape, v.dtype) for v in carried]
    body_args = [Value(b.fresh("w"), v.shape, v.dtype) for v in carried]
    outer, indent, chains, calls = b.lines, b.indent, set(b._layout_of_arg), len(b.kernel_calls)
    b.lines, b.indent = [], indent + "    "
    try:
        more = b.compare(cond_args[0], b.constant(int(n), (), "int32"), "LT")
        cond = [_block(b, cond_args), *b.lines, _return(b, [more])]
        b.lines = []
        new = list(body(body_args[0], body_args[1:]))
        nxt = [b.add(body_args[0], b.constant(1, (), "int32")), *new]
        for old, v in zip(carried, nxt):
            if (old.shape, old.dtype) != (v.shape, v.dtype):
                raise ValueError(f"loop state changes type: {old.type} -> {v.type}")
        if len(nxt) != len(carried):
            raise ValueError(f"loop body returns {len(nxt) - 1} values for {len(carried) - 1}")
        loop_body = [_block(b, body_args), *b.lines, _return(b, nxt)]
    finally:
        b.lines, b.indent = outer, indent
        # layout chains recorded inside the body point into its lines, not the function's
        for key in set(b._layout_of_arg) - chains:
            del b._layout_of_arg[key]
        # so do kernel calls': the passes over b.kernel_calls (epilogues, in-place concat) rewrite
        # the function's lines, so calls inside a loop stay plain dispatches
        del b.kernel_calls[calls:]
    b.loops += 1
    res = b.fresh("loop")
    types = ", ".join(v.type for v in carried)
    text = "\n".join([f'{indent}{res}:{len(carried)} = "stablehlo.while"('
                      + ", ".join(v.name for v in carried) + ") ({", *cond, f"{indent}  }}, {{", *loop_body,
                      f'{indent}  }}) : ({types}) -> ({types}) loc("{b.loc}")'])
    b.lines.append(text)
    return [Value(f"{res}#{k}", v.shape, v.dtype) for k, v in enumerate(carried)][1:]
