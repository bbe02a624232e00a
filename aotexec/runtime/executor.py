"""The Executor: MXNet's forward / backward / reshape over compiled IREE programs.

Its programs come from the ``ProgramProvider`` it was bound with (``runtime.provider``):
compiled on demand, or precompiled in an artifact, so the runtime never imports the
compiler.  ``forward`` copies keyword inputs in place and makes one IREE call; the
arrays bound to each function's ports (``signature.Role``) are the executor's own.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable, Sequence

import numpy as np

from ..base import AotexecError
from ..ops.registry import train_mode_matters
from ..passes.infer import Typing
from ..signature import Port, Role
from .bind_args import _as_ndarray, bind_typing
from .context import Context
from .index_checks import index_checks, violation
from .inference_twin import inference_symbol
from .ndarray import NDArray, array as nd_array, zeros as nd_zeros
from .program import Program
from .provider import ProgramProvider

HEAD_GRAD_REQUIRED = ("Check failed: i < head_grads.size() && !head_grads[i].is_none(): Because the last "
                      "operator is not Loss function, head_gradient is required when calling backward. If you "
                      "are attempting to minimize the output as an objective, please modify your network and "
                      "pass it through the make_loss symbol.")


def serialized(method: Callable) -> Callable:
    """One call at a time per executor: its arrays, arena and residuals are shared state."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return locked


def _copy_param(name: str, src, dst: NDArray) -> None:
    """MXNet's ``src.copyto(dst)``: shapes must match (no numpy broadcasting); dtypes convert."""
    shape = tuple(getattr(src, "shape", np.shape(src)))
    if shape != tuple(dst.shape):
        raise AotexecError(f"Check failed: from.shape() == to->shape() operands shape mismatch: copy_params_from "
                           f"got {name} of shape {shape}; the executor's array is {tuple(dst.shape)}")
    dst[:] = src


