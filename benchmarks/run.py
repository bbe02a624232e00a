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
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import (  # noqa: E402
    GOAL, HERE, MODES, ROOT, Config, WorkerError, configs_for, cross_check, fresh, load1, log, machine, split_list,
    start_workers, timing, wait_idle)
import harness  # noqa: E402
import nets  # noqa: E402
import venvs  # noqa: E402


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
    p.add_argument("--merge", metavar="JSON",
                   help="--zoo: measure nothing: the nets of JSON (a --no-docs run) replace theirs in --results, "
                        "then the tables and plot are rewritten from the merged results")
    p.add_argument("-v", "--verbose", action="store_true", help="show the workers' stderr")
    args = p.parse_args(argv)
    harness.VERBOSE = args.verbose
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
        start_workers(cfgs, results)
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
