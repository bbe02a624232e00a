"""The Executor: MXNet's bind / simple_bind / forward over compiled IREE programs.

Binding infers shapes and dtypes, allocates (or adopts) the arrays, and gets a
``Program`` either from an artifact (runtime only) or by compiling through the
cache (``aotexec.build``, imported lazily so edge installs never need the
compiler).  ``forward`` copies keyword inputs in place and makes one IREE call.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..base import AotexecError
from ..ops.registry import train_mode_matters
from ..passes.infer import Typing, infer_dtypes, infer_shapes
from ..passes.mirror import resolve as resolve_mirror
from ..ops.rules import known
from .context import Context, current_context
from .ndarray import NDArray, array as nd_array, zeros as nd_zeros
from .program import Program, resident_wanted

GRAD_REQS = ("write", "add", "null")
# (symbol, typing, modes, ctx, grad_reqs) -> Program; artifacts provide one for runtime-only use
ProgramProvider = Callable[[Any, Typing, Sequence[str], Context, dict], Program]

HEAD_GRAD_REQUIRED = ("Check failed: i < head_grads.size() && !head_grads[i].is_none(): Because the last "
                      "operator is not Loss function, head_gradient is required when calling backward. If you "
                      "are attempting to minimize the output as an objective, please modify your network and "
                      "pass it through the make_loss symbol.")


def compile_provider(cpu: str = "host", mirror: bool | str | None = None) -> ProgramProvider:
    """Compile on demand through the cache; ``mirror`` is the recomputation policy of
    ``passes.mirror`` (None: MXNET_BACKWARD_DO_MIRROR when set, else ``auto``)."""
    policy = resolve_mirror(mirror)

    def provide(symbol, typing: Typing, modes: Sequence[str], ctx: Context, reqs: dict,
                monitor: str | None = None) -> Program:
        try:
            from .. import build
        except ImportError as e:
            raise AotexecError(
                "binding a symbol needs the IREE compiler (pip install 'aotexec[compiler]'), "
                f"which is not installed ({e}); a runtime-only install runs compiled artifacts "
                "through ax.load(path).bind(...)") from None
        opts = build.options_for(ctx, cpu=cpu)
        resident = build.resident_parameters(symbol, typing) \
            if monitor is None and resident_wanted(modes, reqs, opts.target) else []
        # the traced build keeps MXNet's node sequence: no mirror nodes in the monitor's view
        vmfb, spec = build.compile_program(symbol, typing, modes, opts, reqs=reqs,
                                           mirror="none" if monitor else policy, monitor=monitor, resident=resident)
        return Program(ctx, vmfb, spec, traced=monitor is not None)
    provide.mirror = policy
    return provide


def normalize_grad_req(grad_req, arg_names: list[str]) -> dict[str, str]:
    if isinstance(grad_req, str):
        reqs = {n: grad_req for n in arg_names}
    elif isinstance(grad_req, (list, tuple)):
        if len(grad_req) != len(arg_names):
            raise AotexecError(f"grad_req list has {len(grad_req)} entries for {len(arg_names)} arguments")
        reqs = dict(zip(arg_names, grad_req))
    elif isinstance(grad_req, dict):
        reqs = {n: grad_req.get(n, "null") or "null" for n in arg_names}
    else:
        raise TypeError("grad_req must be a str, a list or a dict")
    for n, r in reqs.items():
        if r not in GRAD_REQS:
            raise AotexecError(f"grad_req for '{n}' must be one of {GRAD_REQS}, got {r!r}")
    return reqs


def _as_ndarray(x: Any, ctx: Context, what: str) -> NDArray:
    if isinstance(x, NDArray):
        return x if x.context == ctx else x.copyto(ctx)
    if isinstance(x, np.ndarray):
        return nd_array(x, ctx=ctx)
    raise TypeError(f"{what} must be an NDArray (or numpy array), got {type(x).__name__}")


def _arrays(given, names: list[str], ctx: Context, what: str, required: bool) -> dict[str, NDArray | None]:
    """MXNet's list-or-dict array arguments, in ``names`` order."""
    if given is None:
        if required and names:
            raise ValueError(f"`{what}` is required: the symbol has {what} {names}")
        return {n: None for n in names}
    if isinstance(given, dict):
        out = {}
        for n in names:
            if n in given and given[n] is not None:
                out[n] = _as_ndarray(given[n], ctx, f"{what}['{n}']")
            elif required:
                raise ValueError(f"key `{n}` is missing in `{what}`")
            else:
                out[n] = None
        return out
    if isinstance(given, (list, tuple)):
        if len(given) != len(names):
            raise ValueError(f"Length of {what} do not match number of arguments: got {len(given)}, "
                             f"expected {len(names)} ({', '.join(names)})")
        return {n: (None if a is None else _as_ndarray(a, ctx, f"{what}[{i}]"))
                for i, (n, a) in enumerate(zip(names, given))}
    raise TypeError(f"Only accept list of NDArrays or dict of str to NDArray for `{what}`")


