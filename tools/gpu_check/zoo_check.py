"""Device check of the CI-sized model-zoo nets (tests/data/zoo) on CUDA, from a runtime-only
install: each net's CUDA training artifact (build_zoo.sh) bound on ax.gpu(), its inference
output, training output, every parameter gradient and BatchNorm's moving statistics against
MXNet 1.9.1's float64 references, with tests/test_zoo.py's rule (relative error <= 1e-4, or
twice MXNet's own float32 error for ill-conditioned gradients; a floor for gradients whose true
value is zero). Median ms per inference call and per training step, inputs on the device.

Run from the repo root with PYTHONPATH=<iree-base-runtime site>:<repo root> (run.sh does).
DEVCHECK_CTX=cpu runs the artifacts' check here on ax.cpu() instead (needs llvm-cpu modules).
Writes $OUT/zoo_check.json when OUT is set.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("DEVCHECK_ROOT", HERE.parent))
sys.path.insert(0, str(ROOT / "tests"))
from zoo_params import FLOOR, relative_error  # noqa: E402  (numpy only)
sys.path.insert(0, str(HERE))
from check import median_ms  # noqa: E402

ZOO = ROOT / "tests" / "data" / "zoo"
RTOL = 1e-4


def _arrays(net: str, name: str) -> dict[str, np.ndarray]:
    with np.load(ZOO / net / f"{name}.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def check_net(ax, net: str, ctx) -> dict:
    t0 = time.perf_counter()
    art = ax.load(HERE / "artifacts" / f"zoo_{net}")
    expected, inputs, params = _arrays(net, "expected"), _arrays(net, "inputs"), _arrays(net, "params")
    ex = art.simple_bind(ctx)
    for key, value in params.items():
        kind, name = key.split(":", 1)
        (ex.arg_dict if kind == "arg" else ex.aux_dict)[name][:] = value
    ex.arg_dict["data"][:] = inputs["data"]
    errors: dict[str, float] = {}
    bad: list[str] = []

    def check(what: str, actual: np.ndarray, ref: np.ndarray, floor: float = 0.0, mxnet32: float = 0.0) -> None:
        err = relative_error(actual, ref, floor)
        errors[what] = float(f"{err:.3e}")
        if not err <= max(RTOL, 2 * mxnet32):
            bad.append(f"{what} {err:.2e} (MXNet float32's {mxnet32:.1e})")

    aux0 = {n: a.asnumpy() for n, a in ex.aux_dict.items()}
    check("infer:output", ex.forward(is_train=False)[0].asnumpy(), expected["infer:output"])
    head = ax.nd.array(inputs["head_grad"], ctx=ctx)
    out = ex.forward(is_train=True)[0].asnumpy()
    ex.backward(out_grads=[head])
    check("train:output", out, expected["train:output"])
    grads = [k for k in expected if k.startswith("grad:")]
    floor = FLOOR * max(float(np.abs(expected[k]).max()) for k in grads)
    for key in grads:
        name = key[5:]
        grad = ex.grad_dict[name].asnumpy()
        if f"index:{name}" in expected:
            grad = grad.ravel()[expected[f"index:{name}"]]
        check(key, grad, expected[key], floor, float(expected[f"mxnet32:{name}"]))
    aux = [k for k in expected if k.startswith("aux:")]
    floor = 1e-4 * max((float(np.abs(expected[k]).max()) for k in aux), default=0.0)
    for key in aux:
        check(key, ex.aux_dict[key[4:]].asnumpy(), expected[key], floor)
    first_s = round(time.perf_counter() - t0, 2)

    def infer():
        ex.forward(is_train=False)[0].wait_to_read()

    def train():
        ex.forward(is_train=True)
        ex.backward(out_grads=[head])
        for g in ex.grad_arrays:
            if g is not None:
                g.wait_to_read()
    rec = {"net": net, "data": list(inputs["data"].shape), "arrays": len(errors), "failed": bad,
           "worst": max(errors.items(), key=lambda kv: kv[1]), "first_s": first_s,
           "infer_ms": round(median_ms(infer), 3), "train_ms": round(median_ms(train), 3)}
    for name, value in aux0.items():      # leave the moving statistics as bound
        ex.aux_dict[name][:] = value
    return rec


def main() -> int:
    import aotexec as ax
    ctx = ax.gpu() if os.environ.get("DEVCHECK_CTX", "gpu") == "gpu" else ax.cpu()
    nets = sorted(p.name[4:] for p in (HERE / "artifacts").glob("zoo_*"))
    results = {}
    for net in nets:
        try:
            results[net] = check_net(ax, net, ctx)
        except Exception as e:  # noqa: BLE001 - report every net
            results[net] = {"net": net, "error": f"{type(e).__name__}: {e}"[:600], "failed": ["error"]}
        r = results[net]
        print(f"{net:16s} {'PASS' if not r['failed'] else 'FAIL'} "
              + (f"{r['arrays']:4d} arrays, worst {r['worst'][0]} {r['worst'][1]:.2e}, infer {r['infer_ms']} ms, "
                 f"train step {r['train_ms']} ms, first {r['first_s']} s" if "error" not in r else r["error"]),
              flush=True)
        for line in r["failed"][:8]:
            print(f"    {line}")
    ok = bool(results) and all(not r["failed"] for r in results.values())
    print(f"zoo check on {ctx}: {'PASS' if ok else 'FAIL'}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "zoo_check.json").write_text(json.dumps(results, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
