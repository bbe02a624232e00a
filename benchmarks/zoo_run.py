"""The model-zoo benchmark: ``python benchmarks/run.py --zoo [--nets resnet18_v1,...] [--quick]``.

Nets: the Gluon model zoo (zoo.py: exported once from MXNet 1.9.1 into .bench-venvs/zoo/) and
the three classic nets of nets.py.  Rows: inference at batch 1 and 16 and a training step
(batch 16; 8 for the nets zoo.TRAIN_BATCH_OF names), each on aotexec, MXNet 1.9.1 (best of
run.py's configurations), PyTorch eager and ONNX Runtime (inference; the graph PyTorch exports).

One net at a time (so one net's executors are in memory at once):

1. aotexec, per (case, mode), in fresh processes: the cold compile (bind + first step with an
   empty compile cache and ``AOTEXEC_COMPILE_MODE=subprocess``, so the peak RSS of the process's
   children is iree-compile's) under ``--compile-timeout`` (the process group is killed past it:
   the row reads "timed out"); its cache entries are then merged into the real cache, so the
   compile is not paid twice.  Then, in another fresh process, the emitted op count (nothing
   compiled), the cached bind + first step and memory; MXNet's bind + first step and plan.
2. The timing workers (run.py's, one per configuration, started once) set the rows up; aotexec
   rows whose compile failed are skipped.  Cross-check aotexec vs MXNet (same weights).
3. run.py's interleaved rounds over the net's rows, then its executors are released.

Results: benchmarks/results/zoo-latest.json (rewritten after every net), the tables between
``zoo:begin`` / ``zoo:end`` in docs/BENCHMARKS.md and docs/benchmarks-zoo.png.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import harness
import nets
import venvs
import zoo
from harness import HERE, ROOT, WorkerError, WorkerTimeout, log, split_list

SYSTEMS = ("aotexec", "mxnet", "torch", "onnxruntime")
BEGIN, END = "<!-- zoo:begin (written by benchmarks/run.py --zoo) -->", "<!-- zoo:end -->"
DEFAULTS = {"rounds": 5, "seconds": 1.0, "min_iters": 2, "warmup": 3,
            "results": str(HERE / "results" / "zoo-latest.json"), "plot": str(ROOT / "docs" / "benchmarks-zoo.png")}
QUICK = {"rounds": 2, "seconds": 0.3, "min_iters": 1, "warmup": 1}


# --------------------------------------------------------------------------- rows
def rows_of(name: str) -> list[tuple[str, str]]:
    """(net, mode) rows of one benchmark name: a zoo model's cases, or a classic net's two steps."""
    if name in zoo.MODELS:
        return zoo.cases(name)
    return [(name, "infer"), (name, "train")]


def title(net: str) -> str:
    return zoo.title(net) if zoo.is_case(net) else nets.TITLES[net]


def configs(args, mx_py: str | None, torch_py: str | None, systems: list[str]) -> list[harness.Config]:
    """run.py's configurations less the aotexec variants (local-sync, fused step): a zoo compile
    takes minutes, and a second training entry point would double it."""
    cfgs = harness.configs_for(systems, mx_py, torch_py, split_list(args.configs))
    out = [c for c in cfgs if c.label != "aotexec local-sync"]
    for c in out:
        if c.label == "aotexec":
            c.modes = ("infer", "train")
    return out


# --------------------------------------------------------------------------- compile phase
def cache_dir() -> Path:
    try:
        from aotexec.options import Options
        return Path(Options.from_env().cache_dir)
    except Exception:  # noqa: BLE001 - the package is being refactored: fall back to its documented default
        return Path(os.environ.get("AOTEXEC_CACHE_DIR", Path.home() / ".cache" / "aotexec"))


def ask_fresh(system: str, python: str, env: dict, ops: list[tuple[str, dict]], timeout: float) -> dict:
    """Run ``ops`` in one fresh worker: {op: answer or {"error": first line}}; an op past
    ``timeout`` kills the worker and ends the list (later ops read "skipped")."""
    c = harness.Config("fresh", system, env, python=python)
    out: dict = {}
    try:
        c.start()
        for op, kw in ops:
            if not c.alive():
                out[op] = {"error": "skipped (worker killed)"}
                continue
            try:
                out[op] = c.ask(op, timeout=timeout, **kw)
            except WorkerTimeout as e:
                out[op] = {"error": e.first_line, "timeout": True}
            except WorkerError as e:
                out[op] = {"error": e.first_line}
    finally:
        c.stop()
    return out


def aotexec_compile(net: str, mode: str, args) -> dict:
    """Cold compile, op count, cached bind and memory of one aotexec row (fresh processes)."""
    rec: dict = {}
    kw = {"net": net, "mode": mode}
    py = sys.executable
    if not args.no_cold:
        with tempfile.TemporaryDirectory(prefix="aotexec-zoo-cold-") as tmp:
            env = {"AOTEXEC_CACHE_DIR": tmp, "AOTEXEC_COMPILE_MODE": "subprocess"}
            rec["cold"] = ask_fresh("aotexec", py, env, [("bind_time", kw)], args.compile_timeout)["bind_time"]
            if "error" not in rec["cold"]:
                shutil.copytree(tmp, cache_dir(), dirs_exist_ok=True)  # the timing workers hit it
    ops = [("bind_time", kw), ("memory", kw)] if "error" not in rec.get("cold", {}) else []
    r = ask_fresh("aotexec", py, {}, ops + [("mlir_ops", kw)], args.compile_timeout)
    rec["mlir"] = r["mlir_ops"]
    if "bind_time" in r:
        rec["cached"], rec["memory"] = r["bind_time"], r["memory"]
    return rec


def compile_error(rec: dict | None) -> str | None:
    """Why an aotexec row cannot be timed (its compile failed or timed out), else None."""
    if not rec:
        return None
    for k in ("cold", "cached"):
        if k in rec and "error" in rec[k]:
            return rec[k]["error"]
    return None


def compile_phase(rows: list[tuple[str, str]], args, mx: harness.Config | None, results: dict) -> None:
    for net, mode in rows:
        key = f"{net}/{mode}"
        if "aotexec" in args.system_list:
            rec = results["compile"][key] = aotexec_compile(net, mode, args)
            err = compile_error(rec)
            cold, cached = rec.get("cold", {}), rec.get("cached", {})
            log(f"aotexec {key}: {rec['mlir'].get('ops', rec['mlir'].get('error'))} ops; " + (
                f"FAILED {err}" if err else
                f"cold {secs(cold):.1f} s (iree-compile peak {mb(cold.get('peak_rss_children'))} MB), "
                f"cached {secs(cached):.2f} s"))
        if mx is not None:
            r = ask_fresh("mxnet", mx.python, mx.env, [("bind_time", {"net": net, "mode": mode}),
                                                       ("memory", {"net": net, "mode": mode})], args.compile_timeout)
            results["peer_bind"][key] = {"bind": r["bind_time"], "memory": r["memory"]}


def secs(rec: dict | None) -> float:
    return rec["bind_s"] + rec["first_s"] if rec and "bind_s" in rec else math.nan


def mb(b) -> str:
    return "–" if b is None or (isinstance(b, float) and math.isnan(b)) else f"{b / 2**20:.0f}"


# --------------------------------------------------------------------------- set up, check, time
def restart(c: harness.Config, done: list[tuple[str, str]]) -> None:
    """A fresh worker for ``c`` with the rows it had set up (their compiles are cached); on
    failure ``c`` stays down and its remaining rows read as failed."""
    c.stop()
    try:
        c.start()
        for net, mode in done:
            c.ask("setup", net=net, mode=mode, warmup=0, timeout=600)
    except WorkerError as e:
        log(f"restarting {c.label} failed: {e.first_line}")
        c.kill()


def setup_phase(cfgs: list[harness.Config], rows: list[tuple[str, str]], args, results: dict) -> None:
    errors = results["errors"]
    for c in cfgs:
        done: list[tuple[str, str]] = []
        for net, mode in rows:
            key = f"{net}/{mode}/{c.label}"
            if mode not in c.modes:
                continue
            if c.system == "aotexec" and compile_error(results["compile"].get(f"{net}/{mode}")):
                errors[key] = "compile: " + compile_error(results["compile"][f"{net}/{mode}"])
                continue
            try:
                results["setup"][key] = c.ask("setup", net=net, mode=mode, warmup=args.warmup,
                                              timeout=args.compile_timeout)
                done.append((net, mode))
            except WorkerError as e:
                errors[key] = e.first_line
                log(f"FAILED {key}: {e.first_line}")
                if not c.alive():
                    restart(c, done)


def _centered_log(p: np.ndarray) -> np.ndarray:
    """Softmax output -> logits up to a constant (softmax forgets the shift)."""
    lg = np.log(np.maximum(p.astype(np.float64), 1e-30))
    return lg - lg.mean()


def compare(ref: dict, other: dict) -> dict:
    a, b = np.asarray(ref["out"]), np.asarray(other["out"])
    la, lb = _centered_log(a), _centered_log(b)
    common = [k for k in other["grad_norms"] if k in ref["grad_norms"]]
    d_grad = max((abs(ref["grad_norms"][k] - other["grad_norms"][k]) / max(1e-12, abs(ref["grad_norms"][k]))
                  for k in common), default=math.nan)
    return {"max_abs_out_diff": float(np.abs(a - b).max()),
            "logit_rel_diff": float(np.abs(la - lb).max() / max(1e-30, np.abs(lb).max())),
            "logit_scale": float(np.abs(lb).max()),
            "max_rel_grad_norm_diff": d_grad, "grads_compared": len(common)}


def cross_check(cfgs: list[harness.Config], name: str, rows: list[tuple[str, str]], errors: dict) -> dict:
    """aotexec against each MXNet configuration (same weights; PyTorch too for the classic nets):
    softmax outputs of the first inference row, gradient norms of the training row."""
    ref_cfg = next((c for c in cfgs if c.label == "aotexec"), None)
    infer = next((n for n, m in rows if m == "infer"), None)
    train = next((n for n, m in rows if m == "train"), None)
    if ref_cfg is None or f"{infer}/infer/aotexec" in errors:
        return {}
    train_net = train if f"{train}/train/aotexec" not in errors else None
    kw = {"net": infer, "train_net": train_net, "bind_missing": False}
    try:
        ref = ref_cfg.ask("check", timeout=600, **kw)
    except WorkerError as e:
        return {"error": e.first_line}
    out = {}
    for c in cfgs:
        peer_ok = c.system == "mxnet" or (c.system == "torch" and name not in zoo.MODELS)
        if c is ref_cfg or not peer_ok or f"{infer}/infer/{c.label}" in errors:
            continue
        ckw = dict(kw, train_net=train_net if train_net and f"{train}/train/{c.label}" not in errors else None)
        try:
            other = c.ask("check", timeout=600, **(ckw if c.system == "mxnet" else {"net": infer}))
        except WorkerError as e:
            out[c.label] = {"error": e.first_line}
            continue
        out[c.label] = compare(ref, other)
        v = out[c.label]
        if v["max_abs_out_diff"] > 1e-3 or v["max_rel_grad_norm_diff"] > 1e-2:
            log(f"WARNING: {c.label} disagrees with aotexec on {name}: {v}")
    return out


def release(cfgs: list[harness.Config], rows: list[tuple[str, str]]) -> None:
    for c in cfgs:
        for net in dict.fromkeys(n for n, _ in rows):
            if c.alive():
                try:
                    c.ask("release", net=net, timeout=120)
                except WorkerError:
                    pass


# --------------------------------------------------------------------------- main
def apply_defaults(args) -> None:
    for k, v in DEFAULTS.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.quick:
        for k, v in QUICK.items():
            setattr(args, k, v)
    args.system_list = ["aotexec"] if args.no_foreign else (split_list(args.systems) or list(SYSTEMS))


def main(args, parser) -> int:
    apply_defaults(args)
    if args.report_only or args.merge:
        results = json.loads(Path(args.results).read_text())
        if args.merge:
            results = merge(results, json.loads(Path(args.merge).read_text()))
            Path(args.results).write_text(json.dumps(results, indent=1, default=str))
        return publish(results, args)
    names = split_list(args.nets) or [*nets.BENCH_NETS, *zoo.MODELS]
    for n in names:
        if n not in zoo.MODELS and n not in nets.BENCH_NETS:
            parser.error(f"unknown net {n!r}; known: {', '.join([*nets.BENCH_NETS, *zoo.MODELS])}")
    systems = args.system_list
    models = [n for n in names if n in zoo.MODELS]
    mx_py = args.mxnet_python or (str(venvs.ensure("mxnet", log)) if "mxnet" in systems or models else None)
    torch_py = args.torch_python or (str(venvs.ensure("torch", log))
                                     if {"torch", "onnxruntime"} & set(systems) else None)
    if models:
        zoo.ensure_exported(models, mx_py, log)
    load_start = harness.wait_idle(args.idle, args.wait)
    t_start = time.time()
    results: dict = {"started": _dt.datetime.now().strftime("%Y-%m-%d %H:%M"), "machine": harness.machine(),
                     "load_start": load_start, "args": {k: v for k, v in vars(args).items() if k != "system_list"},
                     "names": names, "rows": {n: rows_of(n) for n in names}, "compile": {}, "peer_bind": {},
                     "setup": {}, "errors": {}, "cross_check": {}, "timing": {}, "wall_s": {}}
    cfgs = configs(args, mx_py, torch_py, systems)
    mx_bind = next((c for c in cfgs if c.label == "mxnet"), None) if not args.no_compile else None
    try:
        harness.start_workers(cfgs, results)
        for name in names:
            t0 = time.time()
            rows = rows_of(name)
            if not args.no_compile:
                compile_phase(rows, args, mx_bind, results)
            setup_phase(cfgs, rows, args, results)
            if not args.no_check:
                results["cross_check"][name] = cross_check(cfgs, name, rows, results["errors"])
            if not args.no_timing:
                results["timing"].update(harness.timing(cfgs, rows, args, results["errors"]))
            release(cfgs, rows)
            results["wall_s"][name] = time.time() - t0
            log(f"{name} done in {results['wall_s'][name]:.0f} s")
            save(results, args, t_start)
    finally:
        for c in cfgs:
            c.stop()
    save(results, args, t_start)
    return publish(results, args)


def _run_info(results: dict, names: list[str]) -> dict:
    m = results["machine"]
    return {"started": results["started"], "cpu": m.get("Model name", "?"), "load_start": results["load_start"],
            "load_end": results.get("load_end", math.nan), "nets": names}


def _net_of(key: str) -> str:
    """'resnet18_v1:16/train/aotexec' -> 'resnet18_v1'."""
    return key.split("/")[0].split(":")[0]


def merge(base: dict, new: dict) -> dict:
    """``base`` with every entry of ``new``'s nets replaced by ``new``'s; ``runs`` records which
    run (date, CPU, load) each net's rows come from."""
    fresh = set(new["names"])
    runs = base.get("runs") or [_run_info(base, list(base["names"]))]
    for r in runs:
        r["nets"] = [n for n in r["nets"] if n not in fresh]
    out = dict(base, runs=[r for r in runs if r["nets"]] + [_run_info(new, list(new["names"]))])
    for k in ("compile", "peer_bind", "setup", "errors", "cross_check", "timing", "wall_s", "rows"):
        # a --no-compile run measured no compiles: a net keeps the earlier run's compile rows
        renewed = fresh if k not in ("compile", "peer_bind") else {_net_of(key) for key in new.get(k, {})}
        kept = {key: v for key, v in base.get(k, {}).items() if _net_of(key) not in renewed}
        out[k] = kept | new.get(k, {})
    out["names"] = list(base["names"]) + [n for n in new["names"] if n not in base["names"]]
    return out


