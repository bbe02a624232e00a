"""Benchmark aotexec against Apache MXNet 1.9.1 and PyTorch 2.13 eager, interleaved.

    python benchmarks/run.py                      # everything; rewrites docs/BENCHMARKS.md's table + plot
    python benchmarks/run.py --systems aotexec    # aotexec only (no virtualenvs)
    python benchmarks/run.py --quick              # fewer rounds, for a look
    python benchmarks/run.py --zoo [--nets resnet18_v1,...] [--quick]   # the Gluon model zoo (zoo_run.py)

One invocation starts a worker process per system configuration (benchmarks/worker.py,
each under its own virtualenv and environment), sets every (net, mode) up and
warms it, cross-checks the outputs against aotexec, then times in *rounds*: each
round gives every configuration a slice of ``--seconds`` on every (net, mode), in a
rotating order, so machine noise lands on every system alike.  Statistics pool all
slices (median, p10, p90); each slice also records the CPU the rest of the machine
used meanwhile.  Then bind/compile times (fresh processes: cold with AOTEXEC_CACHE=0,
and cached), artifact compile + load times, and memory.  Results go to
benchmarks/results/latest.json, the table into docs/BENCHMARKS.md (between the
``bench:begin``/``bench:end`` markers) and the plot to docs/benchmarks.png.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import nets  # noqa: E402
import venvs  # noqa: E402

GOAL = 1.5  # aotexec should be this many times faster than the best peer
MODES = ("infer", "train")


class WorkerError(RuntimeError):
    def __init__(self, message: str, error: str):
        super().__init__(message)
        lines = [ln.strip() for ln in error.splitlines() if ln.strip()]
        self.first_line = " ".join(lines[:2])[:300]


class WorkerTimeout(WorkerError):
    """A request ran past its time limit; the worker (and its process group) was killed."""


@dataclass
class Config:
    label: str  # e.g. "mxnet omp2 nofuse"
    system: str  # worker system: aotexec | mxnet | torch
    env: dict = field(default_factory=dict)
    modes: tuple = MODES
    python: str = sys.executable
    proc: subprocess.Popen | None = None
    info: dict = field(default_factory=dict)

    def start(self) -> None:
        env = {**os.environ, **self.env}
        # its own process group: a timeout kills the worker and whatever it started (iree-compile)
        self.proc = subprocess.Popen([self.python, str(HERE / "worker.py"), self.system], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL if not VERBOSE else None,
                                     text=True, env=env, cwd=str(ROOT), start_new_session=True)
        self.info = self.ask("hello")

    def ask(self, op: str, timeout: float | None = None, **kw) -> dict:
        """Send one request and wait for its answer; past ``timeout`` seconds kill the worker
        (WorkerTimeout: ``restart()`` before asking again)."""
        assert self.proc and self.proc.stdin and self.proc.stdout
        if not self.alive():
            raise WorkerError(f"worker '{self.label}' is not running (op {op})", "worker not running")
        self.proc.stdin.write(json.dumps({"op": op, **kw}) + "\n")
        self.proc.stdin.flush()
        if timeout is not None and not select.select([self.proc.stdout], [], [], timeout)[0]:
            self.kill()
            raise WorkerTimeout(f"worker '{self.label}' timed out on {op} {kw} after {timeout:.0f} s",
                                f"timed out after {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise WorkerError(f"worker '{self.label}' died (op {op}); rerun with -v to see its stderr",
                              f"worker died (exit {self.proc.poll()})")
        res = json.loads(line)
        if not res.get("ok"):
            raise WorkerError(f"worker '{self.label}' failed {op} {kw}: {res.get('error')}\n{res.get('traceback', '')}",
                              res.get("error", ""))
        return res

    def kill(self) -> None:
        """SIGKILL the worker's process group (compiler children included) and reap it."""
        if self.proc and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def alive(self) -> bool:
        return bool(self.proc and self.proc.poll() is None)

    def stop(self) -> None:
        if self.alive():
            try:
                self.ask("quit", timeout=10)
            except Exception:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


