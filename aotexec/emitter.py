"""A small builder for StableHLO text in MLIR's generic form.

The emitter owns SSA names, type strings and ``loc("<node>")`` so lowering rules never format
MLIR lines by hand, and ``iree.compiler.ir`` errors name the node. Rules call the typed helpers
(``add``, ``dot_general``, ``reduce``...) and get ``Value``s back, with shape and dtype.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from .emitter_dims import DynamicDims
from .emitter_reduce import Reductions, array_attr as _array
from .kernels import conv as kernel_conv
from .kernels import matmul as kernel_matmul
from .kernels.code import Kernels
from .mlir_values import MLIR_DTYPES, Value, mlir_string, tensor_type, value_shape  # noqa: F401 (re-exported)
from .symbolic import Dim, any_dynamic, same_shape


def _moves_no_data(shape, perm) -> bool:
    """Whether transposing ``shape`` by ``perm`` keeps the non-unit axes in order (a reshape)."""
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def _float_literal(v: float, dtype) -> str:
    if np.dtype(dtype).kind in "iub":
        return "true" if np.dtype(dtype).name == "bool" and v else ("false" if np.dtype(dtype).name == "bool" else str(int(v)))
    if math.isnan(v):
        return {"float16": "0x7E00", "float64": "0x7FF8000000000000"}.get(np.dtype(dtype).name, "0x7FC00000")
    if math.isinf(v):
        bits = {"float16": ("0x7C00", "0xFC00"), "float64": ("0x7FF0000000000000", "0xFFF0000000000000")}
        pos, neg = bits.get(np.dtype(dtype).name, ("0x7F800000", "0xFF800000"))
        return pos if v > 0 else neg
    r = repr(float(v))
    if "e" in r and "." not in r:   # MLIR wants a mantissa point: 5e-05 -> 5.0e-05
        r = r.replace("e", ".0e", 1)
    return r


# how ``Emitter.reduce`` emits reductions: column reductions in row blocks (llvm-cpu), each
# one stablehlo.reduce (the fallback when a blocked module fails IREE's codegen), or each
# its own dispatch (Vulkan)
REDUCTIONS = ("blocks", "whole", "split")

# pure data movement: a chain of these from a function argument may move to the prologue
LAYOUT_OPS = {"stablehlo.transpose", "stablehlo.reverse", "stablehlo.reshape"}
# the name prefix of a resident parameter's value (loaded from its ``util.global``)
RESIDENT_ARG = "%argp"


class Emitter(Reductions, DynamicDims):
    """Appends generic-form ops to a function body."""

    def __init__(self, indent: str = "    ", reductions: str = "blocks", target: str = "llvm-cpu",
                 fenced_pointwise: bool = False, kernels: Kernels | None = None):
        if reductions not in REDUCTIONS:
            raise ValueError(f"reductions must be one of {REDUCTIONS}, got {reductions!r}")
        self.reductions = reductions        # see ``reduce``
        # 1x1 convolutions' outputs and data gradients behind barriers (a fallback form: ``ops.conv``)
        self.fenced_pointwise = fenced_pointwise
        self.kernels = kernels              # hand-written kernels the module may call (``kernels``)
        self.target = target                # the IREE target the module is for: rules avoid its miscompiles
        self.vulkan = target == "vulkan-spirv"
        self.lines: list[str | None] = []
        self.prologue: list[str] = []       # ops moved to the top of the function (see fence)
        self.indent = indent
        self.loc = "aotexec"
        self.loops = 0                      # stablehlo.while ops emitted (ops.loop.while_loop)
        self._n = 0
        self.defs: dict[str, tuple[str, list[Value], str, int, Value]] = {}   # result -> (op, operands, attrs, line, value)
        self.kernel_calls: list = []        # ``kernels.executable.KernelCall``s, for ``kernels.epilogue``
        self._layout_of_arg: dict[str, list[int]] = {}   # value -> lines of its layout chain from an argument
        self._from_resident: set[str] = set()           # values of such chains from a resident parameter
        self._transposed: dict[str, tuple[Value, tuple[int, ...]]] = {}   # transpose result -> (source, perm)
        self._free_transposes: set[str] = set()     # transposes emitted as reshapes: no layout to fence
        self._fenced_view: dict[str, tuple[Value, tuple[int, ...]]] = {}  # value -> (fenced transpose, perm)
        self._channel_sums: dict[str, tuple[int, Callable[[], Value]]] = {}   # value -> (axis, its sums): ``channel_sums``
        self._dim_sources: dict[tuple, tuple[Value, int]] = {}   # dynamic dim (polynomial) -> (argument, axis)
        self._dim_values: dict[tuple, Value] = {}                # dynamic dim -> its tensor<i64>, in the prologue
        self._dim_index: dict[tuple, str] = {}                   # dynamic dim -> its index value, in the prologue

    def body(self) -> list[str]:
        """The function body: the prologue, then the ops in emission order."""
        return self.prologue + [ln for ln in self.lines if ln is not None]

    def fresh(self, prefix: str = "v") -> str:
        self._n += 1
        return f"%{prefix}{self._n}"

    # ---- generic op ------------------------------------------------------
    def op(self, name: str, operands: Sequence[Value], shape: Sequence[int], dtype=None,
           attrs: str = "", region: str = "", results: int = 1) -> Value | list[Value]:
        dtype = np.dtype(dtype if dtype is not None else operands[0].dtype)
        shape = value_shape(shape)
        rtype = tensor_type(shape, dtype)
        base = self.fresh() if results == 1 else self.fresh("m")
        lhs = base if results == 1 else f"{base}:{results}"
        args = ", ".join(v.name for v in operands)
        in_types = ", ".join(v.type for v in operands)
        out_types = rtype if results == 1 else "(" + ", ".join([rtype] * results) + ")"
        attr_text = f" {{{attrs}}}" if attrs else ""
        region_text = f" ({region})" if region else ""
        self.lines.append(f'{self.indent}{lhs} = "{name}"({args}){region_text}{attr_text} : '
                          f'({in_types}) -> {out_types} loc("{self.loc}")')
        if name in LAYOUT_OPS and results == 1:
            src = operands[0].name
            if src.startswith("%arg") or src in self._layout_of_arg:
                self._layout_of_arg[base] = self._layout_of_arg.get(src, []) + [len(self.lines) - 1]
                if src.startswith(RESIDENT_ARG) or src in self._from_resident:
                    self._from_resident.add(base)
        if results == 1:
            self.defs[base] = (name, list(operands), attrs, len(self.lines) - 1, Value(base, shape, dtype))
            return self.defs[base][4]
        return [Value(f"{base}#{i}", shape, dtype) for i in range(results)]

    # ---- constants -------------------------------------------------------
    def constant(self, value: float | np.ndarray, shape: Sequence[int] = (), dtype="float32") -> Value:
        """``value`` may be a dynamic dimension (an element count of a shape-generic module)."""
        dtype = np.dtype(dtype)
        shape = value_shape(shape)
        if isinstance(value, Dim):
            scalar = self.convert(self.dim_value(value), dtype)
            return self.broadcast_in_dim(scalar, shape, ()) if shape else scalar
        if any_dynamic(shape):      # a splat of a shape known at run time
            return self.broadcast_in_dim(self.constant(value, (), dtype), shape, ())
        name = self.fresh("c")
        if isinstance(value, np.ndarray) and value.size > 1:
            body = ", ".join(_float_literal(float(x), dtype) for x in value.astype(dtype).ravel())
            dense = f"dense<[{body}]>" if value.ndim == 1 else None
            if dense is None:
                flat = value.astype(dtype).reshape(shape)
                dense = "dense<" + _nested(flat, dtype) + ">"
        else:
            v = float(value.ravel()[0]) if isinstance(value, np.ndarray) else float(value)
            dense = f"dense<{_float_literal(v, dtype)}>"
        t = tensor_type(shape, dtype)
        self.lines.append(f'{self.indent}{name} = "stablehlo.constant"() {{value = {dense} : {t}}} : () -> {t} loc("{self.loc}")')
        self.defs[name] = ("stablehlo.constant", [], dense, len(self.lines) - 1, Value(name, shape, dtype))
        return self.defs[name][4]

    def full_like(self, x: Value, value: float, shape: Sequence[int] | None = None, dtype=None) -> Value:
        shape = x.shape if shape is None else tuple(shape)
        dtype = x.dtype if dtype is None else np.dtype(dtype)
        c = self.constant(value, (), dtype)
        return self.broadcast_in_dim(c, shape, ()) if shape else c

    # ---- elementwise -----------------------------------------------------
    def _bin(self, name: str, a: Value, b: Value | float) -> Value:
        if not isinstance(b, Value):
            b = self.full_like(a, b)
        if isinstance(a, (int, float)):
            a = self.full_like(b, a)
        return self.op(f"stablehlo.{name}", [a, b], a.shape, a.dtype)

    def add(self, a, b): return self._bin("add", a, b)
    def sub(self, a, b): return self._bin("subtract", a, b)
    def mul(self, a, b): return self._bin("multiply", a, b)
    def div(self, a, b): return self._bin("divide", a, b)
    def max(self, a, b): return self._bin("maximum", a, b)
    def min(self, a, b): return self._bin("minimum", a, b)
    def pow(self, a, b):
        """``a ** b``; float32 through float64 on llvm-cpu: IREE 3.13's float32 expansion
        (exp of b log a) was up to 16 ulp off, where MXNet's powf rounds within one."""
        v = a if isinstance(a, Value) else b
        if v.dtype == np.float32 and not self.vulkan:
            a, b = (x if isinstance(x, Value) else self.full_like(v, x) for x in (a, b))
            return self.convert(self._bin("power", self.convert(a, "float64"), self.convert(b, "float64")), v.dtype)
        return self._bin("power", a, b)
    def rem(self, a, b): return self._bin("remainder", a, b)
    def atan2(self, a, b): return self._bin("atan2", a, b)

    def unary(self, name: str, x: Value) -> Value:
        return self.op(f"stablehlo.{name}", [x], x.shape, x.dtype)

    def neg(self, x): return self.unary("negate", x)
    def exp(self, x): return self.unary("exponential", x)
    def log(self, x): return self.unary("log", x)
    def tanh(self, x): return self.unary("tanh", x)
    def sqrt(self, x): return self.unary("sqrt", x)
    def rsqrt(self, x): return self.unary("rsqrt", x)
    def abs(self, x): return self.unary("abs", x)

    def logistic(self, x): return self.unary("logistic", x)

    def compare(self, a: Value, b: Value | float, direction: str) -> Value:
        """``direction``: EQ, NE, GT, GE, LT, LE; result is i1."""
        if not isinstance(b, Value):
            b = self.full_like(a, b)
        kind = "FLOAT" if a.dtype.kind == "f" else ("UNSIGNED" if a.dtype.kind in "ub" else "SIGNED")
        return self.op("stablehlo.compare", [a, b], a.shape, "bool",
                       attrs=f"comparison_direction = #stablehlo<comparison_direction {direction}>, "
                             f"compare_type = #stablehlo<comparison_type {kind}>")

    def select(self, pred: Value, a: Value, b: Value) -> Value:
        return self.op("stablehlo.select", [pred, a, b], a.shape, a.dtype)

    def convert(self, x: Value, dtype) -> Value:
        if np.dtype(dtype) == x.dtype:
            return x
        if x.dtype == np.bool_:
            # a select, not stablehlo.convert: IREE 3.13 turned a converted i1 that fused into a
            # matmul into -1.0 (dot(a > 0, w) came out negated)
            return self.select(x, self.full_like(x, 1, dtype=dtype), self.full_like(x, 0, dtype=dtype))
        return self.op("stablehlo.convert", [x], x.shape, dtype)

    def clamp(self, lo: Value | float, x: Value, hi: Value | float) -> Value:
        lo = lo if isinstance(lo, Value) else self.constant(lo, (), x.dtype)
        hi = hi if isinstance(hi, Value) else self.constant(hi, (), x.dtype)
        return self.op("stablehlo.clamp", [lo, x, hi], x.shape, x.dtype)

    # ---- shapes ----------------------------------------------------------
    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        shape = value_shape(shape)
        if same_shape(shape, x.shape):
            return x
        if any_dynamic(x.shape):
            known = value_shape(x.shape)      # dims pinned since x was typed: tensor ops want them static
            if any(isinstance(a, Dim) != isinstance(b, Dim) for a, b in zip(x.shape, known)):
                x = self.op("tensor.cast", [x], known, x.dtype)
        if any_dynamic(shape) or any_dynamic(x.shape):
            return self.dynamic_reshape(x, shape)
        return self.op("stablehlo.reshape", [x], shape, x.dtype)

    def transpose(self, x: Value, perm: Sequence[int]) -> Value:
        perm = tuple(perm)
        if perm == tuple(range(x.ndim)):
            return x
        if not any_dynamic(x.shape) and _moves_no_data(x.shape, perm):
            y = self.reshape(x, tuple(x.shape[p] for p in perm))
            self._free_transposes.add(y.name)
            return y
        y = self.op("stablehlo.transpose", [x], tuple(x.shape[p] for p in perm), x.dtype,
                    attrs=f"permutation = {_array(perm)}")
        self._transposed[y.name] = (x, perm)
        return y

    def fenced_transpose(self, x: Value, perm: Sequence[int]) -> Value:
        """``x`` transposed behind a barrier, remembered (with ``x``'s own transpose source)
        so that ``reduce`` can read it instead of ``x``."""
        t = self.transpose(x, perm)
        y = t if t.name in self._free_transposes else self.barrier(t)
        self._fenced_view[x.name] = (y, tuple(perm))
        if x.name in self._transposed:
            src, first = self._transposed[x.name]
            self._fenced_view.setdefault(src.name, (y, tuple(first[p] for p in perm)))
        return y

    def broadcast_in_dim(self, x: Value, shape: Sequence[int], dims: Sequence[int]) -> Value:
        shape = value_shape(shape)
        if same_shape(shape, x.shape) and tuple(dims) == tuple(range(x.ndim)):
            return x
        if any_dynamic(shape):
            # IREE legalizes only broadcasts that say which dims expand: a dynamic dim maps to an
            # equal one (a rule that broadcast a 1 asked, and the guard pinned it to 1)
            ones = [i for i, d in enumerate(x.shape) if not isinstance(d, Dim) and d == 1]
            attrs = (f"broadcast_dimensions = {_array(dims)}, known_expanding_dimensions = {_array(ones)}, "
                     f"known_nonexpanding_dimensions = {_array([i for i in range(x.ndim) if i not in ones])}")
            return self.op("stablehlo.dynamic_broadcast_in_dim", [x, self.shape_value(shape)], shape, x.dtype,
                           attrs=attrs)
        return self.op("stablehlo.broadcast_in_dim", [x], shape, x.dtype,
                       attrs=f"broadcast_dimensions = {_array(dims)}")

    def broadcast_to(self, x: Value, shape: Sequence[int]) -> Value:
        """numpy-style broadcast (trailing alignment)."""
        shape = tuple(shape)
        off = len(shape) - x.ndim
        if any(d != 1 and d != shape[off + i] for i, d in enumerate(x.shape)):
            raise ValueError(f"cannot broadcast {x.shape} to {shape}")
        keep = [i for i, d in enumerate(x.shape) if d == shape[off + i]]
        if len(keep) != x.ndim:
            x = self.reshape(x, tuple(x.shape[i] for i in keep))
        return self.broadcast_in_dim(x, shape, [off + i for i in keep])

    def slice(self, x: Value, start: Sequence[int], limit: Sequence[int], strides: Sequence[int] | None = None) -> Value:
        strides = tuple(strides) if strides else (1,) * x.ndim
        shape = tuple(max(0, -(-(l - s) // st)) for s, l, st in zip(start, limit, strides))
        if any_dynamic(start) or any_dynamic(limit):
            shape = tuple(l - s if st == 1 else (l - s + st - 1) // st for s, l, st in zip(start, limit, strides))
            return self.op("stablehlo.real_dynamic_slice", [x, self.shape_value(start), self.shape_value(limit),
                                                            self.shape_value(strides)], shape, x.dtype)
        return self.op("stablehlo.slice", [x], shape, x.dtype,
                       attrs=f"start_indices = {_array(start)}, limit_indices = {_array(limit)}, "
                             f"strides = {_array(strides)}")

    def concatenate(self, xs: Sequence[Value], axis: int) -> Value:
        if len(xs) == 1:
            return xs[0]
        shape = list(xs[0].shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        return self.op("stablehlo.concatenate", list(xs), shape, xs[0].dtype, attrs=f"dimension = {axis} : i64")

    def reverse(self, x: Value, dims: Sequence[int]) -> Value:
        return self.op("stablehlo.reverse", [x], x.shape, x.dtype, attrs=f"dimensions = {_array(dims)}")

    def pad(self, x: Value, value: float, low: Sequence[int], high: Sequence[int],
            interior: Sequence[int] | None = None) -> Value:
        interior = tuple(interior) if interior else (0,) * x.ndim
        if not any(low) and not any(high) and not any(interior):
            return x
        shape = tuple(lo + d + hi + max(d - 1, 0) * it for d, lo, hi, it in zip(x.shape, low, high, interior))
        pv = self.constant(value, (), x.dtype)
        return self.op("stablehlo.pad", [x, pv], shape, x.dtype,
                       attrs=f"edge_padding_low = {_array(low)}, edge_padding_high = {_array(high)}, "
                             f"interior_padding = {_array(interior)}")

    def iota(self, shape: Sequence[int], dim: int, dtype="int32") -> Value:
        shape = value_shape(shape)
        if any_dynamic(shape):
            return self.op("stablehlo.dynamic_iota", [self.shape_value(shape)], shape, dtype,
                           attrs=f"iota_dimension = {dim} : i64")
        t = tensor_type(shape, dtype)
        name = self.fresh()
        self.lines.append(f'{self.indent}{name} = "stablehlo.iota"() {{iota_dimension = {dim} : i64}} : () -> {t} loc("{self.loc}")')
        return Value(name, tuple(shape), np.dtype(dtype))

    # ---- contractions ----------------------------------------------------
    def dot_general(self, a: Value, b: Value, contract: tuple[Sequence[int], Sequence[int]],
                    batch: tuple[Sequence[int], Sequence[int]] = ((), ()), alone: bool = False) -> Value:
        """``alone``: no consumer of the product would fuse into its dispatch anyway (a kernel
        call, ``kernels.matmul``, then costs no pass of its own)."""
        (ca, cb), (ba, bb) = contract, batch
        free_a = [i for i in range(a.ndim) if i not in ca and i not in ba]
        free_b = [i for i in range(b.ndim) if i not in cb and i not in bb]
        if any_dynamic(a.shape) or any_dynamic(b.shape):
            unit = [d for d in [*(a.shape[i] for i in [*ca, *free_a]), *(b.shape[i] for i in free_b)]
                    if not isinstance(d, Dim) and d == 1]
            if unit or not ca:
                return self.dot_by_reduce(a, b, list(ca), list(cb), list(ba), list(bb), free_a, free_b)
            if max(len(ca), len(ba), len(free_a), len(free_b)) > 1:
                return self.matmul_form(a, b, list(ca), list(cb), list(ba), list(bb), free_a, free_b)
        if self.kernels is not None:
            out = kernel_matmul.call(self, a, b, ca, cb, ba, bb, alone)
            if out is not None:
                return out
        shape = [a.shape[i] for i in ba] + [a.shape[i] for i in free_a] + [b.shape[i] for i in free_b]
        dims = (f"#stablehlo.dot<lhs_batching_dimensions = [{', '.join(map(str, ba))}], "
                f"rhs_batching_dimensions = [{', '.join(map(str, bb))}], "
                f"lhs_contracting_dimensions = [{', '.join(map(str, ca))}], "
                f"rhs_contracting_dimensions = [{', '.join(map(str, cb))}]>")
        return self.op("stablehlo.dot_general", [a, b], shape, a.dtype, attrs=f"dot_dimension_numbers = {dims}")

    def convolution(self, x: Value, w: Value, out_shape: Sequence[int], spec: str, stride: Sequence[int],
                    pad: Sequence[tuple[int, int]], lhs_dilation: Sequence[int], rhs_dilation: Sequence[int],
                    groups: int = 1, batch_groups: int = 1) -> Value:
        """``stablehlo.convolution`` with dimension numbers ``spec`` (``ops.conv_forms`` picks
        the form a convolution takes)."""
        # IREE 3.13 legalizes convolutions with dynamic batch and feature dims, not spatial ones
        lhs, rhs, out = (part.strip("[]").split(", ") for part in spec.replace("->", "x").split("]x["))
        # (grouped ones, whose legalization reshapes the operands, with static shapes only);
        # only the batch stays dynamic: dynamic channels reach codegen bugs of IREE 3.13 in
        # training modules ("affine.delinearize_index ... statically non-positive")
        keep = groups == 1 and batch_groups == 1
        x = self.pin(x, [i for i, c in enumerate(lhs) if c != "b" or not keep])
        w = self.pin(w, range(w.ndim))
        out_shape = tuple(d if c == "b" and keep else int(d) for d, c in zip(out_shape, out))
        pads = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in pad) + "]"
        attrs = (f"dimension_numbers = #stablehlo.conv<{spec}>, window_strides = {_array(stride)}, "
                 f"padding = dense<{pads}> : tensor<{len(stride)}x2xi64>, lhs_dilation = {_array(lhs_dilation)}, "
                 f"rhs_dilation = {_array(rhs_dilation)}, feature_group_count = {groups} : i64, "
                 f"batch_group_count = {batch_groups} : i64")
        return self.op("stablehlo.convolution", [x, w], out_shape, x.dtype, attrs=attrs)

    def barrier(self, v: Value) -> Value:
        if any_dynamic(v.shape):    # IREE 3.13 cannot resolve the dims of a dynamic barrier's result
            return v
        return self.op("stablehlo.optimization_barrier", [v], v.shape, v.dtype)

    def after(self, x: Value, dep: Value) -> Value:
        """``x``, computed only once ``dep`` is: a data dependency that costs no barrier.

        IREE schedules every dispatch whose operands are ready in one concurrent wave and
        keeps all their results alive together; this orders work without ending the
        execution region (``fence`` does).  The predicate ``dep[0] > +inf`` is false for
        every value, NaN included, so the select returns ``x`` bit for bit.  On CUDA ``x`` itself:
        IREE 3.13's CUDA codegen failed to bufferize the one-element read (``failed to bufferize
        op``, a tensor<1x1x1x1xf32> alloc_tensor) in a training step with recomputation."""
        if self.target == "cuda":
            return x
        first = self.convert(self.reshape(self.slice(dep, (0,) * dep.ndim, (1,) * dep.ndim), ()), "float32")
        never = self.broadcast_in_dim(self.compare(first, float("inf"), "GT"), x.shape, ())
        return self.select(never, self.full_like(x, 0.0), x)

    def alias(self, v: Value, storage: str) -> Value:
        """``v`` bound to the caller's buffer view ``storage`` (``hal.tensor.alias``): IREE
        writes it there where it is computed, and later readers read it from there."""
        out = self.fresh("stored")
        self.lines.append(f'{self.indent}{out} = hal.tensor.alias {v.name} : {v.type} to {storage} : '
                          f'!hal.buffer_view loc("{self.loc}")')
        return Value(out, v.shape, v.dtype)

    def fence(self, v: Value) -> Value:
        """``v`` behind an optimization barrier (IREE 3.13 folds layout transposes into a
        convolution's operands, giving the slow NCHW form, unless fenced).

        A barrier ends one of IREE's execution regions, and IREE sums the regions' transient
        memory (EmplaceTransients packs them with overlapping lifetimes), so a layout change
        of a function argument (a weight) is fenced at the top of the function instead: all
        those fences share one small region rather than splitting the function at each use."""
        if v.name in self._free_transposes:
            return v
        chain = self._layout_of_arg.get(v.name)
        if chain is None:
            return self.barrier(v)
        if v.name in self._from_resident:
            # a resident parameter's layout change: left unfenced, IREE hoists it (and a matmul's
            # data-tiling pack of it) into the module's initializer; behind a barrier both ran
            # at every call (ResNet-50 b1: the 1x1 weights' packs, ~6% of its CPU time)
            return v
        for i in chain:
            if self.lines[i] is not None:
                self.prologue.append(self.lines[i])
                self.lines[i] = None
        body, self.lines = self.lines, self.prologue
        try:
            return self.barrier(v)
        finally:
            self.prologue, self.lines = self.lines, body

    NHWC = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"

    def conv_nhwc(self, x: Value, wt: Value, out_shape, stride, pad, lhs_dilation=(1, 1), rhs_dilation=(1, 1),
                  groups: int = 1, batch_groups: int = 1) -> Value:
        """A 2-D convolution of channels-last ``x`` (N, H, W, C) with ``wt`` (KH, KW, C/groups, O),
        through ``kernels.conv`` where the module may call kernels and it takes this one."""
        out = kernel_conv.call(self, x, wt, out_shape, stride, pad, lhs_dilation, rhs_dilation, groups, batch_groups)
        return out if out is not None else self.convolution(x, wt, out_shape, self.NHWC, stride, pad, lhs_dilation, rhs_dilation, groups,
                                batch_groups)

    def reduce_window(self, x: Value, kind: str, window: Sequence[int], strides: Sequence[int],
                      pad: Sequence[tuple[int, int]], out_shape: Sequence[int], init: float | None = None) -> Value:
        init_v = self.constant(self._init_value(kind, x.dtype) if init is None else init, (), x.dtype)
        x = self.pin(x, range(x.ndim))     # IREE 3.13 legalizes reduce_window with static shapes only
        out_shape = tuple(int(d) for d in out_shape)
        pads = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in pad) + "]"
        attrs = (f"window_dimensions = {_array(window)}, window_strides = {_array(strides)}, "
                 f"padding = dense<{pads}> : tensor<{x.ndim}x2xi64>")
        return self.op("stablehlo.reduce_window", [x, init_v], out_shape, x.dtype, attrs=attrs,
                       region=self._region(kind, x.dtype))

    # ---- indexing --------------------------------------------------------
    def gather_rows(self, table: Value, idx: Value, axis: int = 0) -> Value:
        """``take(table, idx, axis)`` with in-range int32 indices (shape idx.shape)."""
        slice_sizes = [1 if i == axis else d for i, d in enumerate(table.shape)]
        offset_dims = [i for i in range(table.ndim) if i != axis]
        out_shape = list(idx.shape) + [d for i, d in enumerate(table.shape) if i != axis]
        idx2 = self.reshape(idx, tuple(idx.shape) + (1,))
        offset_out = [idx.ndim + k for k in range(len(offset_dims))]
        attrs = (f"dimension_numbers = #stablehlo.gather<offset_dims = [{', '.join(map(str, offset_out))}], "
                 f"collapsed_slice_dims = [{axis}], start_index_map = [{axis}], index_vector_dim = {idx.ndim}>, "
                 f"slice_sizes = {_array(slice_sizes)}, indices_are_sorted = false")
        out = self.op("stablehlo.gather", [table, idx2], out_shape, table.dtype, attrs=attrs)
        if axis == 0:
            return out
        # gather puts the index dims first; move them to position ``axis``
        nidx = idx.ndim
        rest = table.ndim - 1
        perm = list(range(nidx, nidx + axis)) + list(range(nidx)) + list(range(nidx + axis, nidx + rest))
        return self.transpose(out, perm)


def _nested(arr: np.ndarray, dtype) -> str:
    if arr.ndim == 0:
        return _float_literal(float(arr), dtype)
    return "[" + ", ".join(_nested(a, dtype) for a in arr) + "]"


def unbroadcast(b: Emitter, g: Value, shape: Sequence[int]) -> Value:
    """Sum ``g`` down to ``shape`` (the gradient of a numpy-style broadcast to g.shape)."""
    shape = tuple(shape)
    if same_shape(g.shape, shape):
        return g
    off = g.ndim - len(shape)
    dims = list(range(off)) + [off + i for i, d in enumerate(shape) if d == 1 and g.shape[off + i] != 1]
    r = b.reduce(g, dims, "add")
    return b.reshape(r, shape)


def scatter_add_rows(b: Emitter, shape: Sequence[int], idx: Value, updates: Value, axis: int = 0) -> Value:
    """The gradient of ``gather_rows``: zeros of ``shape`` with ``updates`` (shape
    shape[:axis] + idx.shape + shape[axis+1:]) added at in-range int32 ids ``idx`` along ``axis``;
    repeated ids accumulate."""
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(idx.shape)) if idx.shape else 1
    idx = b.reshape(idx, (n, 1))
    updates = b.reshape(updates, shape[:axis] + (n,) + shape[axis + 1:])
    window = [i for i in range(len(shape)) if i != axis]
    zeros = b.full_like(updates, 0.0, shape)
    t = tensor_type((), updates.dtype)
    region = (f'{{\n{b.indent}^bb0(%sa: {t}, %sb: {t}):\n{b.indent}  %ss = "stablehlo.add"(%sa, %sb) : ({t}, {t}) -> {t}\n'
              f'{b.indent}  "stablehlo.return"(%ss) : ({t}) -> ()\n{b.indent}}}')
    attrs = (f"scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [{', '.join(map(str, window))}], "
             f"inserted_window_dims = [{axis}], scatter_dims_to_operand_dims = [{axis}], index_vector_dim = 1>, "
             f"indices_are_sorted = false, unique_indices = false")
    return b.op("stablehlo.scatter", [zeros, idx, updates], shape, updates.dtype, attrs=attrs, region=region)


def rng_bits(b: Emitter, state: Value, shape: Sequence[int], dtype="uint32") -> tuple[Value, Value]:
    """``stablehlo.rng_bit_generator`` (THREE_FRY): (new state, random bits of ``shape``)."""
    st = b.fresh("r")
    bt = tensor_type(shape, dtype)
    b.lines.append(f'{b.indent}{st}:2 = "stablehlo.rng_bit_generator"({state.name}) '
                   f'{{rng_algorithm = #stablehlo<rng_algorithm THREE_FRY>}} : ({state.type}) -> '
                   f'({state.type}, {bt}) loc("{b.loc}")')
    return (Value(f"{st}#0", state.shape, state.dtype),
            Value(f"{st}#1", tuple(int(d) for d in shape), np.dtype(dtype)))
