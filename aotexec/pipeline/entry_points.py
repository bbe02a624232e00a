"""The functions of a program and their signatures (``signature.EntryPoint``):

- ``forward_infer(variables) -> outputs``
- ``forward_train(variables) -> outputs, residuals``   (activations backward reads)
- ``backward(variables, residuals, head_grads, old_grads) -> grads, aux_updates``
- ``train_step(variables, head_grads, old_grads) -> outputs, grads, aux_updates``  (one call)
- ``steps_infer_<k>`` / ``steps_train_<k>``: partial_forward's op node ``k``
each followed by ``rng`` when a random op draws, and, for planned entry points, by one
buffer per result and the transient arena (``lowering.module.lower_function``).
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from ..graph import Entry, Node
from ..kernels.code import Kernels
from ..passes import layout
from ..lowering.module import lower_function, module_text, uses_rng
from ..passes.infer import Typing
from ..signature import EntryPoint, Port, ProgramSpec, Role
from .plan import TRAIN_MODES, step_plan, training_plan

# MXNet names the parameters its layers create <layer>_<suffix>; aux states are parameters too
PARAMETER_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta", "_alpha")
RNG = Port(Role.RNG, "rng", (2,), "uint64")


def port(typing: Typing, role: Role, x: Entry | Node, name: str | None = None, index: int = -1,
         lay: layout.Layouts | None = None) -> Port:
    """``x``'s slot; a value stored channels-last (``lay``) has its physical shape."""
    e = x if isinstance(x, Entry) else Entry(x)
    nhwc = lay is not None and lay.of(e.node, e.index)
    return Port(role, e.name if name is None else name, tuple(layout.physical(typing.shape_of(e), nhwc)),
                np.dtype(typing.dtype_of(e)).name, index)


def values(typing: Typing, xs: Sequence[Entry | Node]) -> list[Port]:
    """Ports of graph entries by entry name: variables, or intermediate values."""
    return [port(typing, Role.VARIABLE if (x if isinstance(x, Node) else x.node).op is None else Role.VALUE, x)
            for x in xs]


def resident_parameters(symbol, typing: Typing) -> list[str]:
    """The variables an inference program keeps resident (read from IREE parameters, see
    ``lower_function``): aux states and arguments named like layer parameters, not empty.
    The choice only affects speed: the runtime re-reads them whenever they were written."""
    names = [n for n in symbol.list_arguments() if n.endswith(PARAMETER_SUFFIXES)]
    names += symbol.list_auxiliary_states()
    nodes = {n.name: n for n in typing.graph.variables()}
    return [n for n in names if int(np.prod(typing.node_shape(nodes[n]))) > 0]


