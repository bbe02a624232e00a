"""The emitter's dynamic dimensions (``symbolic.Dim``): their run-time values, computed from
the function arguments' shapes, and pinning dims IREE compiles only static."""
from __future__ import annotations

import math
from typing import Sequence

from .mlir_values import Value, tensor_type
from .symbolic import Dim, Unsupported, same as _same

DYNAMIC = -9223372036854775808      # MLIR's ShapedType::kDynamic in static_output_shape


def _starts(parts) -> list[int]:
    out, k = [], 0
    for p in parts:
        out.append(k)
        k += len(p)
    return out


def _groups(big: Sequence, small: Sequence) -> list[list[int]] | None:
    """Consecutive groups of ``big``'s dims whose products are ``small``'s dims (a collapse of
    ``big`` into ``small``), or None."""
    groups: list[list[int]] = []
    j = 0
    for t in small:
        if j >= len(big):
            return None
        g, p = [j], big[j]
        j += 1
        while not _same(p, t) and j < len(big):
            p = p * big[j]
            g.append(j)
            j += 1
        if not _same(p, t):
            return None
        groups.append(g)
    while j < len(big) and groups and not isinstance(big[j], Dim) and big[j] == 1:
        groups[-1].append(j)
        j += 1
    return groups if j == len(big) else None


