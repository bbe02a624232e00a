"""Fingerprints of the MLIR aotexec emits (and the IREE flags it passes) for the benchmark
nets and the golden cases, in every build the executor makes: inference (resident and not,
channels-last and NCHW), training (forward_train + backward, train_step, grad_req 'add',
each mirror policy), monitor and partial_forward builds, Vulkan, group2ctx segments.

A refactor that must not change code generation runs this before and after and compares:

    python tools/mlir_fingerprint.py > before.json   # on the old tree
    python tools/mlir_fingerprint.py --compare before.json

It drives only the public API (bind / forward / backward ...) and stops each compile at
``aotexec.compiler.compile_mlir`` after recording its input, so nothing is compiled and
the internals may change freely between the two runs.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]

import aotexec as ax  # noqa: E402
import aotexec.compiler as compiler  # noqa: E402


class Captured(Exception):
    pass


_seen: list[str] = []


def _capture(mlir_text, opts, *a, **kw):
    flags = compiler.iree_flags(opts)
    _seen.append(hashlib.sha256((mlir_text + "\0" + "\0".join(flags)).encode()).hexdigest())
    raise Captured()


def _patch() -> None:
    original = compiler.compile_mlir
    for mod in list(sys.modules.values()):
        if mod is not None and getattr(mod, "__name__", "").startswith("aotexec") and \
                getattr(mod, "compile_mlir", None) is original:
            mod.compile_mlir = _capture


@contextlib.contextmanager
def env(**kv):
    old = {k: os.environ.get(k) for k in kv}
    os.environ.update({k: v for k, v in kv.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(label: str, fn, out: dict) -> None:
    """Record the first module ``fn`` asks to compile (the capture stops it there)."""
    _seen.clear()
    try:
        fn()
    except Captured:
        pass
    except Exception as e:           # noqa: BLE001 - record failures too (they must match)
            _seen.append(f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    out[label] = list(_seen)


def cases() -> dict[str, list[str]]:
    import nets
    from golden import cases as golden_cases
    out: dict[str, list[str]] = {}
    _patch()
    for name in ("mlp", "lenet", "resnet8"):
        shape = nets.NETS[name][0]
        sym = nets.symbol(ax.sym, name)
        for ctxname, ctx in (("cpu", ax.cpu()), ("vulkan", ax.vulkan())):
            def infer(ctx=ctx):
                ex = sym.simple_bind(ctx, grad_req="null", data=shape)
                ex.forward()
            run(f"{name}/{ctxname}/infer", infer, out)
            for mirror in (None, False, True, "dots"):
                def train(ctx=ctx, mirror=mirror):
                    ex = sym.simple_bind(ctx, grad_req="write", data=shape, mirror=mirror)
                    ex.forward(is_train=True)
                run(f"{name}/{ctxname}/train/{mirror}", train, out)

            def step(ctx=ctx):
                ex = sym.simple_bind(ctx, grad_req="write", data=shape)
                ex.forward_backward()
            run(f"{name}/{ctxname}/train_step", step, out)
            if ctxname == "vulkan":
                continue

            def add(ctx=ctx):
                ex = sym.simple_bind(ctx, grad_req="add", data=shape)
                ex.forward(is_train=True)
            run(f"{name}/{ctxname}/add", add, out)
            with env(AOTEXEC_RESIDENT="0"):
                run(f"{name}/{ctxname}/infer/not_resident", infer, out)
            with env(AOTEXEC_LAYOUT="nchw"):
                run(f"{name}/{ctxname}/infer/nchw", infer, out)
                run(f"{name}/{ctxname}/train/nchw", step, out)
            with env(MXNET_BACKWARD_DO_MIRROR="1"):
                run(f"{name}/{ctxname}/train/env_mirror", step, out)

            def monitor(ctx=ctx):
                ex = sym.simple_bind(ctx, grad_req="write", data=shape)
                ex.set_monitor_callback(lambda n, a: None, monitor_all=True)
                ex.forward(is_train=True)
            run(f"{name}/{ctxname}/monitor", monitor, out)

            def partial(ctx=ctx):
                ex = sym.simple_bind(ctx, grad_req="null", data=shape)
                ex.partial_forward(step=0)
            run(f"{name}/{ctxname}/partial", partial, out)
    def placed(train):
        data = ax.sym.Variable("data")
        with ax.AttrScope(ctx_group="stage1"):
            x = ax.sym.FullyConnected(data, num_hidden=6, name="fc1")
        with ax.AttrScope(ctx_group="stage2"):
            x = ax.sym.BatchNorm(ax.sym.FullyConnected(x, num_hidden=4, name="fc2"), name="bn")
            x = ax.sym.SoftmaxOutput(x, name="softmax")
        ex = x.simple_bind(ax.cpu(), group2ctx={"stage1": ax.cpu(), "stage2": ax.vulkan()}, data=(5, 3))
        ex.forward(is_train=train)
    run("group2ctx/infer", lambda: placed(False), out)
    run("group2ctx/train", lambda: placed(True), out)
    for case in golden_cases("op", "net", categories="ABC"):
        meta = case.meta
        s = ax.sym.load_json(case.symbol_json)
        shapes = {k: tuple(v) for k, v in meta["shapes"].items()}
        dtypes = {k: np.dtype(v) for k, v in meta.get("dtypes", {}).items()}

        def golden(req, s=s, shapes=shapes, dtypes=dtypes, is_train=meta.get("is_train", False)):
            args = {n: ax.nd.zeros(shapes[n], dtype=dtypes.get(n, "float32")) for n in s.list_arguments()}
            aux = {n: ax.nd.zeros(shapes[n], dtype=dtypes.get(n, "float32")) for n in s.list_auxiliary_states()}
            grads = {n: ax.nd.zeros(shapes[n], dtype=dtypes.get(n, "float32")) for n in s.list_arguments()} \
                if req != "null" else None
            ex = s.bind(ax.cpu(), args=args, args_grad=grads, grad_req=req, aux_states=aux)
            ex.forward(is_train=is_train or req != "null")
        run(f"golden/{case.id}/infer", lambda: golden("null"), out)
        if meta.get("backward"):
            run(f"golden/{case.id}/train", lambda: golden(meta["grad_req"]), out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", type=Path, help="a fingerprint file from an earlier run")
    a = ap.parse_args()
    os.environ["AOTEXEC_CACHE"] = "0"
    got = cases()
    if a.compare is None:
        json.dump(got, sys.stdout, indent=1, sort_keys=True)
        print()
        return
    before = json.loads(a.compare.read_text())
    diff = sorted(k for k in set(before) | set(got) if before.get(k) != got.get(k))
    for k in diff:
        print(f"DIFFERS {k}: {before.get(k)} -> {got.get(k)}")
    print(f"{len(got)} builds, {sum(len(v) for v in got.values())} modules, {len(diff)} differ")
    sys.exit(1 if diff else 0)


if __name__ == "__main__":
    main()