VERBOSE = False


def configs_for(systems: list[str], mx_python: str | None, torch_python: str | None,
                only: list[str] | None = None) -> list[Config]:
    """Worker configurations of ``systems``; ``only``: keep these labels (``--configs``)."""
    return [c for c in _configs(systems, mx_python, torch_python) if not only or c.label in only]


def _configs(systems: list[str], mx_python: str | None, torch_python: str | None) -> list[Config]:
    out = []
    if "aotexec" in systems:
        out.append(Config("aotexec", "aotexec", modes=("infer", "train", "train_fused")))
        out.append(Config("aotexec local-sync", "aotexec", {"AOTEXEC_CPU_DRIVER": "local-sync"},
                          modes=("infer", "train", "train_fused")))
    if "mxnet" in systems:
        for label, env in (("mxnet", {}), ("mxnet omp2", {"OMP_NUM_THREADS": "2"}),
                           ("mxnet nofuse", {"MXNET_SUBGRAPH_BACKEND": "NONE"}),
                           ("mxnet omp2 nofuse", {"OMP_NUM_THREADS": "2", "MXNET_SUBGRAPH_BACKEND": "NONE"})):
            out.append(Config(label, "mxnet", env, python=mx_python))
    if "torch" in systems:
        out.append(Config("torch", "torch", python=torch_python))
    if "onnxruntime" in systems:  # the model-zoo run only (the torch venv)
        out.append(Config("onnxruntime", "onnxruntime", modes=("infer",), python=torch_python))
    return out


# --------------------------------------------------------------------------- helpers
def split_list(s: str | None) -> list[str]:
    return [x.strip() for x in (s or "").split(",") if x.strip()]


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def load1() -> float:
    return os.getloadavg()[0]


def wait_idle(threshold: float, max_wait: float) -> float:
    t0 = time.time()
    while load1() >= threshold and time.time() - t0 < max_wait:
        log(f"load average {load1():.2f} >= {threshold}; waiting for an idle machine "
            f"({max_wait - (time.time() - t0):.0f} s left)")
        time.sleep(min(15.0, max(1.0, max_wait - (time.time() - t0))))
    return load1()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarize(slices: list[dict]) -> dict:
    times = [t for s in slices for t in s["times"]]
    wall = sum(s["wall"] for s in slices)
    others = sum(max(0.0, s["cpu_machine"] - s["cpu_self"]) for s in slices)
    slice_medians = [statistics.median(s["times"]) for s in slices if s["times"]]
    return {"n": len(times), "median_ms": pct(times, 0.5) * 1e3, "p10_ms": pct(times, 0.1) * 1e3,
            "p90_ms": pct(times, 0.9) * 1e3, "min_ms": min(times) * 1e3 if times else float("nan"),
            "slice_medians_ms": [m * 1e3 for m in slice_medians],
            "self_cpus": sum(s["cpu_self"] for s in slices) / wall if wall else float("nan"),
            "others_cpus": others / wall if wall else float("nan")}


def machine() -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            if k.strip() in ("Model name", "CPU(s)", "Thread(s) per core", "Core(s) per socket", "L2 cache",
                             "L3 cache", "Hypervisor vendor"):
                info[k.strip()] = v.strip()
        info["avx512f"] = " avx512f " in out
    except OSError:
        pass
    return info


def fresh(cfg_python: str, system: str, env: dict, ops: list[tuple[str, dict]],
          timeout: float | None = None) -> list[dict]:
    """Run ``ops`` in a fresh worker process (for cold/cached bind times, load times, memory);
    ``timeout``: seconds per op (WorkerTimeout, the process group killed)."""
    c = Config("fresh", system, env, python=cfg_python)
    c.start()
    try:
        return [c.ask(op, timeout=timeout, **kw) for op, kw in ops]
    finally:
        c.stop()


