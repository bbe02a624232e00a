"""Model parallelism (MXNet's ``group2ctx`` / ``ctx_group``): nodes run on the context of
their group, one compiled function per run of consecutive nodes on one context, with
copies between devices at group boundaries (MXNet's ``_CrossDeviceCopy``), forward and
backward.  Copies go through the host: devices here (cpu, vulkan) share no memory.
"""
from __future__ import annotations

import numpy as np

from ..base import AotexecError
from ..graph import Entry
from .context import Context
from .device import Device
from .executor import HEAD_GRAD_REQUIRED, Executor, serialized
from .ndarray import NDArray, array as nd_array
from .provider import Placement


class PlacedExecutor(Executor):
    def __init__(self, *args, group2ctx: dict, **kwargs):
        self._group2ctx = {k: v for k, v in group2ctx.items()}
        self._plans: dict[bool, Placement] = {}
        self._values: dict | None = None
        super().__init__(*args, **kwargs)

    # ---- planning ----------------------------------------------------------
    def _plan(self, train: bool) -> Placement:
        """Segments and their programs (through the provider: compiling them is compile-side work)."""
        plan = self._plans.get(train)
        if plan is None:
            plan = self._plans[train] = self._provider.placement(self._symbol, self._typing, self._grad_req,
                                                                 self._group2ctx, self._ctx, train)
        return plan

    # ---- execution -----------------------------------------------------------
    def _variable(self, name: str) -> NDArray:
        for d in (self.arg_dict, self.aux_dict, self._head_vars):
            if name in d:
                return d[name]
        raise AotexecError(f"group2ctx: no array for variable {name}")

    def _value_on(self, e: Entry, ctx: Context):
        if e.node.op is None:
            arr = self._variable(e.node.name)
            src, view = arr.context, arr.handle
        else:
            src, view = self._values[(id(e.node), e.index)]
        if src == ctx:
            return view
        return Device.get(ctx).upload(Device.get(src).download(view))   # _CrossDeviceCopy

    def _run(self, segments, programs, backward: bool) -> None:
        for seg in segments:
            if seg.backward != backward:
                continue
            prog = programs[seg.ctx]
            views = [self._value_on(e, seg.ctx) for e in seg.inputs] + self._rng(prog, seg.name)
            for e, v in zip(seg.outputs, prog.run(seg.name, views)):
                self._values[(id(e.node), e.index)] = (seg.ctx, v)

    def _deliver(self, e: Entry, dst: NDArray, add: bool = False) -> None:
        ctx, view = self._values[(id(e.node), e.index)] if e.node.op is not None else \
            (self._variable(e.node.name).context, self._variable(e.node.name).handle)
        host = Device.get(ctx).download(view)
        dst[:] = host + dst.asnumpy() if add else host

    @serialized
    def forward(self, is_train: bool = False, **kwargs) -> list[NDArray]:
        self._feed(kwargs)
        train = bool(is_train and self._wrt)
        plan = self._plan(train)
        self._values, self._head_vars = {}, {}
        self._run(plan.segments, plan.programs, backward=False)
        for out, head in zip(self.outputs, self._symbol._outputs):
            self._deliver(head, out)
        self._residuals = self._values if train else None
        return self.outputs

    def _recompute_residuals(self) -> None:
        """backward() after an inference forward: a training forward, the outputs kept."""
        kept = [o.asnumpy() for o in self.outputs]
        self.forward(is_train=True)
        for o, v in zip(self.outputs, kept):
            o[:] = v

    @serialized
    def backward(self, out_grads=None, is_train: bool = True) -> None:
        if not self._wrt:
            return
        self._check_backward_ready()
        plan = self._plan(True)
        given = self._given_head_grads(out_grads)
        for i, var in plan.head_grad_vars.items():
            if i >= len(given) or given[i] is None:
                raise AotexecError(HEAD_GRAD_REQUIRED + f" (output {i}: {self._out_names[i]})")
            self._head_vars[var.name] = given[i] if isinstance(given[i], NDArray) else \
                nd_array(np.asarray(given[i]), ctx=self._ctx)
        self._run(plan.segments, plan.programs, backward=True)
        for name, e in plan.grad_heads.items():
            self._deliver(e, self.grad_dict[name], add=self._grad_req[name] == "add")
        for name, e in plan.aux_updates.items():
            self._deliver(e, self.aux_dict[name])

    @serialized
    def forward_backward(self, out_grads=None, **kwargs) -> list[NDArray]:
        outs = self.forward(is_train=True, **kwargs)
        self.backward(out_grads)
        return outs