def save(results: dict, args, t_start: float) -> None:
    results["load_end"] = harness.load1()
    results["total_wall_s"] = time.time() - t_start
    path = Path(args.results)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, default=str))


def publish(results: dict, args) -> int:
    body = markdown(results)
    print(body)
    if not args.no_docs:
        write_markdown(Path(args.markdown), body)
        if plot(results, Path(args.plot)):
            log(f"wrote {args.markdown} and {args.plot}")
    return 0


def write_markdown(path: Path, body: str) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(head + BEGIN + "\n" + body + END + tail)


# --------------------------------------------------------------------------- report
PEERS = (("mxnet", "MXNet 1.9.1 (best config)", lambda lab: lab.startswith("mxnet")),
         ("torch", "PyTorch 2.13 eager", lambda lab: lab == "torch"),
         ("onnxruntime", "ONNX Runtime", lambda lab: lab == "onnxruntime"))


def cell(results: dict, net: str, mode: str, label: str) -> str:
    s = results["timing"].get(f"{net}/{mode}/{label}")
    if s:
        return f"{s['median_ms']:.3g} ({s['p10_ms']:.3g}–{s['p90_ms']:.3g})"
    return status(results["errors"].get(f"{net}/{mode}/{label}"))


def status(err: str | None) -> str:
    if not err:
        return "–"
    if "NotAvailable" in err:
        return "n/a"
    if "timed out" in err:
        return "timed out"
    return "failed"


