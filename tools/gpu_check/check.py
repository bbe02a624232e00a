"""Device check: aotexec's CUDA path from a runtime-only install, against llvm-cpu references.

Run from the repo root with PYTHONPATH=<iree-base-runtime site>:<repo root> (see run.sh).
DEVCHECK_CTX=cpu runs the same on ax.cpu() (local dry run of the runtime-only path).
Pass criterion per array: max|gpu - cpu_ref| / max|cpu_ref| <= TOL (1e-3, float32 GPU vs CPU).
Timings: median of N_TIME calls after N_WARM warm-up calls, inputs already on the device
(every aotexec call is synchronous: it returns once the device work is done).
Writes $OUT/devcheck.json when OUT is set.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TOL = 1e-3
N_WARM, N_TIME = 3, 20
CTX = os.environ.get("DEVCHECK_CTX", "gpu").strip().lower()
T_START = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T_START:6.1f}s] {msg}", flush=True)


def one_line(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}".replace("\n", " | ")
    return s[:600]


def median_ms(fn) -> float:
    for _ in range(N_WARM):
        fn()
    ts = []
    for _ in range(N_TIME):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def check_net(ax, np, common, net: str, ctx) -> dict:
    rec: dict = {"net": net, "ok": False}
    t0 = time.perf_counter()
    art = ax.load(HERE / "artifacts" / net)
    rec["targets"] = art.targets
    ref = np.load(HERE / f"ref_{net}.npz", allow_pickle=False)
    inputs = {k[len("input."):]: ref[k] for k in ref.files if k.startswith("input.")}
    expected = {k[len("expected."):]: ref[k] for k in ref.files if k.startswith("expected.")}
    got = common.run_steps(art, ctx, inputs)
    rec["first_run_s"] = round(time.perf_counter() - t0, 2)   # load + bind + module load/PTX JIT + the 3 passes
    errs = {}
    for k, v in expected.items():
        errs[k] = common.rel_err(got[k], v) if k in got else float("inf")
    extra = sorted(set(got) - set(expected))
    rec["errors"] = {k: float(f"{e:.3e}") if e != float("inf") else "inf" for k, e in errs.items()}
    rec["missing_or_extra"] = sorted(k for k in expected if k not in got) + extra
    worst_k = max(errs, key=errs.get)
    rec["worst"] = [worst_k, errs[worst_k]]
    rec["failed"] = sorted(k for k, e in errs.items() if not e <= TOL)
    rec["n_arrays"] = len(errs)
    for phase in ("infer", "train", "fused"):
        ph = [e for k, e in errs.items() if k.startswith(phase + ".")]
        rec[f"max_err_{phase}"] = max(ph) if ph else None
    rec["ok"] = not rec["failed"] and not rec["missing_or_extra"]
    for k in sorted(errs):   # fused.* (train_step) lines only when over TOL; all are in devcheck.json
        if errs[k] <= TOL and k.startswith("fused."):
            continue
        print(f"  {net:8s} {'ok ' if errs[k] <= TOL else 'BAD'} {k:40s} {errs[k]:.2e}", flush=True)

    # timings: inputs set once, on the device
    try:
        ex_i = art.simple_bind(ctx, grad_req="null")
        ex_t = art.simple_bind(ctx)
        for ex in (ex_i, ex_t):
            for n, a in inputs.items():
                ex.arg_dict[n][:] = a
        out_name = art.symbol.list_outputs()[0]

        def infer():
            ex_i.forward(is_train=False)[0].wait_to_read()

        def train():
            ex_t.forward(is_train=True)
            ex_t.backward()
            for g in ex_t.grad_arrays:
                if g is not None:
                    g.wait_to_read()

        def fused():
            ex_t.forward_backward()
            for g in ex_t.grad_arrays:
                if g is not None:
                    g.wait_to_read()

        rec["infer_ms"] = round(median_ms(infer), 3)
        rec["train_ms"] = round(median_ms(train), 3)
        rec["fused_ms"] = round(median_ms(fused), 3)
        # the timed executors must still give the reference inference output
        rec["timed_infer_err"] = common.rel_err(ex_i.forward(is_train=False)[0].asnumpy(),
                                                expected[f"infer.{out_name}"])
        rec["memory_bytes"] = {k: int(v) for k, v in ex_t.memory_usage().items()
                               if isinstance(v, (int, np.integer))}
    except Exception as e:  # noqa: BLE001
        rec["timing_error"] = one_line(e)
        log(f"  {net}: timing failed: {one_line(e)}")
    rec["total_s"] = round(time.perf_counter() - t0, 2)
    return rec


def main() -> int:
    summary: dict = {"ctx": CTX, "tol": TOL, "metric": "max|got-ref|/max|ref|", "python": sys.version.split()[0],
                     "platform": platform.platform(), "nets": {}}
    try:
        import numpy as np
        import iree.runtime as rt
        import aotexec as ax
        import common
        summary["numpy"] = np.__version__
        summary["aotexec"] = ax.__version__
        summary["aotexec_file"] = ax.__file__
        try:
            from iree.runtime import version as iv
            summary["iree_runtime"] = getattr(iv, "VERSION", None) or getattr(iv, "PACKAGE_SUFFIX", None)
        except Exception:  # noqa: BLE001
            pass
        summary["iree_drivers"] = rt.query_available_drivers()
        summary["compiler_importable"] = _importable("iree.compiler")
        log(f"python {summary['python']}, numpy {np.__version__}, aotexec from {ax.__file__}, "
            f"iree drivers {summary['iree_drivers']}, iree.compiler importable: {summary['compiler_importable']}")
        ctx = ax.gpu() if CTX == "gpu" else ax.cpu()
        if CTX == "gpu":
            try:
                devs = rt.get_driver("cuda").query_available_devices()
                summary["cuda_devices"] = [str(d) for d in devs]
                log(f"cuda devices: {summary['cuda_devices']}")
            except Exception as e:  # noqa: BLE001
                summary["cuda_devices_error"] = one_line(e)
                log(f"cuda device query failed: {one_line(e)}")
        log(f"context {ctx} (driver {ctx.driver}, target {ctx.target}), tol {TOL:g}")
    except Exception as e:  # noqa: BLE001
        summary["setup_error"] = one_line(e)
        log(f"SETUP FAILED: {one_line(e)}")
        traceback.print_exc()
        return _finish(summary)

    for net in common.NETS:
        log(f"--- {net}")
        try:
            summary["nets"][net] = check_net(ax, np, common, net, ctx)
        except Exception as e:  # noqa: BLE001
            summary["nets"][net] = {"net": net, "ok": False, "error": one_line(e)}
            log(f"{net}: ERROR {one_line(e)}")
    return _finish(summary)


def _importable(mod: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(mod) is not None
    except Exception:  # noqa: BLE001
        return False


def _finish(summary: dict) -> int:
    nets = summary["nets"]
    print()
    print(f"devcheck on {summary['ctx']}: pass if max|got-ref|/max|ref| <= {summary['tol']:g} for every array")
    hdr = f"{'net':8s} {'result':6s} {'arrays':>6s} {'infer err':>10s} {'train err':>10s} {'fused err':>10s} " \
          f"{'infer ms':>9s} {'train ms':>9s} {'fused ms':>9s} {'1st run s':>9s}"
    print(hdr)
    print("-" * len(hdr))

    def f(v, fmt):
        return format(v, fmt) if isinstance(v, (int, float)) else "-"
    for net, r in nets.items():
        if "error" in r:
            print(f"{net:8s} ERROR  {r['error'][:200]}")
            continue
        print(f"{net:8s} {'PASS' if r['ok'] else 'FAIL':6s} {r['n_arrays']:6d} {f(r['max_err_infer'], '10.2e')} "
              f"{f(r['max_err_train'], '10.2e')} {f(r['max_err_fused'], '10.2e')} {f(r.get('infer_ms'), '9.3f')} "
              f"{f(r.get('train_ms'), '9.3f')} {f(r.get('fused_ms'), '9.3f')} {f(r.get('first_run_s'), '9.2f')}")
        if r.get("failed"):
            print(f"         failed: {', '.join(r['failed'][:10])}{' ...' if len(r['failed']) > 10 else ''}")
        if r.get("timing_error"):
            print(f"         timing error: {r['timing_error'][:200]}")
    ok = bool(nets) and all(r.get("ok") for r in nets.values()) and "setup_error" not in summary
    summary["all_ok"] = ok
    summary["wall_s"] = round(time.perf_counter() - T_START, 2)
    print(f"overall: {'PASS' if ok else 'FAIL'} in {summary['wall_s']} s")
    out = os.environ.get("OUT")
    if out:
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / "devcheck.json").write_text(json.dumps(summary, indent=1, default=str))
            print(f"wrote {Path(out) / 'devcheck.json'}")
        except Exception as e:  # noqa: BLE001
            print(f"could not write devcheck.json: {one_line(e)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
