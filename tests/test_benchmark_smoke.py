"""The benchmark harness must not rot: run it end to end on a tiny net, aotexec only.

No timing is asserted (CI does not time anything) and no virtualenv is created: the
MXNet/PyTorch workers are skipped with --no-foreign.  The report code is also fed a
synthetic result with peers, so the table/plot paths that need MXNet and PyTorch run too.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import run as bench_run  # noqa: E402


def test_harness_tiny_aotexec_only(tmp_path):
    md = tmp_path / "BENCH.md"
    md.write_text("# Benchmarks\n\nhand-written intro\n\n" + bench_run.BEGIN + "\nold\n" + bench_run.END + "\ntail\n")
    res = tmp_path / "r.json"
    rc = bench_run.main(["--no-foreign", "--nets", "tiny", "--rounds", "1", "--seconds", "0", "--min-iters", "1",
                         "--max-iters", "1", "--warmup", "0", "--wait", "0", "--results", str(res),
                         "--markdown", str(md), "--plot", str(tmp_path / "b.png")])
    assert rc == 0
    r = json.loads(res.read_text())
    assert not r["errors"]
    for mode in ("infer", "train", "train_fused"):
        assert r["timing"][f"tiny/{mode}/aotexec"]["n"] == 1
        assert r["timing"][f"tiny/{mode}/aotexec local-sync"]["n"] == 1
    c = r["compile"]
    assert c["tiny/infer"]["cold"]["first_s"] > 0 and c["tiny/train"]["cached"]["first_s"] > 0
    assert c["tiny/infer"]["memory"]["allocator"] is not None
    assert c["tiny/artifact"]["load"]["total_s"] > 0
    text = md.read_text()
    assert text.startswith("# Benchmarks\n\nhand-written intro") and text.endswith(bench_run.END + "\ntail\n")
    assert "| tiny b4 | infer |" in text and "\nold\n" not in text


def _fake(median):
    return {"n": 3, "median_ms": median, "p10_ms": median * 0.9, "p90_ms": median * 1.2, "min_ms": median * 0.8,
            "slice_medians_ms": [median], "self_cpus": 1.0, "others_cpus": 0.1}


def _results_with_peers() -> dict:
    timing = {}
    for mode, base in (("infer", 1.0), ("train", 3.0), ("train_fused", 2.5)):
        timing[f"mlp/{mode}/aotexec"] = _fake(base)
        timing[f"mlp/{mode}/aotexec local-sync"] = _fake(base * 0.9)
    for mode, base in (("infer", 1.8), ("train", 2.0)):
        timing[f"mlp/{mode}/mxnet"] = _fake(base)
        timing[f"mlp/{mode}/mxnet omp2"] = _fake(base * 0.8)
        timing[f"mlp/{mode}/torch"] = _fake(base * 1.1)
    return {"started": "now", "machine": {"Model name": "cpu", "CPU(s)": "2", "cpus": 2}, "load_start": 0.1,
            "load_end": 0.2, "args": {"rounds": 1, "seconds": 0.1}, "timing": timing, "errors": {},
            "versions": {"aotexec": "x"}}


def test_report_with_peers():
    results = _results_with_peers()
    rows = bench_run.headline(results, ["mlp"])
    infer = next(r for r in rows if r["mode"] == "infer")
    assert infer["best_peer"] == (pytest.approx(1.44), "mxnet omp2")
    assert infer["speedup"] == pytest.approx(1.44)
    train = next(r for r in rows if r["mode"] == "train")
    assert train["speedup"] == pytest.approx(1.6 / 3.0)
    text = bench_run.markdown(results, ["mlp"])
    assert "| MLP b64 | infer |" in text and "missed" in text


def test_plot(tmp_path):
    pytest.importorskip("matplotlib", reason="the chart needs aotexec[benchmark]")
    assert bench_run.plot(_results_with_peers(), ["mlp"], tmp_path / "p.png")
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_cli_bench(tmp_path):
    sym = ROOT / "examples" / "mlp-symbol.json"
    r = subprocess.run([sys.executable, "-m", "aotexec.cli", "bench", str(sym), "--shape", "data=2,784", "--iters", "2",
                        "--warmup", "0", "--json"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["infer"]["median_ms"] > 0 and len(out["infer"]["times_s"]) == 2
    bad = subprocess.run([sys.executable, "-m", "aotexec.cli", "bench", str(sym), "--shape", "nope=2,784"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "not inputs" in bad.stderr


def test_zoo_merge_replaces_the_rerun_nets_only():
    import zoo_run
    machine = {"Model name": "cpu A", "cpus": 2}

    def run(started, names, ms):
        return {"started": started, "machine": machine, "load_start": 0.5, "load_end": 0.6, "names": names,
                "rows": {n: [[f"{n}:1", "infer"]] for n in names},
                "timing": {f"{n}:1/infer/aotexec": {"median_ms": ms} for n in names},
                "compile": {f"{n}:1/infer": {"cold_s": ms} for n in names}, "cross_check": {n: {} for n in names}}

    base = run("2026-11-25 14:07", ["resnet18_v1", "resnet50_v1"], 10.0)
    out = zoo_run.merge(base, run("2026-11-27 07:30", ["resnet50_v1", "mobilenet1.0"], 5.0))
    assert out["names"] == ["resnet18_v1", "resnet50_v1", "mobilenet1.0"]
    assert out["timing"]["resnet18_v1:1/infer/aotexec"]["median_ms"] == 10.0
    assert out["timing"]["resnet50_v1:1/infer/aotexec"]["median_ms"] == 5.0
    assert out["compile"]["mobilenet1.0:1/infer"]["cold_s"] == 5.0
    assert [(r["started"], r["nets"]) for r in out["runs"]] == [("2026-11-25 14:07", ["resnet18_v1"]),
                                                              ("2026-11-27 07:30", ["resnet50_v1", "mobilenet1.0"])]
    assert "resnet18_v1: 2026-11-25 14:07 on cpu A" in zoo_run._merged_runs(out)[0]
    # a --no-compile run keeps the earlier compile rows of the nets it re-timed
    timed_only = run("2026-11-28 09:30", ["resnet18_v1"], 7.0)
    del timed_only["compile"]
    again = zoo_run.merge(out, timed_only)
    assert again["timing"]["resnet18_v1:1/infer/aotexec"]["median_ms"] == 7.0
    assert again["compile"]["resnet18_v1:1/infer"]["cold_s"] == 10.0