def _check_complete(symbol, typing: Typing) -> None:
    g = typing.graph
    missing = [f"{n.name}: {typing.node_shape(n)}" for n in g.variables() if not known(typing.node_shape(n))]
    if missing:
        raise AotexecError("Cannot decide shapes for the following inputs; provide them to bind / "
                           "simple_bind:\n\t" + "\n\t".join(missing))
    bad = [n.name for n in g.nodes if n.op is not None and
           any(not known(typing.node_shape(n, i)) for i in range(n.num_outputs))]
    if bad:
        raise AotexecError(f"shape inference left the outputs of {bad} undecided")


class Executor:
    """An MXNet-style executor over one compiled program."""

    def __init__(self, symbol, ctx: Context, typing: Typing, args: dict[str, NDArray],
                 grads: dict[str, NDArray | None], reqs: dict[str, str], aux: dict[str, NDArray],
                 provider: ProgramProvider):
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
        self._residuals: list | None = None
        self._arg_names = symbol.list_arguments()
        self._aux_names = symbol.list_auxiliary_states()
        self._out_names = symbol.list_outputs()
        g = typing.graph
        self.outputs = [nd_zeros(typing.shape_of(e), ctx=ctx, dtype=typing.dtype_of(e)) for e in symbol._outputs]
        self._train_differs = train_mode_matters(g.nodes)
        self._monitor: tuple[Callable, str] | None = None
        from .device import Device
        self._device = Device.get(ctx)
        self._arena_buf = None            # one transient arena for all of this executor's calls
        self._arena_bytes = 0
        self._arena_fits: set[tuple[int, str]] = set()   # (program, function) the arena already fits
        self._rng_buf: NDArray | None = None
        self._residual_bufs: dict = {}
        # resident programs: id(program) -> (its context with our parameters, their write stamps, bytes)
        self._resident: dict[int, tuple] = {}
        # programs compile (or come from the cache) on first use: a training executor never
        # needs the inference build, an inference one never needs the training build;
        # precompiled (artifact) providers load at bind, so a missing shape fails here
        if getattr(provider, "eager", False):
            self._program(("forward_infer",))

    # ---- MXNet's views of the arrays -----------------------------------
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

    # ---- execution --------------------------------------------------------
    def _program(self, modes: tuple[str, ...]) -> Program:
        """The compiled program for ``modes``; the traced debug build while a monitor is set."""
        key = modes + ((f"monitor:{self._monitor[1]}",) if self._monitor else ())
        prog = self._programs.get(key)
        if prog is None:
            if self._monitor:
                prog = self._provider(self._symbol, self._typing, list(modes), self._ctx, self._grad_req,
                                      monitor=self._monitor[1])
                prog.on_trace = self._monitor[0]
            else:
                prog = self._provider(self._symbol, self._typing, list(modes), self._ctx, self._grad_req)
            self._programs[key] = prog
        return prog

    def _rng(self, prog: Program, entry: str) -> list:
        """The (seed, counter) state random ops read; a new counter every training call."""
        ep = prog.entry(entry)
        if not ep.inputs or ep.inputs[-1] != "rng":
            return []
        from .. import random as ax_random
        state = np.array([ax_random.current_seed(), ax_random.next_stream()], dtype=np.uint64)
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
        if self._residuals is None:
            raise AotexecError("backward() needs the activations of a preceding forward(is_train=True); "
                               "call forward(is_train=True) first")

    def _head_grads(self, prog: Program, entry: str, out_grads) -> list:
        """Views of the head gradients the compiled backward reads."""
        given = self._given_head_grads(out_grads)
        views = []
        for name in prog.entry(entry).inputs:
            if not name.startswith("head_grad:"):
                continue
            i = int(name.split(":", 1)[1])
            g = given[i] if i < len(given) else None
            if g is None:
                raise AotexecError(HEAD_GRAD_REQUIRED + f" (output {i}: {self._out_names[i]})")
            g = _as_ndarray(g, self._ctx, f"out_grads[{i}]")
            if g.shape != self.outputs[i].shape:
                raise AotexecError(f"head gradient {i} ({self._out_names[i]}) has shape {g.shape}, the output "
                                   f"has {self.outputs[i].shape}")
            views.append(g.handle)
        return views

    def _old_grads(self, prog: Program, entry: str) -> list:
        return [self.grad_dict[n.split(":", 1)[1]].handle for n in prog.entry(entry).inputs
                if n.startswith("old_grad:")]


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
            ep = prog.entry(fn)
            views = [nd_zeros(shape, ctx=self._ctx, dtype=dt).handle
                     for name, shape, dt in zip(ep.outputs, ep.output_shapes, ep.output_dtypes)
                     if name.startswith("res:")]
            self._residual_bufs[key] = views
        return views

    def _named_targets(self, names: list[str]) -> list:
        """Output buffers for results named ``grad:<arg>`` / ``aux:<name>``."""
        out = []
        for name in names:
            kind, key = name.split(":", 1)
            arr = (self.grad_dict if kind == "grad" else self.aux_dict)[key]
            arr._storage.written()
            out.append(arr.handle)
        return out

    def _output_views(self) -> list:
        for o in self.outputs:
            o._storage.written()
        return [o.handle for o in self.outputs]

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
                names = ep.inputs[:-1] if ep.inputs[-1:] == ["rng"] else ep.inputs    # as _rng reads it
                views = [self._variable(n).handle for n in names]
            else:
                views = self._views()
            self._call(prog, "forward_infer", views + self._rng(prog, "forward_infer"), outs, module)
        return self.outputs

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

    def backward(self, out_grads=None, is_train: bool = True) -> None:
        """Gradients into ``grad_arrays`` (write / add), and BatchNorm's moving statistics."""
        if not self._wrt:
            return
        self._check_backward_ready()
        prog = self._program(("forward_train", "backward"))
        views = self._views() + self._residuals + self._head_grads(prog, "backward", out_grads) \
            + self._old_grads(prog, "backward") + self._rng(prog, "backward")
        self._call(prog, "backward", views, self._named_targets(prog.entry("backward").outputs))

    def forward_backward(self, out_grads=None, **kwargs) -> list[NDArray]:
        """``forward(is_train=True)`` + ``backward(out_grads)`` as one compiled call."""
        self._feed(kwargs)
        if not self._wrt:
            return self.forward(is_train=True)
        prog = self._program(("train_step",))
        views = self._views() + self._head_grads(prog, "train_step", out_grads) + \
            self._old_grads(prog, "train_step") + self._rng(prog, "train_step")
        n = len(self.outputs)
        targets = self._output_views() + self._named_targets(prog.entry("train_step").outputs[n:])
        self._call(prog, "train_step", views, targets)
        self._residuals = None
        return self.outputs

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
        arg_shapes, _, aux_shapes = self._symbol.infer_shape(**kwargs)
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
        return bind(self._symbol, self._ctx, args, args_grad=grads, grad_req=dict(self._grad_req),
                    aux_states=aux, provider=self._provider)

    def copy_params_from(self, arg_params: dict, aux_params: dict | None = None,
                         allow_extra_params: bool = False) -> None:
        for name, arr in arg_params.items():
            if name in self.arg_dict:
                self.arg_dict[name][:] = arr
            elif not allow_extra_params:
                raise ValueError(f"Find name \"{name}\" that is not in the arguments")
        for name, arr in (aux_params or {}).items():
            if name in self.aux_dict:
                self.aux_dict[name][:] = arr
            elif not allow_extra_params:
                raise ValueError(f"Find name {name} that is not in the auxiliary states")

    def debug_str(self) -> str:
        """The execution plan in MXNet's format, ending with ``Total N MB allocated``."""
        from ..debug_str import render
        return render(self._symbol, self._typing, self._wrt, getattr(self._provider, "mirror", None))

    def __repr__(self) -> str:
        return f"<Executor {self._symbol!r} on {self._ctx}>"


