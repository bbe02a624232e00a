"""The operator registry: every rule of an op declared in one place.

An ``OpDef`` bundles what nnvm spreads over attributes: typed parameters,
input/aux/output names, shape and dtype rules, and (filled by the same op
module) the gradient and StableHLO lowering rules, and the facts passes ask of
an op (in-place memory, mirroring, training mode, channels-last layout).  Passes
read only the attribute they need, never an op's name, and report a missing rule
with the op's name.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..base import AotexecError

ShapeT = tuple[int, ...] | None          # None: unknown; -1 inside: unknown dim
DTypeT = np.dtype | None

ShapeRule = Callable[[Any, list[ShapeT], list[ShapeT]], tuple[list[ShapeT], list[ShapeT]]]
TypeRule = Callable[[Any, list[DTypeT], list[DTypeT]], tuple[list[DTypeT], list[DTypeT]]]


def _const(names: Sequence[str]) -> Callable[[Any], list[str]]:
    names = list(names)
    return lambda p: names


@dataclass
class OpDef:
    name: str
    params: type | None = None
    inputs: Callable[[Any], list[str]] = _const(["data"])
    aux: Callable[[Any], list[str]] = _const([])          # subset of inputs, mutated in training
    outputs: Callable[[Any], list[str]] = _const(["output"])
    num_visible: Callable[[Any], int] | None = None        # outputs a user sees (BatchNorm)
    infer_shape: ShapeRule | None = None
    infer_type: TypeRule | None = None
    gradient: Callable | None = None
    lower: Callable | None = None
    variadic: str | None = None          # param holding the number of inputs (Concat: num_args)
    hint: str | None = None              # automatic-name prefix, default name.lower()
    is_loss: bool = False                # needs no head gradient
    aux_init: dict[str, str] = field(default_factory=dict)   # __init__ attr of auto-created input vars
    no_grad_inputs: tuple[str, ...] = ()                     # labels / indices
    doc: str = ""
    # gradient (nnvm FGradient): the backward node reads these forward values
    # ("ograd<i>", "in<i>", "out<i>"), and its lowering returns one gradient per
    # non-aux input (None: zero) followed by ``aux_updates`` new aux values.
    grad_reads: Callable[[Any], list[str]] | None = None
    aux_updates: int = 0
    forward_op: "OpDef | None" = None      # set on the generated _backward_<op>
    zero_grad: bool = False                # gradient is zero everywhere (BlockGrad): no backward node
    # MXNet 1.9.1 registers no FGradient: binding a gradient through it fails at bind, as there
    no_fgradient: bool = False
    clone_gradient: bool = False           # each input's gradient is the output's (nnvm CloneGradient: no node)
    random: bool = False                   # reads ``ctx.rng_state`` in training (Dropout)
    # MXNet 1.9.1 keeps state per node (FCreateOpState: its legacy operator properties, Dropout,
    # RNN): ``passes.common_expr`` never merges two such nodes
    stateful: bool = False
    random_when: Callable[[Any, bool], bool] | None = None   # (params, is_train): refines ``random``
    listed_inputs: bool = True             # False: MXNet names inputs input0.. (no FListInputNames)
    # rematerialization (passes.mirror): outputs a recomputed copy reads from the forward node
    # rather than recomputing them, and the rule computing the rest (``rematerializes``)
    remat_keeps: Callable[[Any], tuple[int, ...]] | None = None
    remat_lower: Callable | None = None
    backward: "OpDef | None" = None        # the generated _backward_<op> (``differentiable``)
    # (op after, when(its params), backward op): gradients taken through the op applied to this
    # op's output 0 in one node (``fused_gradient``)
    fused_gradients: tuple = ()
    # computes differently in training (batch stats, random draws); or a rule of the params
    train_mode: bool | Callable[[Any], bool] = False
    # train_mode ops: the params under which training mode computes what inference mode does
    # (Dropout: p=0; BatchNorm: use_global_stats), for backward(is_train=False)
    inference_params: Callable[[Any], Any] | None = None
    shape_only_inputs: tuple[int, ...] = ()   # inputs read for their shape only (``reads_value``)
    # memory planning (passes.plan_memory): output 0 may overwrite input 0 once nothing else
    # reads it (nnvm FInplaceOption {0, 0}); these outputs *are* input 0's bytes (FInplaceIdentity)
    inplace: bool = False
    identity_outputs: tuple[int, ...] = ()
    # mirroring (passes.mirror): never recomputed by MXNet's policy (MXNET_BACKWARD_DO_MIRROR=1);
    # a matrix product, whose output ``dots`` keeps (JAX's dots_saveable)
    mirror_kept: bool = False
    matmul_like: bool = False
    # a rule of the params: the output is a fraction of the input (strided pooling), so ``dots``
    # keeps it too (recomputing it reads the larger input in backward)
    downsamples: Callable[[Any], bool] | None = None
    # channels-last layout (passes.layout): elementwise over same-shape operands, so NHWC in,
    # NHWC out; or a rule ``fn(ops.nhwc.LayoutQuery) -> ops.nhwc.ChannelsLast | None``
    layout_agnostic: bool = False
    channels_last: Callable | None = None
    # indices it raises on when out of range: (indices input, data input, axis) per check, axis
    # None for gather_nd's rows (row j indexes axis j), verified on the host (runtime.index_checks)
    index_checks: Callable[[Any], list[tuple[int, int, int | None]]] | None = None

    def input_names(self, p: Any) -> list[str]:
        if self.variadic:
            n = getattr(p, self.variadic)
            return [f"arg{i}" for i in range(n)]
        return self.inputs(p)

    def aux_names(self, p: Any) -> list[str]:
        return self.aux(p)

    def output_names(self, p: Any) -> list[str]:
        return self.outputs(p)

    def visible_outputs(self, p: Any) -> int:
        return self.num_visible(p) if self.num_visible else len(self.outputs(p))


OPS: dict[str, OpDef] = {}


def draws_random(node, is_train: bool) -> bool:
    """Whether ``node`` reads random numbers (the entry point's ``rng`` input) in this mode."""
    op = node.op
    if op is None or not op.random:
        return False
    return op.random_when(node.params, is_train) if op.random_when is not None else is_train


def train_mode_matters(nodes) -> bool:
    """Whether ``forward(is_train=True)`` needs its own build for these nodes."""
    return any(n.op is not None and (n.op.train_mode(n.params) if callable(n.op.train_mode) else n.op.train_mode)
               for n in nodes)


def reads_value(node, pos: int) -> bool:
    """Whether ``node`` reads the value of its input ``pos`` (not only its shape: head-gradient
    and zero helper nodes), so that value must be computed, kept or passed in for it."""
    return node.op is None or pos not in node.op.shape_only_inputs


# Python-level constructor names (MXNet's function names and aliases) -> (op, name hint)
CONSTRUCTORS: dict[str, tuple[OpDef, str]] = {}


def register(op: OpDef, *aliases: str, hint: str | None = None) -> OpDef:
    """Register ``op`` under its name and MXNet's other spellings.

    ``hint`` is the automatic-name prefix (MXNet lowercases the Python function
    name, so ``a + b`` through ``_Plus`` is named ``_plus0``).
    """
    if op.name in OPS:
        raise ValueError(f"operator {op.name} registered twice")
    OPS[op.name] = op
    CONSTRUCTORS[op.name] = (op, op.hint or op.name.lower())
    for alias in aliases:
        OPS.setdefault(alias, op)
        CONSTRUCTORS[alias] = (op, alias.lower())
    return op


def get_op(name: str, node: str | None = None) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        where = f" (node '{node}')" if node else ""
        raise AotexecError(
            f"Operator '{name}'{where} is not registered in aotexec. It may be an MXNet operator "
            f"aotexec does not support yet; supported operators: see aotexec.ops.OPS.") from None


def define(name: str, *aliases: str, hint: str | None = None, **kw: Any) -> OpDef:
    """Shorthand: build an OpDef and register it."""
    inputs = kw.pop("inputs", None)
    if inputs is not None and not callable(inputs):
        kw["inputs"] = _const(inputs)
    elif inputs is not None:
        kw["inputs"] = inputs
    for key in ("aux", "outputs"):
        v = kw.get(key)
        if v is not None and not callable(v):
            kw[key] = _const(v)
    op = OpDef(name=name, hint=hint, **kw)
    return register(op, *aliases, hint=hint)


def replace(op: OpDef, **changes: Any) -> OpDef:
    return dataclasses.replace(op, **changes)


def differentiable(op: OpDef, reads: Sequence[str] | Callable[[Any], list[str]], aux_updates: int = 0,
                   name: str | None = None, **backward: Any):
    """Declare ``op``'s gradient: what its backward node reads, and the rule computing it.

    The rule is ``fn(ctx, params, *read_values) -> list[Value | None]``; ``ctx.fwd_in_shapes``
    gives the forward input shapes.  Registers the backward op as ``op.backward``, named
    ``_backward_<op>`` or ``name`` (MXNet's own name where it differs, e.g. Flatten's
    ``_backward_copy``, which several ops share); ``backward`` sets its other attributes
    (``inplace=True``...).
    """
    def deco(fn: Callable) -> Callable:
        op.grad_reads = reads if callable(reads) else _const(list(reads))
        op.aux_updates = aux_updates
        bwd = OpDef(name=name or f"_backward_{op.name}", params=op.params, forward_op=op, lower=fn,
                    inputs=lambda p: op.grad_reads(p),  # names are the read tokens
                    outputs=lambda p, op=op: backward_output_names(op, p), **backward)
        OPS[f"_backward_{op.name}"] = op.backward = bwd
        return fn
    return deco


def fused_gradient(op: OpDef, after: OpDef, when: Callable[[Any], bool], reads: Sequence[str], name: str,
                   **backward: Any):
    """Declare a gradient rule of ``op`` that also takes the gradient of ``after`` applied to its
    output 0 (when ``when(after's params)``): ``passes.fuse_gradients`` replaces the two backward
    nodes by one of it where nothing else reads ``after``'s input gradient. ``reads`` are tokens
    of ``op``'s node as in ``differentiable``, except that ``ograd0`` is ``after``'s output
    gradient; the rule returns what ``op``'s own gradient rule returns."""
    def deco(fn: Callable) -> Callable:
        bwd = OpDef(name=name, params=op.params, forward_op=op, lower=fn, inputs=_const(list(reads)),
                    outputs=lambda p, op=op: backward_output_names(op, p), **backward)
        op.fused_gradients = op.fused_gradients + ((after, when, bwd),)
        return fn
    return deco


def backward_output_names(op: OpDef, p: Any) -> list[str]:
    ins = op.input_names(p)
    aux = set(op.aux_names(p))
    grads = [f"output{i}" for i, n in enumerate(n for n in ins if n not in aux)]
    return grads + [f"aux_update{i}" for i in range(op.aux_updates)] if len(grads) + op.aux_updates > 1 \
        else ["output"]


def rematerializes(op: OpDef, keeps: Callable[[Any], tuple[int, ...]]):
    """Declare how backward recomputes ``op`` (``passes.mirror``): the outputs ``keeps(params)``
    names are read from the forward node (small values that cost a pass over the data to
    recompute: BatchNorm's batch statistics), and ``fn(ctx, params, *inputs, *kept)`` computes
    the outputs from the inputs and them."""
    def deco(fn: Callable) -> Callable:
        op.remat_keeps, op.remat_lower = keeps, fn
        return fn
    return deco


def lays_out(op: OpDef):
    """Attach ``op``'s channels-last rule ``fn(ops.nhwc.LayoutQuery) -> ops.nhwc.ChannelsLast | None``
    (``passes.layout`` asks it in execution order)."""
    def deco(fn: Callable) -> Callable:
        op.channels_last = fn
        return fn
    return deco


def lowers(*ops: OpDef):
    """Attach a StableHLO lowering rule ``fn(ctx, params, *inputs) -> Value | list[Value]``."""
    def deco(fn: Callable) -> Callable:
        for op in ops:
            op.lower = fn
        return fn
    return deco
