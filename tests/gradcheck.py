"""Finite-difference gradient checks (like MXNet's check_numeric_gradient).

The analytic gradient comes from aotexec's compiled backward; the numeric one from
central differences of ``sum(out_i * head_i)`` evaluated with the compiled
forward (float32, so step and tolerances are sized for single precision).
"""
from __future__ import annotations

import numpy as np

import aotexec as ax


def check_numeric_gradient(sym, location: dict[str, np.ndarray], aux: dict[str, np.ndarray] | None = None,
                           grad_nodes: list[str] | None = None, eps: float = 1e-3, rtol: float = 2e-2,
                           atol: float = 2e-3, is_train: bool = True, seed: int = 0, ctx=None) -> None:
    ctx = ctx or ax.cpu()
    rng = np.random.default_rng(seed)
    location = {k: np.asarray(v, np.float32) for k, v in location.items()}
    grad_nodes = grad_nodes or list(location)
    args = {k: ax.nd.array(v, ctx=ctx) for k, v in location.items()}
    auxs = {k: ax.nd.array(v, ctx=ctx) for k, v in (aux or {}).items()}
    grads = {k: ax.nd.zeros(location[k].shape, ctx=ctx) for k in grad_nodes}
    req = {k: ("write" if k in grad_nodes else "null") for k in location}
    ex = sym.bind(ctx, args=args, args_grad=grads, grad_req=req, aux_states=auxs)
    outs = ex.forward(is_train=is_train)
    heads = [rng.uniform(-1, 1, o.shape).astype(np.float32) for o in outs]
    ex.backward([ax.nd.array(h, ctx=ctx) for h in heads])
    analytic = {k: ex.grad_dict[k].asnumpy() for k in grad_nodes}

    fwd = sym.bind(ctx, args={k: ax.nd.array(v, ctx=ctx) for k, v in location.items()}, grad_req="null",
                   aux_states={k: ax.nd.array(v, ctx=ctx) for k, v in (aux or {}).items()})

    def objective(name: str, value: np.ndarray) -> float:
        outs = fwd.forward(is_train=is_train, **{name: value})
        return float(sum(np.sum(o.asnumpy().astype(np.float64) * h) for o, h in zip(outs, heads)))

    for name in grad_nodes:
        base = location[name].copy()
        numeric = np.zeros(base.shape, np.float64)
        flat = numeric.reshape(-1)
        for i in range(base.size):
            plus, minus = base.copy().reshape(-1), base.copy().reshape(-1)
            plus[i] += eps
            minus[i] -= eps
            flat[i] = (objective(name, plus.reshape(base.shape)) - objective(name, minus.reshape(base.shape))) / (2 * eps)
        fwd.forward(is_train=is_train, **{name: base})
        np.testing.assert_allclose(analytic[name], numeric, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of {name} differs from finite differences")
