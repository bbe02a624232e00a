"""The emitter's reductions: ``stablehlo.reduce`` over some dims, and column reductions of
channels-last values in row blocks (llvm-cpu)."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from .mlir_values import Value, tensor_type
from .symbolic import any_dynamic


def array_attr(vals: Sequence[int]) -> str:
    return "array<i64" + (": " + ", ".join(str(int(v)) for v in vals) if len(vals) else "") + ">"


class Reductions:
    """Mixin of ``Emitter``: its ``reductions`` mode picks the form (``REDUCTIONS``)."""

    def _region(self, kind: str, dtype) -> str:
        t = tensor_type((), dtype)
        body = {"add": "stablehlo.add", "max": "stablehlo.maximum", "min": "stablehlo.minimum",
                "mul": "stablehlo.multiply"}[kind]
        return (f'{{\n{self.indent}^bb0(%ra: {t}, %rb: {t}):\n{self.indent}  %rr = "{body}"(%ra, %rb) : ({t}, {t}) -> {t}\n'
                f'{self.indent}  "stablehlo.return"(%rr) : ({t}) -> ()\n{self.indent}}}')

    INIT = {"add": 0.0, "mul": 1.0, "max": -math.inf, "min": math.inf}

    # column reductions of at least this many rows are summed in row blocks (``reduce``);
    # ResNet-8 b16 training 24.0 / 22.1 / 21.6 ms with 4096 / 1024 / 256 (its last stage's
    # BatchNorms reduce 1024 rows)
    COLUMN_ROWS = 256
    # blocks of up to 64 rows (at least 16): summing 50,176 x 256 in 784 blocks of 64 rows ran
    # 2x faster than in 64 blocks of 784 (ResNet-18 b16 forward_train ~3% faster); rows with no
    # such divisor fall back to 64 blocks
    COLUMN_BLOCK_ROWS = (64, 16)
    COLUMN_CHUNKS = 64

    def _column_chunks(self, x: Value, dims: list[int]) -> int:
        """Row blocks to sum ``x`` over its leading ``dims`` in, 0 for one reduction."""
        if self.reductions != "blocks" or dims != list(range(len(dims))) or len(dims) == x.ndim \
                or any_dynamic(x.shape):
            return 0
        rows = int(np.prod(x.shape[:len(dims)]))
        if rows < self.COLUMN_ROWS:
            return 0
        most, least = self.COLUMN_BLOCK_ROWS
        block = next((r for r in range(most, least - 1, -1) if rows % r == 0), 0)
        if block:
            return rows // block
        return 0 if rows % self.COLUMN_CHUNKS else self.COLUMN_CHUNKS

    def know_channel_sums(self, x: Value, axis: int, sums: Callable[[], Value]) -> None:
        """Record that ``sums()`` emits x summed over every dim but ``axis`` in closed form (an op
        whose gradient's sums follow from values it has), for ``channel_sums``."""
        self._channel_sums[x.name] = (axis % x.ndim, sums)

    def channel_sums(self, x: Value, axis: int) -> Value:
        """x summed over every dim but ``axis`` (a bias gradient): the closed form recorded by
        ``know_channel_sums`` where there is one, else a reduction."""
        known = self._channel_sums.get(x.name)
        if known is not None and known[0] == axis % x.ndim:
            return known[1]()
        dims = [i for i in range(x.ndim) if i != axis % x.ndim]
        if x.ndim < 3 or self.has_fenced_view(x):
            return self.reduce(x, dims, "add")
        # over the batch first, then the rest: one reduction over all of them, fused with a weight
        # gradient's contraction, made IREE 3.13's llvm-cpu codegen fail at random (invalid
        # vector.contract; 1 compile in 3 of the train_step of a 3-channel conv-BatchNorm net
        # with its BatchNorm recomputed); a fenced layout copy of x is summed instead (``reduce``)
        return self.reduce(self.reduce(x, [0], "add"), [d - 1 for d in dims[1:]], "add")

    def has_fenced_view(self, x: Value) -> bool:
        """Whether ``fenced_transpose`` made a layout copy of ``x`` (which ``reduce`` reads)."""
        return x.name in self._fenced_view

    def reduce(self, x: Value, dims: Sequence[int], kind: str = "add") -> Value:
        dims = sorted(dims)
        if not dims:
            return x
        view = self._fenced_view.get(x.name)
        if view is not None and kind == "add":
            # Read the fenced layout copy a convolution made of x instead (a bias gradient next
            # to a weight gradient): x's only other reader is then that copy, which IREE fuses
            # into x's producer, so x itself is never stored (LeNet's conv1: 2.95 MB fewer in
            # backward's arena).  Only when the kept dims keep their order.
            xv, perm = view
            kept = [d for d in perm if d not in dims]
            if kept == sorted(kept):
                x, dims = xv, [i for i, d in enumerate(perm) if d in dims]
        chunks = self._column_chunks(x, dims)
        if chunks:
            # A reduction over the leading dims of a channels-last value (BatchNorm statistics
            # and gradients, bias gradients) in IREE 3.13's llvm-cpu codegen: workgroups of
            # two channels each walking every row with a stride when a full-size result shares
            # the dispatch (ResNet-8's first-stage BatchNorm gradient: 3.7 ms of CPU).  Summing
            # contiguous row blocks first gives each workgroup whole rows of all channels.
            # Some modules so blocked fail IREE 3.13's codegen (ResNet-8's backward without
            # recomputation: a matmul epilogue with three packed results, "operations with
            # large vector sizes"); pipeline.compile_program then compiles them "whole".
            k = len(dims)
            rows = int(np.prod(x.shape[:k]))
            blocks = self.reshape(x, (chunks, rows // chunks) + tuple(x.shape[k:]))
            return self._reduce_op(self.reduce(blocks, [1], kind), [0], kind)    # the block sums: one level
        if self.reductions == "split":
            x = self.barrier(x)
        return self._reduce_op(x, dims, kind)

    def _reduce_op(self, x: Value, dims: list[int], kind: str) -> Value:
        init = self.constant(self._init_value(kind, x.dtype), (), x.dtype)
        shape = [d for i, d in enumerate(x.shape) if i not in dims]
        y = self.op("stablehlo.reduce", [x, init], shape, x.dtype, attrs=f"dimensions = {array_attr(dims)}",
                    region=self._region(kind, x.dtype))
        # "split": a reduction is its own dispatch, reading a materialized input.
        # IREE 3.13's SPIR-V codegen stages a reduction's whole input in workgroup memory when
        # its producer also stores a full-size result or consumers are fused after it;
        # BatchNorm training at batch 8 x 8 channels x 16 x 16 needed 64 KiB where the default
        # Vulkan target has 16 KiB, so conv + BatchNorm nets did not compile for Vulkan.
        return self.barrier(y) if self.reductions == "split" else y

    def _init_value(self, kind: str, dtype) -> float:
        v = self.INIT[kind]
        if np.dtype(dtype).kind in "iu" and math.isinf(v):
            info = np.iinfo(np.dtype(dtype))
            return info.min if v < 0 else info.max
        return v
