"""Shared by make_ref.py (here, llvm-cpu) and check.py (device, cuda): the very same steps.

Per net, three fresh executors from the artifact (each loads params.npz):
  infer : simple_bind(ctx, grad_req='null'); forward(is_train=False) -> outputs
  train : simple_bind(ctx) (the compiled grad_req 'write'); forward(is_train=True) -> outputs,
          backward() -> every parameter gradient, and the aux states (BatchNorm moving stats) after it
  fused : simple_bind(ctx); forward_backward() (the fused train_step entry point) -> the same arrays
SoftmaxOutput is the head: backward needs no head gradient.
"""
from __future__ import annotations

import numpy as np

NETS = ("mlp", "convbn")


def make_inputs(net: str, art) -> dict[str, np.ndarray]:
    """Fixed random inputs (seed 1234) for the artifact's variant 0."""
    rng = np.random.RandomState(1234)
    shapes = art.variant_shapes(0)
    out = {}
    for name in art.inputs:
        shp = tuple(shapes[name])
        if name.endswith("label"):
            out[name] = rng.randint(0, 10, shp).astype(np.float32)
        else:
            out[name] = rng.uniform(-1, 1, shp).astype(np.float32)
    return out


def run_steps(art, ctx, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """{key: array}: infer.<out>, train.<out>, train.grad.<param>, train.aux.<aux>, fused.* likewise."""
    res: dict[str, np.ndarray] = {}
    ex = art.simple_bind(ctx, grad_req="null")
    outs = ex.forward(is_train=False, **inputs)
    for n, o in zip(art.symbol.list_outputs(), outs):
        res[f"infer.{n}"] = o.asnumpy()
    del ex

    for mode in ("train", "fused"):
        ex = art.simple_bind(ctx)
        if mode == "train":
            outs = ex.forward(is_train=True, **inputs)
            outs = [o.asnumpy() for o in outs]
            ex.backward()
        else:
            outs = [o.asnumpy() for o in ex.forward_backward(**inputs)]
        for n, o in zip(art.symbol.list_outputs(), outs):
            res[f"{mode}.{n}"] = o
        for n, g in ex.grad_dict.items():
            if g is not None and art.grad_req.get(n, "null") != "null":
                res[f"{mode}.grad.{n}"] = g.asnumpy()
        for n, a in ex.aux_dict.items():
            res[f"{mode}.aux.{n}"] = a.asnumpy()
        del ex
    return res


def rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    """max|got - ref| / max|ref| (the error relative to the array's scale); inf on shape mismatch or non-finite."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape or not np.all(np.isfinite(got)):
        return float("inf")
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    diff = float(np.max(np.abs(got - ref))) if ref.size else 0.0
    return diff / scale if scale > 0 else diff
