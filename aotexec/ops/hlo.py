"""StableHLO builders the op families share beyond ``Emitter``'s: sorting with a carried
permutation, gathers and scatters of index tuples (gather_nd / scatter_nd, take-along-axis),
each one op whatever the tensor sizes.  They write through ``Emitter.op`` / its lines like
``emitter.scatter_add_rows``, so names, types and ``loc`` stay the emitter's."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..emitter import Emitter, Value, scatter_add_rows, tensor_type
from ..mlir_values import value_shape


def _ints(vals: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in vals) + "]"


def _array(vals: Sequence[int]) -> str:
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in vals) if len(vals) else "") + ">"


def _never(b: Emitter, v: Value, salt: float) -> Value:
    """Elementwise false, NaN included, that no compiler folds: |v| < -salt (in float32 for
    integer v, whose abs can overflow)."""
    f = v if v.dtype.kind == "f" else b.convert(v, "float32")
    return b.compare(b.abs(f), -salt, "LT")


def _own_copies(b: Emitter, operands: Sequence[Value]) -> list[Value]:
    """``operands`` as values of their own, for a sort to permute.

    IREE 3.13 sorts a ``stablehlo.sort``'s operands in place: two sorts of one constant iota
    (identical iotas are merged) both permuted that one buffer (an argsort after another sort
    came out as the composition of both permutations), and the sort of a slice failed codegen
    ('write affecting operations on global resources are restricted to workgroup distributed
    contexts').  So each operand passes a select on a never-true predicate of the key's first
    value with a constant unique in the function, so no two sorts share one."""
    key = operands[0]
    first = b.reshape(b.slice(key, (0,) * key.ndim, (1,) * key.ndim), ())
    never = _never(b, first, float(b.fresh("k")[2:]))
    return [b.select(b.broadcast_in_dim(never, v.shape, ()), b.full_like(v, 0.0), v) for v in operands]


def sort(b: Emitter, operands: Sequence[Value], dim: int, descending: bool) -> list[Value]:
    """``operands`` (one shape) sorted together along ``dim`` by operand 0, stably (ties keep
    their order, as the lower index first)."""
    operands = _own_copies(b, operands)
    key = operands[0]
    t = tensor_type((), key.dtype)
    kind = "FLOAT" if key.dtype.kind == "f" else ("UNSIGNED" if key.dtype.kind in "ub" else "SIGNED")
    args = ", ".join(f"%s{i}a: {tensor_type((), v.dtype)}, %s{i}b: {tensor_type((), v.dtype)}"
                     for i, v in enumerate(operands))
    ind = b.indent
    region = (f'{{\n{ind}^bb0({args}):\n'
              f'{ind}  %sp = "stablehlo.compare"(%s0a, %s0b) {{comparison_direction = '
              f'#stablehlo<comparison_direction {"GT" if descending else "LT"}>, compare_type = '
              f'#stablehlo<comparison_type {kind}>}} : ({t}, {t}) -> tensor<i1>\n'
              f'{ind}  "stablehlo.return"(%sp) : (tensor<i1>) -> ()\n{ind}}}')
    base = b.fresh("s")
    types = ", ".join(v.type for v in operands)
    b.lines.append(f'{ind}{base}:{len(operands)} = "stablehlo.sort"({", ".join(v.name for v in operands)}) '
                   f'({region}) {{dimension = {dim} : i64, is_stable = true}} : ({types}) -> ({types}) '
                   f'loc("{b.loc}")')
    res = [Value(f"{base}#{i}", v.shape, v.dtype) for i, v in enumerate(operands)]
    if len(res) > 1:
        # a sort whose sorted keys go unused failed IREE 3.13's codegen: on SPIR-V (argsort of
        # 512 rows: 'vector.transfer_read op with rank > 1'; of a 1-D array: a segfault) and on
        # llvm-cpu, where the dead keys became a stack buffer of the dispatch's rows (argsort /
        # topk indices of a 65,537-long axis went over the 256 KiB stack limit), so the other
        # results keep them in use
        used = _never(b, res[0], 1.0)
        res = [res[0]] + [b.select(used, b.full_like(r, 0.0), r) for r in res[1:]]
    return res


def top_k(b: Emitter, x: Value, k: int, axis: int, largest: bool) -> tuple[Value, Value]:
    """(values, int32 positions) of the k largest (``largest``) or smallest of ``x`` along
    ``axis``, in that order; ties lower index first (a stable sort's first k) for values of
    up to 32 bits, unspecified for 64-bit ones (as in MXNet, whose std::partial_sort is not
    stable).

    One ``chlo.top_k`` (IREE's linalg_ext.topk, O(n k)): IREE 3.13's llvm-cpu sort is
    quadratic in the axis, so topk k=5 of 100 rows of 300,096 (MXNet's test_order) ran for
    minutes as a sort.  top_k takes the largest along the last axis and breaks ties in no set
    order, so it ranks int64 keys: the value as an int32 of the same order, reversed for the
    smallest, above the reversed position (``_rank_keys``)."""
    perm = [d for d in range(x.ndim) if d != axis] + [axis]
    inverse = [perm.index(d) for d in range(x.ndim)]
    xt = b.transpose(x, perm)
    ranked = _rank_keys(b, xt, largest)
    # a copy of its own, as sort's: IREE 3.13 wrote into top_k's operand (a bound argument
    # came back changed from a forward pass)
    key = _own_copies(b, [ranked if ranked is not None else xt if largest else b.neg(xt)])[0]
    shape = value_shape(tuple(key.shape[:-1]) + (k,))
    base = b.fresh("t")
    b.lines.append(f'{b.indent}{base}:2 = "chlo.top_k"({key.name}) {{k = {int(k)} : i64}} : ({key.type}) -> '
                   f'({tensor_type(shape, key.dtype)}, {tensor_type(shape, np.int32)}) loc("{b.loc}")')
    top, pos = Value(f"{base}#0", shape, key.dtype), Value(f"{base}#1", shape, np.dtype("int32"))
    # as sort's: unused values became a stack buffer over llvm-cpu's limit (6 MB for k=5 of 300,096)
    pos = b.select(_never(b, top, 1.0), b.full_like(pos, 0.0), pos)
    if ranked is None:
        values = top if largest else b.neg(top)
    else:
        v32 = b.convert(b._bin("shift_right_arithmetic", top, 32.0), "int32")
        v32 = v32 if largest else b.unary("not", v32)
        values = (b.op("stablehlo.bitcast_convert", [_float_order(b, v32)], shape, "float32")
                  if x.dtype.kind == "f" else v32)
    return b.transpose(b.convert(values, x.dtype), inverse), b.transpose(pos, inverse)


def _float_order(b: Emitter, bits: Value) -> Value:
    """float32 bits <-> an int32 of the same order (its own inverse): negative floats' magnitude
    bits flipped."""
    return b._bin("xor", bits, b._bin("and", b._bin("shift_right_arithmetic", bits, 31.0), 2.0 ** 31 - 1))


def _rank_keys(b: Emitter, x: Value, largest: bool) -> Value | None:
    """int64 keys along x's last axis, largest first in top_k's order: the value's int32 order
    (reversed for the smallest) in the high half, the position reversed in the low half, so
    ties go to the lower position.  None for 64-bit values (and uint32), which do not fit."""
    if x.dtype.itemsize > 4 or x.dtype.name == "uint32" or x.dtype.kind not in "fiub":
        return None
    if x.dtype.kind == "f":     # float16 widens exactly; -0 ranks below +0, NaN beyond the infinities
        key = _float_order(b, b.op("stablehlo.bitcast_convert", [b.convert(x, "float32")], x.shape, "int32"))
    else:
        key = b.convert(x, "int32")
    key = key if largest else b.unary("not", key)
    rev = b.reverse(b.iota(x.shape, x.ndim - 1, "int64"), [x.ndim - 1])
    return b._bin("or", b._bin("shift_left", b.convert(key, "int64"), 32.0), rev)


def gather_nd(b: Emitter, data: Value, idx: Value) -> Value:
    """``data[idx[..., 0], ..., idx[..., M-1]]``: idx is int32 (Y..., M) with in-range entries;
    the result is (Y..., data.shape[M:])."""
    m, ny = idx.shape[-1], idx.ndim - 1
    rest = list(data.shape[m:])
    dn = (f"#stablehlo.gather<offset_dims = {_ints(range(ny, ny + len(rest)))}, "
          f"collapsed_slice_dims = {_ints(range(m))}, start_index_map = {_ints(range(m))}, "
          f"index_vector_dim = {ny}>")
    attrs = f"dimension_numbers = {dn}, slice_sizes = {_array([1] * m + rest)}, indices_are_sorted = false"
    return b.op("stablehlo.gather", [data, idx], list(idx.shape[:-1]) + rest, data.dtype, attrs=attrs)


def scatter_nd(b: Emitter, shape: Sequence[int], idx: Value, updates: Value, combine: str = "add") -> Value:
    """Zeros of ``shape`` with ``updates`` (Y..., shape[M:]) added (``combine='add'``) or written
    (``'set'``: a repeated index keeps one of its updates) at int32 index tuples idx (Y..., M);
    out-of-range tuples are skipped."""
    shape = tuple(int(d) for d in shape)
    m, ny = idx.shape[-1], idx.ndim - 1
    updates = scatter_updates(b, updates)
    zeros = b.full_like(updates, 0.0, shape)
    t = tensor_type((), updates.dtype)
    ind = b.indent
    body = (f'{ind}  %ss = "stablehlo.add"(%sa, %sb) : ({t}, {t}) -> {t}\n{ind}  "stablehlo.return"(%ss) : ({t}) -> ()'
            if combine == "add" else f'{ind}  "stablehlo.return"(%sb) : ({t}) -> ()')
    region = f'{{\n{ind}^bb0(%sa: {t}, %sb: {t}):\n{body}\n{ind}}}'
    dn = (f"#stablehlo.scatter<update_window_dims = {_ints(range(ny, ny + len(shape) - m))}, "
          f"inserted_window_dims = {_ints(range(m))}, scatter_dims_to_operand_dims = {_ints(range(m))}, "
          f"index_vector_dim = {ny}>")
    attrs = (f"scatter_dimension_numbers = {dn}, indices_are_sorted = false, "
             f"unique_indices = {'true' if combine == 'set' else 'false'}")
    return b.op("stablehlo.scatter", [zeros, idx, updates], shape, updates.dtype, attrs=attrs, region=region)


def scatter_updates(b: Emitter, updates: Value) -> Value:
    """A scatter's updates, materialized on Vulkan: IREE 3.13's SPIR-V codegen staged a scatter's
    fused update producer in workgroup memory (51 KiB for a Pad gradient of 4x8x20x20, 200 KiB
    for a gather_nd gradient, where the default target has 16 KiB)."""
    return b.barrier(updates) if b.vulkan else updates


def scatter_add_along(b: Emitter, shape: Sequence[int], idx: Value, updates: Value, axis: int) -> Value:
    """``emitter.scatter_add_rows`` along ``axis``, done along a leading axis with materialized
    updates on Vulkan (where IREE 3.13 moved the axis first inside the scatter's dispatch and
    staged the whole update tensor in workgroup memory)."""
    if not b.vulkan or axis == 0:
        return scatter_add_rows(b, shape, idx, scatter_updates(b, updates), axis)
    perm = [axis] + [i for i in range(len(shape)) if i != axis]
    lead = tuple(shape[i] for i in perm)
    out = scatter_add_rows(b, lead, idx, b.barrier(b.transpose(updates, perm)), 0)
    return b.transpose(out, [perm.index(i) for i in range(len(shape))])


def move_axis_last(b: Emitter, x: Value, axis: int) -> Value:
    return b.transpose(x, [i for i in range(x.ndim) if i != axis] + [axis])


def restore_axis(b: Emitter, x: Value, axis: int) -> Value:
    """The inverse of ``move_axis_last``."""
    perm = list(range(x.ndim - 1))
    perm.insert(axis, x.ndim - 1)
    return b.transpose(x, perm)


def scatter_along(b: Emitter, shape: Sequence[int], axis: int, idx: Value, updates: Value) -> Value:
    """Zeros of ``shape`` plus ``updates`` at positions ``idx`` (int32) along ``axis``: idx and
    updates have ``shape`` with ``axis`` of any length (the gradient of take-along-axis).  One
    scatter into the flat array, at row * n + idx (a scatter of index pairs failed IREE 3.13's
    SPIR-V codegen: 'vector.transfer_read op with rank > 1')."""
    shape = tuple(shape)
    moved = tuple(d for i, d in enumerate(shape) if i != axis) + (shape[axis],)
    n, k = moved[-1], idx.shape[axis]
    lead = int(np.prod(moved[:-1]))
    pos = b.reshape(move_axis_last(b, idx, axis), (lead, k))
    ids = b.add(b.mul(b.iota((lead, k), 0, "int32"), n), pos)
    u = b.reshape(move_axis_last(b, updates, axis), (lead * k,))
    out = scatter_add_rows(b, (lead * n,), b.reshape(ids, (lead * k,)), scatter_updates(b, u), 0)
    return restore_axis(b, b.reshape(out, moved), axis)
