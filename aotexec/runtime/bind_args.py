"""Checking and normalizing what bind / simple_bind are given (MXNet's forms and messages),
and the shapes and dtypes of every entry at bind time."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import AotexecError
from ..ops.rules import known
from ..passes.infer import Typing, infer_dtypes, infer_shapes
from .context import Context
from .ndarray import NDArray, array as nd_array

GRAD_REQS = ("write", "add", "null")


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
            raise ValueError(f"Length of {what} does not match the number of arguments (got {len(given)}, "
                             f"expected {len(names)}: {', '.join(names)})")
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
    names = [n.name for n in g.variables()]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        # arg_dict is by name: one array would be bound where the compiled code takes two
        raise AotexecError(f"Duplicate names detected: {dup} each name several different variables of the "
                           "symbol; give every argument and aux state a unique name")
    dt = infer_dtypes(g, dtypes)
    if any(d is None for d in dt):
        dt = infer_dtypes(g, _default_dtypes(symbol, dt, dtypes))
    typing = Typing(g, infer_shapes(g, shapes), dt)
    _check_complete(symbol, typing)
    return typing