# --------------------------------------------------------------------------- phases
def cross_check(cfgs: list[Config], net_names: list[str]) -> dict:
    """Max |softmax difference| and worst relative gradient-norm difference vs aotexec."""
    import math
    ref_cfg = next((c for c in cfgs if c.label == "aotexec"), None)
    if ref_cfg is None:
        return {}
    out = {}
    for net in net_names:
        try:
            ref = ref_cfg.ask("check", net=net)
        except WorkerError as e:
            log(f"cross-check of {net} impossible: {e.first_line}")
            continue
        for c in cfgs:
            if c is ref_cfg:
                continue
            try:
                other = c.ask("check", net=net)
            except WorkerError as e:
                out[f"{net}/{c.label}"] = {"error": e.first_line}
                continue
            d_out = max(abs(a - b) for a, b in zip(ref["out"], other["out"]))
            d_grad = max((abs(ref["grad_norms"][k] - v) / max(1e-12, abs(ref["grad_norms"][k]))
                          for k, v in other["grad_norms"].items() if k in ref["grad_norms"]), default=math.nan)
            out[f"{net}/{c.label}"] = {"max_abs_out_diff": d_out, "max_rel_grad_norm_diff": d_grad}
            if d_out > 1e-3 or d_grad > 1e-2:
                log(f"WARNING: {c.label} disagrees with aotexec on {net}: out diff {d_out:.2e}, "
                    f"grad norm rel diff {d_grad:.2e}")
    return out


def timing(cfgs: list[Config], tasks: list[tuple[str, str]], args, errors: dict) -> dict:
    """Interleaved rounds over ``tasks`` ((net, mode) pairs); a slice that fails marks its
    configuration's row in ``errors`` and the rest goes on."""
    slices: dict[str, list[dict]] = {}
    for r in range(args.rounds):
        if args.idle_between_rounds and load1() >= args.idle:
            wait_idle(args.idle, args.idle_between_rounds)
        for ti, (net, mode) in enumerate(tasks):
            runnable = [c for c in cfgs if mode in c.modes and f"{net}/{mode}/{c.label}" not in errors
                        and c.alive()]
            if not runnable:
                continue
            k = (r + ti) % len(runnable)
            for c in runnable[k:] + runnable[:k]:  # rotate who goes first
                try:
                    res = c.ask("run", net=net, mode=mode, seconds=args.seconds,
                                min_iters=args.min_iters, max_iters=args.max_iters)
                except WorkerError as e:
                    errors[f"{net}/{mode}/{c.label}"] = e.first_line
                    log(f"FAILED timing {net}/{mode}/{c.label}: {e.first_line}")
                    continue
                slices.setdefault(f"{net}/{mode}/{c.label}", []).append(res)
        log(f"round {r + 1}/{args.rounds} done (load {load1():.2f})")
    return {k: summarize(v) for k, v in slices.items()}