class Executor:
    """An MXNet-style executor over one compiled program.

    Thread safety: calls are serialized by a per-executor lock, and each thread reads its own
    ``outputs`` (the thread that bound the executor gets the arrays allocated at bind, any
    other thread a set of its own on first use), so a result is always the caller's own.
    Inputs passed as ``forward`` keyword arguments are copied under the lock; arrays written
    directly (``arg_dict[n][:] = ...``) and gradients are shared by all threads.  ``backward``
    uses the activations of this thread's ``forward(is_train=True)`` (recomputing them when the
    last forward was an inference one); after another thread's training forward it raises.
    """

    def __init__(self, symbol, ctx: Context, typing: Typing, args: dict[str, NDArray],
                 grads: dict[str, NDArray | None], reqs: dict[str, str], aux: dict[str, NDArray],
                 provider: ProgramProvider, outputs: Sequence[NDArray | None] | None = None,
                 out_names: list[str] | None = None):
        """``symbol``: the graph the programs run (``ProgramProvider.executed_symbol``);
        ``outputs``: arrays to write the outputs into (a reshaped executor's views of its
        original's), None, or a None entry, allocates; ``out_names``: the bound symbol's output
        names (MXNet's ``output_dict`` keys), where the executed graph renamed outputs."""
        self._symbol = symbol
        self._ctx = ctx
        self._typing = typing
        self._provider = provider
        self.arg_dict = args
        self.grad_dict = grads
        self.aux_dict = aux
        self._grad_req = reqs
        self._programs: dict[tuple[str, ...], Program] = {}
        self._wrt = [n for n in symbol.list_arguments() if reqs[n] != "null"]
        provider.check_gradients(symbol, self._wrt)
        self._lock = threading.RLock()
        self._local = threading.local()   # per thread: its output arrays
        self._saved: tuple[int, Any] | None = None    # (thread, residuals) of the last forward(is_train=True)
        self._arg_names = symbol.list_arguments()
        self._aux_names = symbol.list_auxiliary_states()
        self._out_names = out_names or symbol.list_outputs()
        g = typing.graph
        given = list(outputs) if outputs is not None else [None] * len(symbol._outputs)
        self._local.outputs = [o if o is not None else nd_zeros(typing.shape_of(e), ctx=ctx, dtype=typing.dtype_of(e))
                               for o, e in zip(given, symbol._outputs)]
        self._output_types = [(o.shape, o.dtype) for o in self._local.outputs]
        self._train_differs = train_mode_matters(g.nodes)
        self._monitor: tuple[Callable, str] | None = None
        from .device import Device
        self._device = Device.get(ctx)
        self._arena_buf = None            # one transient arena for all of this executor's calls
        self._arena_bytes = 0
        self._arena_fits: set[tuple[int, str]] = set()   # (program, function) the arena already fits
        self._rng_buf: NDArray | None = None
        self._scratch_outputs: list[NDArray] | None = None   # forward_train outputs nobody reads
        self._index_checks = index_checks(typing)
        self._twin: "Executor | None" = None     # backward(is_train=False)
        self._last_rng: np.ndarray | None = None  # the random state of the last forward
        # MXNet takes gradient arrays of another dtype than the argument's (converting)
        self._grad_casts = {n: nd_zeros(g.shape, ctx=ctx, dtype=args[n].dtype) for n, g in grads.items()
                            if g is not None and np.dtype(g.dtype) != np.dtype(args[n].dtype)}
        self._residual_bufs: dict = {}
        # resident programs: id(program) -> (its context with our parameters, their write stamps, bytes)
        self._resident: dict[int, tuple] = {}
        # programs compile (or come from the cache) on first use: a training executor never
        # needs the inference build, an inference one never needs the training build;
        # precompiled (artifact) providers load at bind, so a missing shape fails here
        if provider.eager:
            self._program(("forward_infer",))

    # ---- MXNet's views of the arrays -----------------------------------
    @property
    def outputs(self) -> list[NDArray]:
        """The calling thread's output arrays (see the class docstring)."""
        outs = getattr(self._local, "outputs", None)
        if outs is None:
            outs = self._local.outputs = [nd_zeros(shape, ctx=self._ctx, dtype=dtype)
                                          for shape, dtype in self._output_types]
        return outs

    @property
    def _residuals(self) -> Any:
        return None if self._saved is None else self._saved[1]

    @_residuals.setter
    def _residuals(self, value: Any) -> None:
        self._saved = None if value is None else (threading.get_ident(), value)

    @property
    def arg_arrays(self) -> list[NDArray]:
        return [self.arg_dict[n] for n in self._arg_names]

    @property
    def grad_arrays(self) -> list[NDArray | None]:
        return [self.grad_dict.get(n) for n in self._arg_names]

    @property
    def aux_arrays(self) -> list[NDArray]:
        return [self.aux_dict[n] for n in self._aux_names]

    @property
    def output_dict(self) -> dict[str, NDArray]:
        return dict(zip(self._out_names, self.outputs))

    @property
    def symbol(self):
        return self._symbol

    def get_optimized_symbol(self):
        """MXNet's: a copy of the graph this executor runs (common subexpressions merged)."""
        return self._symbol.__deepcopy__(None)

    # ---- execution --------------------------------------------------------
    def _program(self, modes: tuple[str, ...]) -> Program:
        """The compiled program for ``modes``; the traced debug build while a monitor is set."""
        key = modes + ((f"monitor:{self._monitor[1]}",) if self._monitor else ())
        prog = self._programs.get(key)
        if prog is None:
            if self._monitor:
                prog = self._provider.program(self._symbol, self._typing, list(modes), self._ctx, self._grad_req,
                                              monitor=self._monitor[1])
                prog.on_trace = self._monitor[0]
            else:
                prog = self._provider.program(self._symbol, self._typing, list(modes), self._ctx, self._grad_req)
            self._programs[key] = prog
        return prog

    def _rng(self, prog: Program, entry: str, replay: bool = False) -> list:
        """The (seed, counter) state random ops read; a new counter every call, or with ``replay``
        the last forward's (so recomputed activations draw the masks that forward drew)."""
        if not prog.entry(entry).takes_rng:
            return []
        from .. import random as ax_random
        if replay and self._last_rng is not None:
            state = self._last_rng
        else:
            state = np.array([ax_random.current_seed(), ax_random.next_stream()], dtype=np.uint64)
        if entry != "backward":
            self._last_rng = state
        if self._rng_buf is None:
            self._rng_buf = nd_array(state, ctx=self._ctx)
        else:
            self._rng_buf[:] = state      # in place: no allocation per call
        return [self._rng_buf.handle]

    def _views(self) -> list:
        return [self.arg_dict[n].handle for n in self._arg_names] + [self.aux_dict[n].handle for n in self._aux_names]

    def _variable(self, name: str) -> NDArray:
        return self.arg_dict[name] if name in self.arg_dict else self.aux_dict[name]

    def _resident_module(self, prog: Program, resident: list[str]):
        """The context of a resident program holding this executor's current parameter values,
        rebuilt (initializers rerun) when one was written since, or replaced in the dicts."""
        arrays = [self._variable(n) for n in resident]
        stamp = [(a._storage, a._storage.version) for a in arrays]
        held = self._resident.get(id(prog))
        if held is None or held[1] != stamp:
            g = self._typing.graph
            want = {n.name: (tuple(self._typing.node_shape(n)), np.dtype(self._typing.node_dtype(n)))
                    for n in g.variables()}
            for name, a in zip(resident, arrays):
                if (a.shape, np.dtype(a.dtype)) != want[name]:
                    raise AotexecError(f"{name} is now an array of shape {a.shape} {np.dtype(a.dtype).name}; the "
                                       f"executor was bound with {want[name][0]} {want[name][1].name}. Write "
                                       f"into the bound array (arr[:] = value) instead of replacing it")
            values = {n: a.asnumpy() for n, a in zip(resident, arrays)}
            held = self._resident[id(prog)] = (prog.bind_parameters(values), stamp,
                                               sum(v.nbytes for v in values.values()))
        return held[0]

    def _feed(self, kwargs: dict) -> None:
        for name, value in kwargs.items():
            if name not in self.arg_dict:
                raise TypeError(f"Unknown argument {name}")
            dst = self.arg_dict[name]
            shape = tuple(getattr(value, "shape", np.shape(value)))
            if dst.shape != shape:
                raise ValueError(f"Shape not match! Argument {name}, need: {dst.shape}, received: {shape}")
            dst[:] = value

    def _given_head_grads(self, out_grads) -> list:
        """MXNet's forms (None, one NDArray, a list, a dict by output name) as a list by output."""
        if out_grads is None:
            return []
        if isinstance(out_grads, dict):
            return [out_grads.get(n) for n in self._out_names]
        if isinstance(out_grads, (list, tuple)):
            return list(out_grads)
        return [out_grads]

    def _check_backward_ready(self) -> None:
        if self._saved is None:
            self._recompute_residuals()
        if self._saved[0] != threading.get_ident():
            raise AotexecError("backward() needs this thread's forward(is_train=True), but another thread ran "
                               "forward(is_train=True) on this executor since; train with one executor per "
                               "thread (simple_bind(..., shared_exec=...) shares the weights)")

    def _inference_twin(self) -> "Executor":
        """An executor of the inference-mode graph sharing this one's arrays (built once)."""
        if self._twin is None:
            sym = inference_symbol(self._symbol)
            shapes = {n: a.shape for n, a in {**self.arg_dict, **self.aux_dict}.items()}
            dtypes = {n: np.dtype(a.dtype) for n, a in {**self.arg_dict, **self.aux_dict}.items()}
            self._twin = Executor(sym, self._ctx, bind_typing(sym, shapes, dtypes), self.arg_dict, self.grad_dict,
                                  self._grad_req, self.aux_dict, self._provider, out_names=self._out_names)
        return self._twin

    def _recompute_residuals(self) -> None:
        """MXNet allows backward() after forward() / forward(is_train=False) (or with no forward
        at all): the gradient is taken at the current arguments.  The activations backward
        reads come from a training forward whose outputs go to scratch arrays, so the outputs
        the caller holds stay those of its forward."""
        prog = self._program(("forward_train", "backward"))
        if self._scratch_outputs is None:
            self._scratch_outputs = [nd_zeros(shape, ctx=self._ctx, dtype=dtype) for shape, dtype in self._output_types]
        res = self._residual_targets(prog, "forward_train")
        self._call(prog, "forward_train", self._views() + self._rng(prog, "forward_train", replay=True),
                   [o.handle for o in self._scratch_outputs] + res)
        self._residuals = res

    def _head_grads(self, prog: Program, entry: str, out_grads) -> list:
        """Views of the head gradients the compiled backward reads."""
        given = self._given_head_grads(out_grads)
        views = []
        for port in prog.entry(entry).of(Role.HEAD_GRAD):
            i = port.index
            g = given[i] if i < len(given) else None
            if g is None:
                raise AotexecError(HEAD_GRAD_REQUIRED + f" (output {i}: {self._out_names[i]})")
            g = _as_ndarray(g, self._ctx, f"out_grads[{i}]")
            if g.shape != self.outputs[i].shape:
                raise AotexecError(f"head gradient {i} ({self._out_names[i]}) has shape {g.shape}, the output "
                                   f"has {self.outputs[i].shape}")
            if np.dtype(g.dtype) != np.dtype(self.outputs[i].dtype):
                g = g.astype(self.outputs[i].dtype)    # MXNet copies head gradients in, converting
            views.append(g.handle)
        return views

    def _grad_array(self, name: str) -> NDArray:
        """Where the program writes ``name``'s gradient: the bound array, or a scratch of the
        argument's dtype when the bound array has another (copied over after the call)."""
        return self._grad_casts.get(name, self.grad_dict[name])

    def _old_grads(self, prog: Program, entry: str) -> list:
        ports = prog.entry(entry).of(Role.OLD_GRAD)
        for p in ports:
            if p.name in self._grad_casts:
                self._grad_casts[p.name][:] = self.grad_dict[p.name]
        return [self._grad_array(p.name).handle for p in ports]

    def _copy_cast_grads(self) -> None:
        for name, scratch in self._grad_casts.items():
            self.grad_dict[name][:] = scratch


    def _call(self, prog: Program, fn: str, inputs: list, targets: list, module=None) -> None:
        """One IREE call whose results land in ``targets`` (the executor's own buffers).

        Planned entry points write there directly (``iree.abi.output``) with a transient
        arena allocated once, so steady-state calls allocate nothing; debug builds return
        fresh buffers, copied in on the device."""
        ep = prog.entry(fn)
        if ep.output_args:
            prog.run(fn, inputs + targets + [self._arena(prog, fn)], module)
            return
        for view, dst in zip(prog.run(fn, inputs, module), targets):
            self._device.copy(view, dst)

    def _arena(self, prog: Program, fn: str):
        """The executor's transient arena, grown to the largest function it has called.

        Calls are synchronous and never overlap, so forward_train, backward and the
        inference build share one buffer: the executor holds max(arenas), not their sum."""
        key = (id(prog), fn)
        if key not in self._arena_fits:     # reflection lookups stay off the per-call path
            need = prog.transients_size(fn)
            if self._arena_buf is None or need > self._arena_bytes:
                self._arena_buf, self._arena_bytes = self._device.allocate_arena(need), max(need, 64)
            self._arena_fits.add(key)
        return self._arena_buf

    def memory_usage(self) -> dict[str, int]:
        """Device bytes this executor holds now: its arrays (arguments, gradients, aux states,
        outputs), the activations saved between forward and backward, and the transient arena
        the compiled functions share (IREE's plan of their intermediates)."""
        def size(a) -> int:
            return 0 if a is None else int(np.prod(a.shape, dtype=np.int64)) * np.dtype(a.dtype).itemsize
        arrays = sum(map(size, [*self.arg_dict.values(), *self.grad_dict.values(), *self.aux_dict.values(),
                               *self.outputs]))
        saved = sum(v.byte_length for views in self._residual_bufs.values() for v in views)
        return {"arrays": arrays, "saved_activations": saved, "transient_arena": self._arena_bytes,
                "resident_parameters": sum(held[2] for held in self._resident.values())}

    def _residual_targets(self, prog: Program, fn: str) -> list:
        """Buffers, owned by this executor, for the activations forward_train saves for backward."""
        key = (id(prog), fn)
        views = self._residual_bufs.get(key)
        if views is None:
            views = [nd_zeros(p.shape, ctx=self._ctx, dtype=p.dtype).handle
                     for p in prog.entry(fn).results_of(Role.RESIDUAL)]
            self._residual_bufs[key] = views
        return views

    def _named_targets(self, ports: Sequence[Port]) -> list:
        """Output buffers for gradient and aux-update results."""
        out = []
        for p in ports:
            arr = self._grad_array(p.name) if p.role is Role.GRAD else self.aux_dict[p.name]
            arr._storage.written()
            out.append(arr.handle)
        return out

    def _output_views(self) -> list:
        for o in self.outputs:
            o._storage.written()
        return [o.handle for o in self.outputs]

    def _check_indices(self) -> None:
        """Out-of-range indices of ops that raise on them: the outputs raise when read."""
        error = violation(self._index_checks, self.arg_dict) if self._index_checks else None
        if error:
            for o in self.outputs:
                o._storage.error = error

    @serialized
    def forward(self, is_train: bool = False, **kwargs) -> list[NDArray]:
        self._feed(kwargs)
        self._residuals = None
        outs = self._output_views()
        if is_train and self._wrt:
            prog = self._program(("forward_train", "backward"))
            res = self._residual_targets(prog, "forward_train")
            self._call(prog, "forward_train", self._views() + self._rng(prog, "forward_train"), outs + res)
            self._residuals = res
        elif is_train and self._train_differs:
            prog = self._program(("forward_train",))
            self._call(prog, "forward_train", self._views() + self._rng(prog, "forward_train"), outs)
        else:
            prog = self._program(("forward_infer",))   # rng: Dropout(mode='always') draws in inference too
            ep, module = prog.entry("forward_infer"), None
            if ep.resident:
                module = self._resident_module(prog, ep.resident)
                views = [self._variable(p.name).handle for p in ep.of(Role.VARIABLE)]
            else:
                views = self._views()
            self._call(prog, "forward_infer", views + self._rng(prog, "forward_infer"), outs, module)
        self._check_indices()
        return self.outputs

    @serialized
    def partial_forward(self, is_train: bool = False, step: int = 0) -> int:
        """Run op node ``step`` (in execution order) and return how many steps are left
        (the C++ PartialForward contract).  Each node is its own compiled function."""
        mode = "steps_train" if is_train else "steps_infer"
        prog = self._program((mode,))
        nodes = [n for n in self._typing.graph.nodes if n.op is not None]
        if not 0 <= step < len(nodes):
            raise AotexecError(f"partial_forward: step {step} is out of range; the graph has {len(nodes)} op nodes")
        if step == 0 or not hasattr(self, "_step_values"):
            self._step_values = {}
        node = nodes[step]
        fn = f"{mode}_{step}"
        ep = prog.entry(fn)
        views = []
        for e in node.inputs:
            if e.node.op is None:
                src = self.arg_dict[e.node.name] if e.node.name in self.arg_dict else self.aux_dict[e.node.name]
                views.append(src.handle)
            else:
                key = (id(e.node), e.index)
                if key not in self._step_values:
                    raise AotexecError(f"partial_forward: step {step} ({node.name}) needs {e.name}; run the earlier "
                                       "steps first, starting at step 0")
                views.append(self._step_values[key])
        results = prog.run(fn, views + self._rng(prog, fn))
        for name, view in zip(ep.outputs, results):
            idx = next(i for i in range(node.num_outputs) if node.entry_name(i) == name)
            self._step_values[(id(node), idx)] = view
        for out, head in zip(self.outputs, self._symbol._outputs):
            v = self._step_values.get((id(head.node), head.index))
            if v is not None:
                out._storage.written()
                self._device.copy(v, out.handle)
        return len(nodes) - step - 1

    @serialized
    def backward(self, out_grads=None, is_train: bool = True) -> None:
        """Gradients into ``grad_arrays`` (write / add), and BatchNorm's moving statistics;
        with ``is_train=False`` the gradient of the inference-mode graph (runtime.inference_twin)."""
        if not self._wrt:
            return
        if not is_train and self._train_differs:
            twin = self._inference_twin()
            twin._residuals, twin._last_rng = None, self._last_rng   # this executor's last forward
            twin.backward(out_grads)
            return
        self._check_backward_ready()
        prog = self._program(("forward_train", "backward"))
        views = self._views() + self._residuals + self._head_grads(prog, "backward", out_grads) \
            + self._old_grads(prog, "backward") + self._rng(prog, "backward")
        self._call(prog, "backward", views, self._named_targets(prog.entry("backward").results))
        self._copy_cast_grads()

    @serialized
    def forward_backward(self, out_grads=None, **kwargs) -> list[NDArray]:
        """``forward(is_train=True)`` + ``backward(out_grads)`` as one compiled call."""
        self._feed(kwargs)
        if not self._wrt:
            return self.forward(is_train=True)
        prog = self._program(("train_step",))
        views = self._views() + self._head_grads(prog, "train_step", out_grads) + \
            self._old_grads(prog, "train_step") + self._rng(prog, "train_step")
        n = len(self.outputs)
        targets = self._output_views() + self._named_targets(prog.entry("train_step").results[n:])
        self._call(prog, "train_step", views, targets)
        self._copy_cast_grads()
        self._residuals = None
        self._check_indices()
        return self.outputs

    @serialized
    def set_monitor_callback(self, callback, monitor_all: bool = False) -> None:
        """``callback(name, NDArray)`` for every node output (and input, with ``monitor_all``)
        in execution order, as MXNet names them.  Runs a separately compiled traced build."""
        if callback is None:
            self._monitor = None
            return
        self._monitor = (callback, "all" if monitor_all else "outputs")
        for key, prog in self._programs.items():
            if key[-1] == f"monitor:{self._monitor[1]}":
                prog.on_trace = callback

    def reshape(self, partial_shaping: bool = False, allow_up_sizing: bool = False, **kwargs) -> "Executor":
        """A new executor for new input shapes sharing this one's arrays (MXNet's rules):
        same-size or smaller arrays are views of the originals, larger ones are new."""
        import math
        arg_shapes, out_shapes, aux_shapes = self._symbol.infer_shape(**kwargs)
        if arg_shapes is None:
            raise AotexecError(f"reshape: cannot infer all shapes from {kwargs}")

        def share(kind: str, name: str, arr: NDArray, shape: tuple, grad: NDArray | None):
            if not (partial_shaping or name in kwargs or shape == arr.shape):
                raise AotexecError(
                    f"Shape of unspecifie {kind}: {name} changed. This can cause the new executor to not share "
                    "parameters with the old one. Please check for error in network.If this is intended, set "
                    "partial_shaping=True to suppress this warning.")
            if math.prod(shape) > arr.size:
                if not allow_up_sizing:
                    raise AotexecError(
                        f"Check failed: allow_up_sizing: New shape of {kind}: {name} is larger than original."
                        "First making a big executor and then down sizing it is more efficient than the reverse."
                        "If you really want to up size, set allow_up_sizing=True to enable allocation of new arrays.")
                return (nd_zeros(shape, ctx=self._ctx, dtype=arr.dtype),
                        None if grad is None else nd_zeros(shape, ctx=self._ctx, dtype=grad.dtype))

            def view(a: NDArray | None) -> NDArray | None:
                return a if a is None or a.shape == tuple(shape) else a.view(shape)
            return view(arr), view(grad)

        args, grads, aux = {}, {}, {}
        for name, shape in zip(self._arg_names, arg_shapes):
            args[name], grads[name] = share("arg", name, self.arg_dict[name], tuple(shape), self.grad_dict.get(name))
        for name, shape in zip(self._aux_names, aux_shapes):
            aux[name], _ = share("aux", name, self.aux_dict[name], tuple(shape), None)
        shapes = {n: a.shape for n, a in {**args, **aux}.items()}
        dtypes = {n: np.dtype(a.dtype) for n, a in {**args, **aux}.items()}
        reqs = {n: (r if grads.get(n) is not None else "null") for n, r in self._grad_req.items()}
        # MXNet's reshaped executor writes its outputs into the original's memory where they fit
        outs = [o.view(tuple(s)) if math.prod(s) <= o.size else None for o, s in zip(self.outputs, out_shapes)]
        return Executor(self._symbol, self._ctx, bind_typing(self._symbol, shapes, dtypes), args, grads, reqs, aux,
                        self._provider, outputs=outs, out_names=self._out_names)

    @serialized
    def copy_params_from(self, arg_params: dict, aux_params: dict | None = None,
                         allow_extra_params: bool = False) -> None:
        """Values: NDArray (any context, e.g. from ``ax.model.load_checkpoint``) or numpy, cast to the
        executor's dtype; a shape other than the executor's is an error, not a broadcast."""
        for name, arr in arg_params.items():
            if name in self.arg_dict:
                _copy_param(name, arr, self.arg_dict[name])
            elif not allow_extra_params:
                raise ValueError(f"Find name \"{name}\" that is not in the arguments")
        for name, arr in (aux_params or {}).items():
            if name in self.aux_dict:
                _copy_param(name, arr, self.aux_dict[name])
            elif not allow_extra_params:
                raise ValueError(f"Find name {name} that is not in the auxiliary states")

    def debug_str(self) -> str:
        """The execution plan in MXNet's format, ending with ``Total N MB allocated``."""
        return self._provider.debug_str(self._symbol, self._typing, self._wrt)

    def __repr__(self) -> str:
        return f"<Executor {self._symbol!r} on {self._ctx}>"