def entry_points(symbol, typing: Typing, modes: Sequence[str], reqs: dict[str, str] | None = None,
                 mirror: bool | str = "none", monitor: str | None = None,
                 channels_last: bool = False, reductions: str = "blocks",
                 resident: Sequence[str] = (), target: str = "llvm-cpu",
                 planned: bool | None = None, fenced_pointwise: bool = False,
                 kernels: Kernels | None = None) -> tuple[str, ProgramSpec]:
    """MLIR text holding one function per mode, and the signature of each.

    ``channels_last``: 2-D convolution nets run NHWC between convolutions (passes/layout.py);
    only for llvm-cpu, where it was measured (IREE 3.13's Vulkan backend miscompiled a LeNet
    data gradient in that form).  ``reductions``: ``emitter.REDUCTIONS``.  ``target``: the
    IREE target (``Emitter.target``); ``kernels``: hand-written kernels the module may call
    (``pipeline.kernel_build.kernels_for``).
    ``resident``: variables ``forward_infer`` reads from IREE parameters (``resident_parameters``);
    such a module needs them at load (``Program.bind_parameters``), so it holds no other mode.
    ``planned``: results in caller buffers with a transient arena (default: unless monitored;
    shape-generic modules return theirs, their arena size being dynamic)."""
    lower = functools.partial(lower_function, reductions=reductions, target=target,
                              fenced_pointwise=fenced_pointwise, kernels=kernels)
    if planned is None:
        planned = monitor is None   # the debug (traced) build returns fresh results instead
    g = typing.graph
    channels_last = channels_last and planned
    fwd_lay = layout.assign(g, typing.shape_of, inference=True) if channels_last else None
    variables = g.arguments() + g.aux_states()
    heads = symbol._outputs
    spec = ProgramSpec()
    funcs = []

    def add(name: str, t: Typing, ins: list, outs: list, params: list[Port], results: list[Port],
            is_train: bool, **kw) -> None:
        funcs.append(lower(name, t, ins, outs, is_train=is_train, monitor=monitor, **kw))
        rng = [RNG] if uses_rng(t, outs, ins, is_train) else []
        spec.entries[name] = EntryPoint(name, tuple(params + rng), tuple(results),
                                        output_args=kw.get("output_args", False),
                                        resident=[n.name for k, n in enumerate(variables) if k in kw.get("resident", ())])

    outputs = [port(typing, Role.OUTPUT, e) for e in heads]
    if "forward_infer" in modes:
        kept = [k for k, n in enumerate(variables) if n.name in resident]
        add("forward_infer", typing, variables, heads,
            [port(typing, Role.VARIABLE, n) for k, n in enumerate(variables) if k not in kept], outputs,
            False, output_args=planned, layouts=fwd_lay, resident=kept)
    for mode in ("steps_infer", "steps_train"):
        if mode in modes:
            for k, (node, ins, outs) in enumerate(step_plan(typing, heads)):
                add(f"{mode}_{k}", typing, ins, outs, values(typing, ins), values(typing, outs),
                    mode == "steps_train")
    if any(m in TRAIN_MODES for m in modes):
        _training_entry_points(symbol, typing, modes, reqs or {}, mirror, variables, channels_last, planned, add,
                               fuse=monitor is None)
    return module_text(funcs, kernels), spec


def _training_entry_points(symbol, typing: Typing, modes, reqs, mirror, variables, channels_last: bool,
                           planned: bool, add, fuse: bool) -> None:
    plan = training_plan(symbol, typing, reqs, mirror, fuse)
    t = plan.typing
    full = t.graph
    lay = layout.assign(full, t.shape_of) if channels_last else None
    fvars = [full.nodes[full.nid(n)] for n in variables]          # same Node objects
    heads = symbol._outputs
    grad_entries = [plan.gg.grad_heads[n] for n in plan.wrt]
    aux_entries = list(plan.gg.aux_updates.values())
    hg_vars = [plan.gg.head_grad_vars[i] for i in plan.head_grads]
    var_ports = [port(t, Role.VARIABLE, n) for n in fvars]
    out_ports = [port(t, Role.OUTPUT, e) for e in heads]
    res_ports = [port(t, Role.RESIDUAL, e, lay=lay) for e in plan.residuals]
    hg_ports = [port(t, Role.HEAD_GRAD, v, name=heads[i].name, index=i) for i, v in zip(plan.head_grads, hg_vars)]
    old_ports = [port(t, Role.OLD_GRAD, plan.gg.grad_heads[n], name=n) for n in plan.add]  # typed like the gradient
    grad_ports = [port(t, Role.GRAD, e, name=n) for n, e in zip(plan.wrt, grad_entries)]
    aux_ports = [port(t, Role.AUX, e, name=n) for n, e in plan.gg.aux_updates.items()]
    if "forward_train" in modes:
        outs = list(heads) + plan.residuals
        kept = range(len(heads), len(outs))          # residuals stay in their (channels-last) layout
        add("forward_train", t, fvars, outs, var_ports, out_ports + res_ports, True, output_args=planned,
            layouts=lay, physical_outputs=kept, alias_early=range(len(outs)))
    if "backward" in modes:
        add("backward", t, list(fvars) + plan.residuals + hg_vars, grad_entries + aux_entries,
            var_ports + res_ports + hg_ports + old_ports, grad_ports + aux_ports, True,
            add_to=[plan.wrt.index(n) for n in plan.add], output_args=planned, layouts=lay)
    if "train_step" in modes:
        add("train_step", t, list(fvars) + hg_vars, list(heads) + grad_entries + aux_entries,
            var_ports + hg_ports + old_ports, out_ports + grad_ports + aux_ports, True,
            add_to=[len(heads) + plan.wrt.index(n) for n in plan.add], output_args=planned, layouts=lay)