def row_summary(results: dict, net: str, mode: str) -> dict:
    t = results["timing"]
    labels = sorted({k.split("/", 2)[2] for k in t if k.startswith(f"{net}/{mode}/")})
    row: dict = {}
    for fam, _, pred in PEERS:
        cands = [(t[f"{net}/{mode}/{lab}"]["median_ms"], lab) for lab in labels if pred(lab)]
        if cands:
            row[fam] = min(cands)
    peers = [row[f] for f, _, _ in PEERS if f in row]
    if peers:
        row["best_peer"] = min(peers)
    a = t.get(f"{net}/{mode}/aotexec")
    if a and peers:
        row["speedup"] = row["best_peer"][0] / a["median_ms"]
    return row


def markdown(results: dict) -> str:
    m, a = results["machine"], results["args"]
    L = [f"Run {results['started']} on {m.get('Model name', '?')}, {m.get('CPU(s)', m['cpus'])} CPUs; load average "
         f"{results['load_start']:.2f} at the start, {results.get('load_end', math.nan):.2f} at the end; "
         f"{a['rounds']} rounds x {a['seconds']} s per system and row"
         f"{' (--quick)' if a.get('quick') else ''}; compile timeout {a['compile_timeout']:.0f} s; "
         f"whole run {results.get('total_wall_s', math.nan) / 60:.0f} min.", *_merged_runs(results),
         "Times in ms per step: median (p10–p90). Speedup = best peer median / aotexec median. "
         "`n/a`: the system has no such net (torchvision lacks it; ONNX Runtime runs inference only); "
         "`timed out` / `failed`: aotexec's compile of that row (the error is listed below).", "",
         "| net | step | aotexec | " + " | ".join(h for _, h, _ in PEERS) + " | best peer | speedup |",
         "|---|---|---|" + "---|" * len(PEERS) + "---|---|"]
    all_rows = [(n, r) for n in results["names"] for r in map(tuple, results["rows"][n])]
    for name, (net, mode) in all_rows:
        s = row_summary(results, net, mode)
        peers = []
        for fam, _, _ in PEERS:
            if fam == "mxnet" and "mxnet" in s:
                peers.append(f"{cell(results, net, mode, s['mxnet'][1])} [{s['mxnet'][1]}]")
            elif fam == "mxnet":
                peers.append(cell(results, net, mode, "mxnet"))
            else:
                peers.append(cell(results, net, mode, fam))
        best = f"{s['best_peer'][0]:.3g} ({s['best_peer'][1]})" if "best_peer" in s else "–"
        sp = f"{s['speedup']:.2f}x" if "speedup" in s else "–"
        L.append(f"| {title(net)} | {mode} | {cell(results, net, mode, 'aotexec')} | " + " | ".join(peers)
                 + f" | {best} | {sp} |")
    big = sorted(m for m in zoo.TRAIN_BATCH_OF if m in results["names"])
    if big:
        L += ["", f"Training steps of {', '.join(big)} run at batch {zoo.TRAIN_BATCH_OF[big[0]]} "
              "(above ResNet-50's size: a batch-16 step takes seconds per system on this machine); "
              "inceptionv3 runs at 299x299, every other zoo net at 224x224."]
    L += compile_table(results, all_rows)
    L += check_lines(results)
    errs = results.get("errors", {})
    shown = {k: v for k, v in errs.items() if "NotAvailable" not in v}
    if shown:
        L += ["", "Failures (row/configuration: first line of the error):", ""]
        L += [f"- `{k}`: {v}" for k, v in shown.items()]
    L += ["", "Versions: " + "; ".join(f"{k}: {v}" for k, v in results.get("versions", {}).items())]
    return "\n".join(L) + "\n"


