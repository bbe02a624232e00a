"""``mx.nd.Op(arrays..., params...)``: a one-node symbol bound and run with aotexec."""
from __future__ import annotations

import aotexec as ax
import aotexec.symbol as ax_sym
from aotexec.runtime.ndarray import NDArray

from .._harness import MissingOp


def run_op(name: str, args: tuple, kwargs: dict):
    ctor = getattr(ax_sym, name, None)
    if ctor is None or isinstance(ctor, type):
        raise MissingOp("mxnet.ndarray", name)
    out = kwargs.pop("out", None)
    arrays: dict[str, NDArray] = {}

    def as_sym(v):
        if isinstance(v, NDArray):
            arrays[f"_in{len(arrays)}"] = v
            return ax_sym.Variable(f"_in{len(arrays) - 1}")
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, NDArray) for x in v):
            return [as_sym(x) for x in v]
        return v
    sym_args = [as_sym(a) for a in args]
    if len(sym_args) == 1 and isinstance(sym_args[0], list):
        sym_args = sym_args[0]
    s = ctor(*sym_args, **{k: as_sym(v) for k, v in kwargs.items()})
    ctx = next(iter(arrays.values())).context if arrays else ax.cpu()
    ex = s.bind(ctx, args={n: arrays[n] for n in s.list_arguments() if n in arrays},
                aux_states={n: arrays[n] for n in s.list_auxiliary_states() if n in arrays}, grad_req="null")
    results = [o.copy() for o in ex.forward(is_train=False)]
    if out is not None:
        for dst, src in zip(out if isinstance(out, (list, tuple)) else [out], results):
            dst[:] = src
        return out
    return results[0] if len(results) == 1 else results
