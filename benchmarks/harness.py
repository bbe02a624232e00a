"""The benchmark harness shared by run.py (the three benchmark nets) and zoo_run.py (the
Gluon model zoo): worker configurations, interleaved timing, statistics, cross-checks."""
from __future__ import annotations

import json
import os
import platform
import select
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

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


def start_workers(cfgs: list[Config], results: dict) -> None:
    """Start every configuration's worker and record its system version and thread count."""
    for c in cfgs:
        c.start()
        log(f"worker {c.label}: {c.info['version']} (threads {c.info['threads']})")
    results["versions"] = {}
    for c in cfgs:
        results["versions"].setdefault(c.system, c.info["version"])
        results["versions"][f"threads ({c.label})"] = c.info["threads"]