class DynamicDims:
    """Mixed into ``emitter.Emitter`` (uses its ``op``, ``constant``, arithmetic and prologue)."""

    def register_dims(self, arg) -> None:
        """A function argument whose dynamic dimensions others are computed from."""
        for axis, d in enumerate(arg.shape):
            if isinstance(d, Dim):
                self._dim_sources.setdefault(d.poly, (arg, axis))

    def _in_prologue(self, fn):
        body, self.lines = self.lines, self.prologue
        try:
            return fn()
        finally:
            self.prologue, self.lines = self.lines, body

    def dim_value(self, d) -> Value:
        """A dimension's value at run time, ``tensor<i64>``: a dynamic one from the arguments'
        shapes (``stablehlo.get_dimension_size``), computed once at the top of the function."""
        if not isinstance(d, Dim):
            return self._in_prologue(lambda: self.constant(int(d), (), "int64"))
        return self._in_prologue(lambda: self._poly_value(d.poly))

    def _poly_value(self, poly: tuple) -> Value:
        hit = self._dim_values.get(poly)
        if hit is not None:
            return hit
        src = self._dim_sources.get(poly)
        if src is not None:
            arg, axis = src
            v = self.convert(self.op("stablehlo.get_dimension_size", [arg], (), "int32",
                                     attrs=f"dimension = {axis} : i64"), "int64")
        elif len(poly) == 1 and poly[0][1] == 1 and len(poly[0][0]) == 1:
            atom = poly[0][0][0]
            if isinstance(atom, str):
                raise Unsupported(f"no argument of the function has a dimension {atom}")
            _, inner, k = atom          # floor division (stablehlo.divide truncates toward zero)
            num, den = self._poly_value(inner), self.constant(k, (), "int64")
            q = self.div(num, den)
            v = self.select(self.compare(self.rem(num, den), 0, "LT"), self.sub(q, 1), q)
        else:
            v = None
            for m, c in poly:
                term = self.constant(c, (), "int64")
                for a in m:
                    term = self.mul(term, self._poly_value((((a,), 1),)))
                v = term if v is None else self.add(v, term)
        self._dim_values[poly] = v
        return v

    def shape_value(self, shape: Sequence) -> Value:
        """``tensor<rank x i64>`` of a shape's run-time dimensions (dynamic ops' shape operand)."""
        def build():
            parts = [self.reshape(self._poly_value(d.poly) if isinstance(d, Dim) else
                                  self.constant(int(d), (), "int64"), (1,)) for d in shape]
            return self.concatenate(parts, 0) if parts else self.constant(0, (0,), "int64")
        return self._in_prologue(build)

    def _index(self, d) -> str:
        """A dynamic dimension as an MLIR ``index`` (tensor.expand_shape's output sizes)."""
        hit = self._dim_index.get(d.poly)
        if hit is None:
            def build():
                t = self._poly_value(d.poly)
                e, i = self.fresh("e"), self.fresh("i")
                self.lines.append(f'{self.indent}{e} = "tensor.extract"({t.name}) : ({t.type}) -> i64 loc("{self.loc}")')
                self.lines.append(f'{self.indent}{i} = "arith.index_cast"({e}) : (i64) -> index loc("{self.loc}")')
                return i
            hit = self._dim_index[d.poly] = self._in_prologue(build)
        return hit

    def dynamic_reshape(self, x: Value, shape: tuple) -> Value:
        """A reshape with dynamic dims as IREE 3.13 compiles it: ``tensor.collapse_shape`` /
        ``tensor.expand_shape`` of consecutive groups (its stablehlo.dynamic_reshape legalizes
        only some expansions), through one dimension when the shapes share no grouping."""
        if x.ndim > len(shape) and (groups := _groups(x.shape, shape)) is not None:
            return self.op("tensor.collapse_shape", [x], shape, x.dtype, attrs=f"reassociation = {groups}")
        if x.ndim < len(shape):
            groups = _groups(shape, x.shape) or ([list(range(len(shape)))] if x.ndim == 1 else None)
            if groups is not None:
                return self._expand(x, shape, groups)
        if x.ndim == 1 and len(shape) == 1:
            return self.op("tensor.cast", [x], shape, x.dtype)
        flat = self.op("tensor.collapse_shape", [x], (math.prod(x.shape),), x.dtype,
                       attrs=f"reassociation = {[list(range(x.ndim))]}")
        if len(shape) == 0:
            raise Unsupported("a dynamic reshape to a scalar")
        return self._expand(flat, shape, [list(range(len(shape)))]) if len(shape) > 1 else \
            self.op("tensor.cast", [flat], shape, x.dtype)

    def _expand(self, x: Value, shape: tuple, groups: list[list[int]]) -> Value:
        src = tuple(math.prod(shape[k] for k in g) if not any(isinstance(shape[k], Dim) for k in g) else x.shape[i]
                    for i, g in enumerate(groups))
        if any(isinstance(a, Dim) != isinstance(b, Dim) for a, b in zip(src, x.shape)):
            x = self.op("tensor.cast", [x], src, x.dtype)    # a group of static dims needs a static source
        sizes = [self._index(d) for d in shape if isinstance(d, Dim)]
        static = ", ".join(str(DYNAMIC) if isinstance(d, Dim) else str(int(d)) for d in shape)
        out = self.fresh()
        self.lines.append(f'{self.indent}{out} = "tensor.expand_shape"({", ".join([x.name] + sizes)}) '
                          f'{{reassociation = {groups}, static_output_shape = array<i64: {static}>}} : '
                          f'({", ".join([x.type] + ["index"] * len(sizes))}) -> {tensor_type(shape, x.dtype)} '
                          f'loc("{self.loc}")')
        return Value(out, tuple(shape), x.dtype)

    def matmul_form(self, a: Value, b: Value, ca: list, cb: list, ba: list, bb: list, free_a: list,
                    free_b: list) -> Value:
        """A dot_general with dynamic dims as one (batched) matmul of collapsed operands: IREE
        3.13 rewrites several contracting / free / batch dims with stablehlo.dynamic_reshape,
        which it then fails to legalize."""
        def group(v: Value, *parts: list) -> Value:
            v = self.transpose(v, [i for p in parts for i in p])
            return self.reshape(v, tuple(math.prod(v.shape[k] for k in range(lo, lo + len(p)))
                                         for lo, p in zip(_starts(parts), parts) if p))
        lhs = group(a, ba, free_a, ca)
        rhs = group(b, bb, cb, free_b)
        nb = 1 if ba else 0
        out = self.dot_general(lhs, rhs, contract=([nb + (1 if free_a else 0)], [nb]),
                               batch=([0], [0]) if nb else ((), ()))
        shape = [a.shape[i] for i in ba] + [a.shape[i] for i in free_a] + [b.shape[i] for i in free_b]
        return self.reshape(out, tuple(shape))

    def dot_by_reduce(self, a: Value, b: Value, ca: list, cb: list, ba: list, bb: list, free_a: list,
                      free_b: list) -> Value:
        """A dot_general with dynamic dims and a unit dim as a broadcast product summed over
        the contracting dims: IREE 3.13 rewrites such dot_generals (matrix-vector and outer
        products) with reshapes to dynamic types it then rejects."""
        nb, nfa, nk = len(ba), len(free_a), len(ca)
        full = tuple([a.shape[i] for i in ba] + [a.shape[i] for i in free_a] + [a.shape[i] for i in ca]
                     + [b.shape[i] for i in free_b])
        lhs = self.transpose(a, ba + free_a + ca)
        rhs = self.transpose(b, bb + cb + free_b)
        kdims = list(range(nb + nfa, nb + nfa + nk))
        prod = self.mul(self.broadcast_in_dim(lhs, full, list(range(nb + nfa + nk))),
                        self.broadcast_in_dim(rhs, full, list(range(nb)) + kdims +
                                              list(range(nb + nfa + nk, len(full)))))
        return self.reduce(prod, kdims, "add")

    def pin(self, x: Value, axes: Sequence[int]) -> Value:
        """``x`` with its dynamic dimensions at ``axes`` fixed to the traced binding's values
        (guards, ``symbolic``): for ops IREE compiles only with those static."""
        shape = tuple(int(d) if i in axes and isinstance(d, Dim) else d for i, d in enumerate(x.shape))
        if all(a is b for a, b in zip(shape, x.shape)):
            return x
        return self.op("tensor.cast", [x], shape, x.dtype)
