"""MXNet's ``bind`` / ``simple_bind``: arrays adopted or allocated, shapes and dtypes
inferred, and an Executor (or a PlacedExecutor for group2ctx) over the programs its
``provider`` supplies: compiled on demand (``aotexec.pipeline``) or from an artifact."""
from __future__ import annotations

import numpy as np

from ..base import AotexecError
from ..util import shape_from_user
from .bind_args import _arrays, bind_typing, normalize_grad_req
from .context import Context, current_context
from .executor import Executor
from .ndarray import zeros as nd_zeros
from .placement import PlacedExecutor
from .provider import ProgramProvider


def _make(symbol, ctx, typing, args, grads, reqs, aux, provider, group2ctx, out_names) -> Executor:
    """A plain executor, or a placed one when ``group2ctx`` maps groups the graph uses."""
    groups = {n.attrs.get("__ctx_group__") for n in typing.graph.nodes if n.op is not None} - {None}
    if group2ctx and any(group2ctx.get(gname, ctx) != ctx for gname in groups):
        return PlacedExecutor(symbol, ctx, typing, args, grads, reqs, aux, provider, group2ctx=group2ctx,
                              out_names=out_names)
    return Executor(symbol, ctx, typing, args, grads, reqs, aux, provider, out_names=out_names)


def bind(symbol, ctx: Context | None, args, args_grad=None, grad_req="write", aux_states=None,
         group2ctx=None, shared_exec=None, *, provider: ProgramProvider) -> Executor:
    ctx = ctx or current_context()
    out_names, symbol = symbol.list_outputs(), provider.executed_symbol(symbol)
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
    return _make(symbol, ctx, typing, arg_arrays, grads, reqs, aux_arrays, provider, group2ctx, out_names)


def simple_bind(symbol, ctx: Context | None, grad_req="write", type_dict=None, group2ctx=None,
                shared_arg_names=None, shared_exec=None, shared_buffer=None,
                *, provider: ProgramProvider, **kwargs) -> Executor:
    ctx = ctx or current_context()
    out_names, symbol = symbol.list_outputs(), provider.executed_symbol(symbol)
    inputs = set(symbol.list_inputs())
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
    return _make(symbol, ctx, typing, args, grads, reqs, aux, provider, group2ctx, out_names)