def compile_and_load(net_names: list[str], args) -> dict:
    """Bind (+ compile) times cold and cached, artifact compile/load, memory: fresh processes."""
    py = sys.executable
    out: dict = {}
    cold_env = {"AOTEXEC_CACHE": "0"}
    for net in net_names:
        for mode in MODES:
            key = f"{net}/{mode}"
            rec = {}
            try:
                if not args.no_cold:
                    rec["cold"] = fresh(py, "aotexec", cold_env, [("bind_time", {"net": net, "mode": mode})])[0]
                if args.no_timing:  # else the timing workers have filled the disk cache already
                    fresh(py, "aotexec", {}, [("bind_time", {"net": net, "mode": mode})])
                cached, mem = fresh(py, "aotexec", {}, [("bind_time", {"net": net, "mode": mode}),
                                                       ("memory", {"net": net, "mode": mode})])
            except WorkerError as e:
                out[key] = {"error": e.first_line}
                log(f"bind/compile {key} FAILED: {e.first_line}")
                continue
            rec["cached"], rec["memory"] = cached, mem
            out[key] = rec
            log(f"bind/compile {key}: " + ", ".join(f"{k} {v['bind_s'] + v['first_s']:.2f} s"
                                                       for k, v in rec.items() if k in ("cold", "cached")))
        with tempfile.TemporaryDirectory(prefix="aotexec-bench-") as tmp:
            path = str(Path(tmp) / net)
            comp = fresh(py, "aotexec", {}, [("compile_artifact", {"net": net, "out": path})])[0]
            load = fresh(py, "aotexec", {}, [("artifact_load", {"path": path})])[0]
            out[f"{net}/artifact"] = {"compile": comp, "load": load}
            log(f"artifact {net}: compile {comp['compile_s']:.2f} s, load+bind+forward {load['total_s'] * 1e3:.1f} ms")
    return out


def peer_bind_times(cfgs: list[Config], net_names: list[str]) -> dict:
    out = {}
    mx = next((c for c in cfgs if c.label == "mxnet"), None)
    if mx is None:
        return out
    for net in net_names:
        for mode in MODES:
            try:
                r = fresh(mx.python, "mxnet", mx.env, [("bind_time", {"net": net, "mode": mode}),
                                                       ("memory", {"net": net, "mode": mode})])
            except WorkerError as e:
                out[f"{net}/{mode}"] = {"error": e.first_line}
                continue
            out[f"{net}/{mode}"] = {"bind": r[0], "memory": r[1]}
    return out


# --------------------------------------------------------------------------- reporting
PEER_FAMILIES = {"mxnet": lambda lab: lab.startswith("mxnet"), "torch": lambda lab: lab == "torch"}


def headline(results: dict, net_names: list[str]) -> list[dict]:
    rows = []
    t = results["timing"]
    for net in net_names:
        for mode in MODES:
            def get(label, m=mode):
                return t.get(f"{net}/{m}/{label}")
            a = get("aotexec")
            row = {"net": net, "mode": mode, "aotexec": a}
            labels = sorted({k.split("/", 2)[2] for k in t if k.startswith(f"{net}/{mode}/")})
            for fam, pred in PEER_FAMILIES.items():
                cands = [(get(lab)["median_ms"], lab) for lab in labels if pred(lab)]
                if cands:
                    ms, lab = min(cands)
                    row[fam] = {**get(lab), "config": lab}
            peers = [(row[f]["median_ms"], row[f]["config"]) for f in PEER_FAMILIES if f in row]
            if peers:
                row["best_peer"] = min(peers)
            if a and peers:
                row["speedup"] = row["best_peer"][0] / a["median_ms"]
            best_a = [(get(lab, m)["median_ms"], f"{lab}" + (" fused" if m == "train_fused" else ""))
                      for lab in ("aotexec", "aotexec local-sync")
                      for m in ((mode,) if mode == "infer" else ("train", "train_fused")) if get(lab, m)]
            if best_a:
                row["best_aotexec"] = min(best_a)
                if peers:
                    row["best_speedup"] = row["best_peer"][0] / row["best_aotexec"][0]
            rows.append(row)
    return rows


def fmt_ms(s: dict | None) -> str:
    if not s:
        return "–"
    return f"{s['median_ms']:.3g} ({s['p10_ms']:.3g}–{s['p90_ms']:.3g})"