def _make(symbol, ctx, typing, args, grads, reqs, aux, provider, group2ctx) -> Executor:
    """A plain executor, or a placed one when ``group2ctx`` maps groups the graph uses."""
    groups = {n.attrs.get("__ctx_group__") for n in typing.graph.nodes if n.op is not None} - {None}
    if group2ctx and any(group2ctx.get(gname, ctx) != ctx for gname in groups):
        from .placement import PlacedExecutor
        return PlacedExecutor(symbol, ctx, typing, args, grads, reqs, aux, provider, group2ctx=group2ctx)
    return Executor(symbol, ctx, typing, args, grads, reqs, aux, provider)


def _default_dtypes(symbol, typing_dtypes: list, dtypes: dict) -> dict:
    """MXNet binds undecided dtypes as float32."""
    g = symbol._graph
    out = dict(dtypes)
    for n in g.variables():
        if typing_dtypes[g.row_ptr[g.nid(n)]] is None and n.name not in out:
            out[n.name] = np.dtype("float32")
    return out


def bind_typing(symbol, shapes: dict, dtypes: dict) -> Typing:
    """Shapes and dtypes of every entry for binding: undecided dtypes default to float32
    (as in MXNet), undecided shapes are an error naming the inputs."""
    g = symbol._graph
    dt = infer_dtypes(g, dtypes)
    if any(d is None for d in dt):
        dt = infer_dtypes(g, _default_dtypes(symbol, dt, dtypes))
    typing = Typing(g, infer_shapes(g, shapes), dt)
    _check_complete(symbol, typing)
    return typing