def _merged_runs(results: dict) -> list[str]:
    """A line per run when the rows were merged from several (``merge``): rows of different
    runs (machines, loads) compare only through their speedup columns."""
    runs = results.get("runs") or []
    if len(runs) < 2:
        return []
    return ["Rows merged from several runs (`--merge`); compare rows of different runs only by their "
            "speedups: " + "; ".join(f"{', '.join(r['nets'])}: {r['started']} on {r['cpu']}" + _load(r) for r in runs)
            + "."]


def _load(run: dict) -> str:
    lo, hi = run.get("load_start", math.nan), run.get("load_end", math.nan)
    return "" if math.isnan(lo) or math.isnan(hi) else f", load {lo:.2f}-{hi:.2f}"


def compile_table(results: dict, all_rows) -> list[str]:
    comp, pb = results.get("compile", {}), results.get("peer_bind", {})
    if not comp and not pb:
        return []
    L = ["", "aotexec compile, fresh processes: emitted StableHLO/CHLO ops (the module a bind compiles, counted "
         "without compiling); cold compile = bind + first step with an empty compile cache (`AOTEXEC_COMPILE_MODE="
         "subprocess`), seconds; its peak RSS: iree-compile's (the largest child) and the Python process's; "
         "cached = bind + first step on a warm cache; plan = `Total N MB allocated` of `debug_str()`; allocator = "
         "the IREE device allocator's peak; MXNet's `simple_bind` + first step and plan beside them.", "",
         "| net | step | MLIR ops | cold compile, s | iree-compile peak MB | process peak MB | cached, s | "
         "plan MB | allocator peak MB | MXNet bind + first, s | MXNet plan MB |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, (net, mode) in all_rows:
        key = f"{net}/{mode}"
        rec, p = comp.get(key, {}), pb.get(key, {})
        mlir = rec.get("mlir", {})
        cold, cached, mem = rec.get("cold"), rec.get("cached"), rec.get("memory") or {}
        if cold and "error" in cold:
            cold_s = "timed out" if cold.get("timeout") else "failed"
            cold_peak = proc_peak = "–"
        elif cold:
            cold_s, cold_peak, proc_peak = (f"{secs(cold):.1f}", mb(cold.get("peak_rss_children")),
                                            mb(cold.get("peak_rss_self")))
        else:
            cold_s = cold_peak = proc_peak = "–"
        cached_s = f"{secs(cached):.2f}" if cached and "error" not in cached else "–"
        if cached and "error" not in cached and cached.get("cache", {}).get("misses"):
            cached_s += " (compiled)"
        plan = mb(mem.get("plan_bytes")) if "plan_bytes" in mem else "–"
        peak = mb((mem.get("allocator") or {}).get("device_bytes_peak"))
        mxb = p.get("bind", {})
        mx_s = f"{secs(mxb):.2f}" if mxb and "error" not in mxb else "–"
        mx_plan = mb((p.get("memory") or {}).get("plan_bytes"))
        L.append(f"| {title(net)} | {mode} | {mlir.get('ops', '–')} | {cold_s} | {cold_peak} | {proc_peak} | "
                 f"{cached_s} | {plan} | {peak} | {mx_s} | {mx_plan} |")
    return L


def check_lines(results: dict) -> list[str]:
    xc = results.get("cross_check", {})
    lines = []
    for name, per in xc.items():
        ok = {k: v for k, v in per.items() if isinstance(v, dict) and "error" not in v}
        if not ok:
            continue
        o = max(v["max_abs_out_diff"] for v in ok.values())
        lg = max(v["logit_rel_diff"] for v in ok.values())
        scale = min(v.get("logit_scale", math.nan) for v in ok.values())
        g = [v["max_rel_grad_norm_diff"] for v in ok.values() if v["grads_compared"]]
        lines.append(f"- {name} (vs {', '.join(ok)}): max |softmax diff| {o:.1e}, logits (centered log-softmax, "
                     f"largest {scale:.1e}) max rel diff {lg:.1e}"
                     + (f", parameter-gradient norms max rel diff {max(g):.1e}" if g
                        else ", no training row to compare"))
    if not lines:
        return []
    return ["", "Cross-check against aotexec (same inputs and weights: MXNet, and PyTorch on the classic nets; "
            "zoo rows in PyTorch / ONNX Runtime use torchvision's own random init, speed only). Logits are "
            "recovered from the float32 softmax (~6e-8 absolute resolution), so a net whose randomly initialised "
            "logits span only ~1e-4 cannot show better than ~1e-4 relative here; `tools/make_zoo_reference.py` "
            "data checks raw outputs:", "", *lines]


def plot(results: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed (pip install 'aotexec[benchmark]'); no plot")
        return False
    rows = [tuple(r) for n in results["names"] for r in results["rows"][n]]
    systems = [("aotexec", "aotexec", "#1f77b4"), ("mxnet", "MXNet (best)", "#d62728"),
               ("torch", "PyTorch", "#ff7f0e"), ("onnxruntime", "ONNX Runtime", "#2ca02c")]
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.5))
    h = 0.8 / len(systems)
    for j, (fam, lab, color) in enumerate(systems):
        ys, xs = [], []
        for i, (net, mode) in enumerate(rows):
            if fam == "aotexec":
                s = results["timing"].get(f"{net}/{mode}/aotexec")
                v = s["median_ms"] if s else None
            else:
                v = row_summary(results, net, mode).get(fam, (None,))[0]
            if v:
                ys.append(i + (j - 1.5) * h)
                xs.append(v)
        ax.barh(ys, xs, height=h, color=color, label=lab)
    ax.set_xscale("log")
    for i, (net, mode) in enumerate(rows):   # say why aotexec has no bar
        err = results["errors"].get(f"{net}/{mode}/aotexec")
        if err and f"{net}/{mode}/aotexec" not in results["timing"]:
            ax.text(ax.get_xlim()[0] * 1.05, i - 1.5 * h, f"aotexec: {status(err)}", va="center", fontsize=7,
                    color="#1f77b4")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{title(n)} {m}" for n, m in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step (median; log scale; missing bar: failed, timed out or n/a)")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"Model zoo: aotexec vs MXNet 1.9.1 vs PyTorch 2.13 vs ONNX Runtime — "
                 f"{results['machine'].get('CPU(s)', '')} CPUs ({results['started']})", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