def markdown(results: dict, net_names: list[str]) -> str:
    rows = headline(results, net_names)
    m = results["machine"]
    L = [f"Run {results['started']} on {m.get('Model name', '?')}, {m.get('CPU(s)', m['cpus'])} CPUs; "
         f"load average {results['load_start']:.2f} at the start, {results['load_end']:.2f} at the end; "
         f"{results['args']['rounds']} rounds x {results['args']['seconds']} s per system and case.",
         "Times in ms per step: median (p10–p90). Speedup = best peer median / aotexec median "
         f"(goal: >= {GOAL}x).", "",
         "| net | step | aotexec | MXNet 1.9.1 (best config) | PyTorch 2.13 eager | best peer | speedup | goal |",
         "|---|---|---|---|---|---|---|---|"]
    errors = results.get("errors", {})
    for r in rows:
        mx, sp = r.get("mxnet"), r.get("speedup")
        err = errors.get(f"{r['net']}/{r['mode']}/aotexec")
        a = fmt_ms(r["aotexec"]) if r["aotexec"] else ("failed (see below)" if err else "–")
        mx_s = f"{fmt_ms(mx)} [{mx['config']}]" if mx else "–"
        peer = f"{r['best_peer'][0]:.3g} ({r['best_peer'][1]})" if "best_peer" in r else "–"
        goal = "–" if sp is None else ("met" if sp >= GOAL else "missed")
        L.append(f"| {nets.TITLES[r['net']]} | {r['mode']} | {a} | {mx_s} | {fmt_ms(r.get('torch'))} | {peer} | "
                 f"{'–' if sp is None else f'{sp:.2f}x'} | {goal} |")
    if errors:
        L += ["", "Failures (configuration: first line of the error):", ""]
        L += [f"- `{k}`: {v}" for k, v in errors.items()]
    L += ["", "Best aotexec configuration per row (local-sync driver, fused `forward_backward()`):", "",
          "| net | step | best aotexec | ms | speedup vs best peer |", "|---|---|---|---|---|"]
    for r in rows:
        if "best_aotexec" in r:
            ms, lab = r["best_aotexec"]
            sp = r.get("best_speedup")
            L.append(f"| {nets.TITLES[r['net']]} | {r['mode']} | {lab} | {ms:.3g} | "
                     f"{'–' if sp is None else f'{sp:.2f}x'} |")
    L += ["", "All configurations (median ms; in brackets: CPUs used by other processes during the timed loops):",
          ""]
    labels = []
    for k in results["timing"]:
        lab = k.split("/", 2)[2]
        if lab not in labels:
            labels.append(lab)
    L.append("| net | step | " + " | ".join(labels) + " |")
    L.append("|---|---|" + "---|" * len(labels))
    for net in net_names:
        for mode in ("infer", "train", "train_fused"):
            cells = []
            for lab in labels:
                s = results["timing"].get(f"{net}/{mode}/{lab}")
                cells.append("–" if not s else f"{s['median_ms']:.3g} [{s['others_cpus']:.2f}]")
            if any(c != "–" for c in cells):
                L.append(f"| {nets.TITLES[net]} | {mode} | " + " | ".join(cells) + " |")
    cl = results.get("compile")
    if cl:
        L += ["", "Bind + first step (compile included) in fresh processes, seconds; artifact: `ax.compile` "
              "and, in a fresh process, `ax.load` + `simple_bind` + first forward; memory: aotexec's plan "
              "(`Total N MB allocated` of `debug_str()`, whole MB) and the IREE device allocator's peak "
              "(whole process: parameters, gradients, outputs, transients); MXNet's `debug_str()` total for comparison.",
              "", "| net | step | cold compile (AOTEXEC_CACHE=0) | cached | MXNet simple_bind + first | "
              "plan MB | allocator peak MB | MXNet plan MB |", "|---|---|---|---|---|---|---|---|"]
        pb = results.get("peer_bind", {})
        for net in net_names:
            for mode in MODES:
                rec = cl.get(f"{net}/{mode}")
                if not rec:
                    continue
                if "error" in rec:
                    L.append(f"| {nets.TITLES[net]} | {mode} | failed: {rec['error'][:120]} | | | | | |")
                    continue
                cold = rec.get("cold")
                cached = rec["cached"]
                mem = rec["memory"]
                peak = mem.get("allocator", {}).get("device_bytes_peak")
                p = pb.get(f"{net}/{mode}")
                p = None if p is None or "error" in p else p
                cold_s = "–" if not cold else f"{cold['bind_s'] + cold['first_s']:.2f}"
                mx_s = "–" if not p else f"{p['bind']['bind_s'] + p['bind']['first_s']:.3f}"
                peak_s = "–" if peak is None else f"{peak / 2**20:.2f}"
                mxp = None if not p else p["memory"].get("plan_bytes")
                mxp_s = "–" if mxp is None else f"{mxp / 2**20:.0f}"
                L.append(f"| {nets.TITLES[net]} | {mode} | {cold_s} | {cached['bind_s'] + cached['first_s']:.3f} | "
                         f"{mx_s} | {(mem.get('plan_bytes') or 0) / 2**20:.0f} | {peak_s} | {mxp_s} |")
        L += ["", "| net | artifact compile (`ax.compile`, compile cache warm), s | load, ms | simple_bind, ms | first forward, ms | total, ms |",
              "|---|---|---|---|---|---|"]
        for net in net_names:
            a = cl.get(f"{net}/artifact")
            if a:
                ld = a["load"]
                L.append(f"| {nets.TITLES[net]} | {a['compile']['compile_s']:.2f} | {ld['load_s'] * 1e3:.1f} | "
                         f"{ld['bind_s'] * 1e3:.1f} | {ld['first_forward_s'] * 1e3:.1f} | {ld['total_s'] * 1e3:.1f} |")
    xc = results.get("cross_check")
    if xc:
        ok = [v for v in xc.values() if "error" not in v]
        worst_o = max((v["max_abs_out_diff"] for v in ok), default=float("nan"))
        worst_g = max((v["max_rel_grad_norm_diff"] for v in ok), default=float("nan"))
        L += ["", f"Cross-check against aotexec (same inputs and parameters): max |softmax difference| "
              f"{worst_o:.1e}, max relative difference of a parameter-gradient norm {worst_g:.1e}."]
    L += ["", "Versions: " + "; ".join(f"{k}: {v}" for k, v in results["versions"].items())]
    return "\n".join(L) + "\n"