def bind(symbol, ctx: Context | None, args, args_grad=None, grad_req="write", aux_states=None,
         group2ctx=None, shared_exec=None, provider: ProgramProvider | None = None,
         mirror: bool | None = None) -> Executor:
    ctx = ctx or current_context()
    arg_names, aux_names = symbol.list_arguments(), symbol.list_auxiliary_states()
    arg_arrays = _arrays(args, arg_names, ctx, "args", required=True)
    aux_arrays = _arrays(aux_states, aux_names, ctx, "aux_states", required=True)
    shapes = {n: a.shape for n, a in {**arg_arrays, **aux_arrays}.items()}
    dtypes = {n: np.dtype(a.dtype) for n, a in {**arg_arrays, **aux_arrays}.items()}
    typing = bind_typing(symbol, shapes, dtypes)
    reqs = normalize_grad_req(grad_req, arg_names)
    grads = _arrays(args_grad, arg_names, ctx, "args_grad", required=False)
    for n in arg_names:
        if grads[n] is None:
            reqs[n] = "null"
        elif grads[n].shape != arg_arrays[n].shape:
            raise AotexecError(f"gradient array for '{n}' has shape {grads[n].shape}, argument has "
                               f"{arg_arrays[n].shape}")
    return _make(symbol, ctx, typing, arg_arrays, grads, reqs, aux_arrays, provider or compile_provider(mirror=mirror),
                 group2ctx)


def simple_bind(symbol, ctx: Context | None, grad_req="write", type_dict=None, group2ctx=None,
                shared_arg_names=None, shared_exec=None, shared_buffer=None,
                provider: ProgramProvider | None = None, mirror: bool | None = None, **kwargs) -> Executor:
    ctx = ctx or current_context()
    inputs = set(symbol.list_inputs())
    from ..util import shape_from_user
    shapes = {k: shape_from_user(v) for k, v in kwargs.items() if k in inputs}
    dtypes = {k: np.dtype(v) for k, v in (type_dict or {}).items() if k in inputs}
    typing = bind_typing(symbol, shapes, dtypes)
    g = typing.graph
    arg_names = symbol.list_arguments()
    reqs = normalize_grad_req(grad_req, arg_names)

    shared_names = set(shared_arg_names or ())

    def alloc(n, grad: bool = False):
        """Arrays shared with ``shared_exec`` / ``shared_buffer`` (bucketing) or fresh zeros."""
        shape, dtype = tuple(typing.node_shape(n)), np.dtype(typing.node_dtype(n))
        if shared_exec is not None and n.name in shared_names:
            src = (shared_exec.grad_dict if grad else shared_exec.arg_dict).get(n.name)
            if src is None and not grad:
                src = shared_exec.aux_dict.get(n.name)
            if src is not None:
                if src.shape != shape or np.dtype(src.dtype) != dtype:
                    raise AotexecError(f"Shape or dtype of shared array {n.name} mismatch: the shared executor "
                                       f"has {src.shape} {np.dtype(src.dtype).name}, this one needs {shape} {dtype.name}")
                return src
        if shared_buffer is not None and not grad and n.name not in shared_names:
            buf = shared_buffer.get(n.name)
            if buf is not None and buf.size >= int(np.prod(shape)) and np.dtype(buf.dtype) == dtype:
                return buf.view(shape) if buf.shape != shape else buf
            arr = nd_zeros(shape, ctx=ctx, dtype=dtype)
            shared_buffer[n.name] = arr
            return arr
        return nd_zeros(shape, ctx=ctx, dtype=dtype)

    args = {n.name: alloc(n) for n in g.arguments()}
    aux = {n.name: alloc(n) for n in g.aux_states()}
    grads = {n.name: (alloc(n, grad=True) if reqs[n.name] != "null" else None) for n in g.arguments()}
    return _make(symbol, ctx, typing, args, grads, reqs, aux, provider or compile_provider(mirror=mirror), group2ctx)