BEGIN, END = "<!-- bench:begin (written by benchmarks/run.py) -->", "<!-- bench:end -->"


def write_markdown(path: Path, body: str) -> None:
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text = text.rstrip() + f"\n\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    path.write_text(head + BEGIN + "\n" + body + END + tail)


def plot(results: dict, net_names: list[str], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed (pip install 'aotexec[benchmark]'); no plot")
        return False
    t = results["timing"]
    rows = headline(results, net_names)
    fig, axes = plt.subplots(2, len(net_names), figsize=(4.2 * len(net_names), 7), squeeze=False)
    colors = {"aotexec": "#1f77b4", "aotexec local-sync": "#6baed6", "aotexec fused": "#08519c",
              "MXNet (best)": "#d62728", "PyTorch": "#ff7f0e"}
    for j, net in enumerate(net_names):
        for i, mode in enumerate(MODES):
            ax = axes[i][j]
            r = next(x for x in rows if x["net"] == net and x["mode"] == mode)
            bars = [("aotexec", t.get(f"{net}/{mode}/aotexec")),
                    ("aotexec local-sync", t.get(f"{net}/{mode}/aotexec local-sync"))]
            if mode == "train":
                bars.append(("aotexec fused", t.get(f"{net}/train_fused/aotexec")))
            bars += [("MXNet (best)", r.get("mxnet")), ("PyTorch", r.get("torch"))]
            bars = [(n, s) for n, s in bars if s]
            xs = range(len(bars))
            med = [s["median_ms"] for _, s in bars]
            err = [[s["median_ms"] - s["p10_ms"] for _, s in bars], [s["p90_ms"] - s["median_ms"] for _, s in bars]]
            ax.bar(xs, med, yerr=err, capsize=3, color=[colors[n] for n, _ in bars])
            for x, v in zip(xs, med):
                ax.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
            ax.set_xticks(list(xs))
            ax.set_xticklabels([n.replace(" ", "\n", 1) for n, _ in bars], fontsize=7)
            ax.set_title(f"{nets.TITLES[net]} — {'inference' if mode == 'infer' else 'training step'}", fontsize=10)
            ax.set_ylabel("ms per step (median, p10–p90)", fontsize=8)
    fig.suptitle(f"aotexec vs MXNet 1.9.1 vs PyTorch 2.13 eager — {results['machine'].get('Model name', '')}, "
                 f"{results['machine'].get('CPU(s)', '')} CPUs ({results['started']})", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    global VERBOSE
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zoo", action="store_true",
                   help="the Gluon model-zoo benchmark (benchmarks/zoo_run.py): zoo nets + the classic three, "
                        "aotexec / MXNet / PyTorch / ONNX Runtime, compile times and MLIR sizes")
    p.add_argument("--systems", default=None,
                   help="comma list of aotexec, mxnet, torch (--zoo: also onnxruntime; default all)")
    p.add_argument("--configs", default=None,
                   help="comma list of configuration labels to keep (e.g. 'aotexec,mxnet omp2,torch')")
    p.add_argument("--no-foreign", action="store_true", help="aotexec only: no MXNet/PyTorch, no virtualenvs")
    p.add_argument("--nets", default=None,
                   help=f"comma list of {', '.join(nets.NETS)} (--zoo: also zoo models; default all)")
    p.add_argument("--rounds", type=int, default=None, help="default 10 (--zoo: 5)")
    p.add_argument("--seconds", type=float, default=None,
                   help="time per system per case per round (default 0.3; --zoo: 1.0)")
    p.add_argument("--min-iters", type=int, default=None, help="steps per slice at least (default 3; --zoo: 2)")
    p.add_argument("--max-iters", type=int, default=100000)
    p.add_argument("--warmup", type=int, default=None, help="warm-up steps (default 20; --zoo: 3)")
    p.add_argument("--quick", action="store_true",
                   help="3 rounds of 0.15 s, no cold compiles (--zoo: 2 rounds of 0.3 s, cold compiles kept)")
    p.add_argument("--compile-timeout", type=float, default=300,
                   help="--zoo: seconds one aotexec bind + first step (compile) may take; a row past it "
                        "is reported as timed out")
    p.add_argument("--idle", type=float, default=1.0, help="wait for the 1-min load average to drop below this")
    p.add_argument("--wait", type=float, default=300, help="seconds to wait for an idle machine before starting")
    p.add_argument("--idle-between-rounds", type=float, default=0,
                   help="also wait up to this many seconds before each round")
    p.add_argument("--no-timing", action="store_true")
    p.add_argument("--no-compile", action="store_true", help="skip bind/compile, artifact and memory measurements")
    p.add_argument("--no-cold", action="store_true", help="skip cold (AOTEXEC_CACHE=0) compiles")
    p.add_argument("--no-check", action="store_true", help="skip the cross-check of outputs and gradients")
    p.add_argument("--mxnet-python", help="use this interpreter for MXNet (else .bench-venvs/mxnet, created)")
    p.add_argument("--torch-python", help="use this interpreter for PyTorch (else .bench-venvs/torch, created)")
    p.add_argument("--results", default=None, help="default benchmarks/results/latest.json (--zoo: zoo-latest.json)")
    p.add_argument("--markdown", default=str(ROOT / "docs" / "BENCHMARKS.md"))
    p.add_argument("--plot", default=None, help="default docs/benchmarks.png (--zoo: docs/benchmarks-zoo.png)")
    p.add_argument("--no-docs", action="store_true", help="write only the results JSON")
    p.add_argument("--report-only", action="store_true",
                   help="measure nothing: rewrite the tables and plot from --results")
    p.add_argument("-v", "--verbose", action="store_true", help="show the workers' stderr")
    args = p.parse_args(argv)
    VERBOSE = args.verbose
    if args.zoo:
        import zoo_run
        return zoo_run.main(args, p)
    classic = {"systems": "aotexec,mxnet,torch", "nets": ",".join(nets.BENCH_NETS), "rounds": 10, "seconds": 0.3,
               "min_iters": 3, "warmup": 20, "results": str(HERE / "results" / "latest.json"),
               "plot": str(ROOT / "docs" / "benchmarks.png")}
    for k, v in classic.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.report_only:
        results = json.loads(Path(args.results).read_text())
        names = [n for n in nets.NETS if any(k.startswith(n + "/") for k in results.get("timing", {}))]
        body = markdown(results, names)
        print(body)
        if not args.no_docs:
            write_markdown(Path(args.markdown), body)
            plot(results, names, Path(args.plot))
        return 0
    if args.quick:
        args.rounds, args.seconds, args.no_cold, args.warmup = 3, 0.15, True, 5
    systems = ["aotexec"] if args.no_foreign else [s.strip() for s in args.systems.split(",") if s.strip()]
    net_names = [n.strip() for n in args.nets.split(",") if n.strip()]
    for n in net_names:
        if n not in nets.NETS:
            p.error(f"unknown net {n!r}")

    mx_py = torch_py = None
    if "mxnet" in systems:
        mx_py = args.mxnet_python or str(venvs.ensure("mxnet", log))
    if "torch" in systems:
        torch_py = args.torch_python or str(venvs.ensure("torch", log))

    load_start = wait_idle(args.idle, args.wait)
    results: dict = {"started": _dt.datetime.now().strftime("%Y-%m-%d %H:%M"), "machine": machine(),
                     "load_start": load_start, "args": vars(args), "goal": GOAL}
    cfgs = configs_for(systems, mx_py, torch_py, split_list(args.configs))
    try:
        for c in cfgs:
            c.start()
            log(f"worker {c.label}: {c.info['version']} (threads {c.info['threads']})")
        results["versions"] = {}
        for c in cfgs:
            results["versions"].setdefault(c.system, c.info["version"])
            results["versions"][f"threads ({c.label})"] = c.info["threads"]
        setup, errors = {}, {}
        for net in net_names:
            for c in cfgs:
                for mode in c.modes:
                    key = f"{net}/{mode}/{c.label}"
                    try:
                        setup[key] = c.ask("setup", net=net, mode=mode, warmup=args.warmup)
                    except WorkerError as e:  # e.g. a compile failure: record it, time the rest
                        errors[key] = e.first_line
                        log(f"FAILED {key}: {e.first_line}")
            log(f"set up {net} on {len(cfgs)} configurations")
        results["setup"], results["errors"] = setup, errors
        if not args.no_check:
            results["cross_check"] = cross_check(cfgs, net_names)
        if not args.no_timing:
            tasks = [(n, m) for n in net_names for m in ("infer", "train", "train_fused")]
            results["timing"] = timing(cfgs, tasks, args, results["errors"])
    finally:
        for c in cfgs:
            c.stop()
    if not args.no_compile and "aotexec" in systems:
        results["compile"] = compile_and_load(net_names, args)
        results["peer_bind"] = peer_bind_times(cfgs, net_names)
    results["load_end"] = load1()
    res_path = Path(args.results)
    res_path.parent.mkdir(parents=True, exist_ok=True)
    res_path.write_text(json.dumps(results, indent=1, default=str))
    log(f"wrote {res_path}")
    if "timing" in results:
        body = markdown(results, net_names)
        print(body)
        if not args.no_docs:
            write_markdown(Path(args.markdown), body)
            if plot(results, net_names, Path(args.plot)):
                log(f"wrote {args.markdown} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
