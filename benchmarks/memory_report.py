"""Memory numbers for docs/MEMORY.md: the memory plan's bytes (debug_str's ``Total N MB``)
and what a training executor really holds, against MXNet 1.9.1's figure for the same net
and shapes, measured in the same run (MXNet in its own venv, ``venvs.py``).

    python benchmarks/memory_report.py          # compiles the three nets (about a minute)

Two tables: the benchmark nets (plan and runtime), and the nets whose plan is under 1 MB
(the golden nets of ``tests/data/golden`` and the benchmark MLP; plan only). MXNet prints
whole MB, so the second table also gives both figures with the batch scaled (same graph,
every batch-sized entry larger) until aotexec plans ``SCALED_MB`` at least, where whole
MB resolve the ratio to a few percent.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import aotexec as ax  # noqa: E402
import venvs  # noqa: E402
from aotexec import pipeline  # noqa: E402
from aotexec.debug_str import full_graph  # noqa: E402
from aotexec.passes.plan_memory import plan_memory  # noqa: E402
from aotexec.runtime.executor import bind_typing  # noqa: E402
from nets import NETS, inputs_and_params, shapes_of, symbol  # noqa: E402

MB = 2 ** 20
GOLDEN = HERE.parent / "tests" / "data" / "golden"
GOLDEN_NETS = ("net_mlp_train", "net_lenet_train", "net_resblock_train", "net_shared_weights_train")
SCALED_MB = 32

# runs in MXNet's venv: one "Total N MB allocated" per job
_MXNET_PLAN = r"""
import json, re, sys
import mxnet as mx
out = []
for job in json.load(sys.stdin):
    s = mx.sym.load_json(job["symbol"])
    ex = s.simple_bind(mx.cpu(), grad_req=job["grad_req"], **{k: tuple(v) for k, v in job["shapes"].items()})
    out.append(int(re.search(r"Total (\d+) MB allocated", ex.debug_str()).group(1)))
print(json.dumps(out))
"""


def mxnet_plan_mb(jobs: list[dict]) -> list[int]:
    """MXNet 1.9.1's whole-MB plan for each job ({symbol, shapes, grad_req}), one process."""
    r = subprocess.run([str(venvs.ensure("mxnet")), "-c", _MXNET_PLAN], input=json.dumps(jobs),
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"MXNet failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def plan_bytes(sym, shapes: dict, reqs: dict, mirror: str) -> int:
    t = bind_typing(sym, shapes, {})
    wrt = [n for n, r in reqs.items() if r != "null"]
    return plan_memory(full_graph(sym, t, wrt, mirror)[1]).total_bytes


def benchmark_net(name: str) -> dict:
    sym = symbol(ax.sym, name)
    data, label = NETS[name]
    shapes = {"data": data, "softmax_label": label}
    reqs = {n: ("null" if n in shapes else "write") for n in sym.list_arguments()}
    t = bind_typing(sym, shapes, {})
    plans = {p: plan_bytes(sym, shapes, reqs, p) for p in ("auto", "none", "dots")}
    saved = {p: pipeline.saved_activation_bytes(sym, t, reqs, p) for p in ("none", "mxnet", "dots")}
    # what the runtime holds after one training step
    runtime = {}
    for policy in ("auto", "none"):
        ex = sym.simple_bind(ax.cpu(), grad_req=reqs, mirror=policy, **shapes)
        x, y, params, aux = inputs_and_params(name, *shapes_of(sym, name))
        ex.copy_params_from(params, aux)
        ex.forward(is_train=True, data=x, softmax_label=y)
        ex.backward()
        runtime[policy] = ex.memory_usage()
    return {"plans": plans, "saved": saved, "runtime": runtime,
            "mxnet_job": {"symbol": sym.tojson(), "shapes": shapes, "grad_req": reqs}}


def small_net(name: str) -> dict:
    """A golden case (its shapes and grad_req) or the benchmark MLP, at its batch and scaled."""
    if name in NETS:
        sym = symbol(ax.sym, name)
        shapes = dict(zip(("data", "softmax_label"), NETS[name]))
        reqs = {n: ("null" if n in shapes else "write") for n in sym.list_arguments()}
    else:
        meta = json.loads((GOLDEN / name / "meta.json").read_text())
        sym = ax.sym.load_json((GOLDEN / name / "symbol.json").read_text())
        req = meta["grad_req"]
        reqs = {n: (req if isinstance(req, str) else req.get(n, "null")) for n in sym.list_arguments()}
        shapes = {n: tuple(v) for n, v in meta["shapes"].items() if n == "data" or n.endswith("label")}
    plain = plan_bytes(sym, shapes, reqs, "none")
    scale = 1 << max(0, math.ceil(math.log2(SCALED_MB * MB / plain)))
    scaled = {n: (v[0] * scale,) + tuple(v[1:]) for n, v in shapes.items()}
    return {"plans": {p: plan_bytes(sym, shapes, reqs, p) for p in ("auto", "none")}, "scale": scale,
            "scaled": {p: plan_bytes(sym, scaled, reqs, p) for p in ("auto", "none")},
            "mxnet_jobs": [{"symbol": sym.tojson(), "shapes": s, "grad_req": reqs} for s in (shapes, scaled)]}


def _ratio(b: int, mx_mb: int) -> str:
    return f" ({b / (mx_mb * MB):.2f}x)" if mx_mb else ""


def main() -> None:
    bench = {n: benchmark_net(n) for n in ("mlp", "lenet", "resnet8")}
    small = {c: small_net(c) for c in ("mlp",) + GOLDEN_NETS}
    jobs = [r["mxnet_job"] for r in bench.values()] + [j for r in small.values() for j in r["mxnet_jobs"]]
    mx = iter(mxnet_plan_mb(jobs))
    print("| net (training, parameter grads) | MXNet 1.9.1 plan | aotexec plan, default `auto` (ratio) | "
          "plan, `none` (ratio) | plan, `dots` (ratio) | runtime, default: saved activations + transient arena "
          "(ratio) | runtime, `none` (ratio) | saved activations: none / mxnet / dots |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in bench.items():
        m = next(mx)

        def vs(b: int) -> str:
            return f"{b / MB:.2f} MB{_ratio(b, m)}"

        def held(rt: dict) -> str:
            return (f"{rt['saved_activations'] / MB:.2f} + {rt['transient_arena'] / MB:.2f} = "
                    f"{vs(rt['saved_activations'] + rt['transient_arena'])}")
        saved = " / ".join(f"{r['saved'][p] / MB:.2f}" for p in ("none", "mxnet", "dots"))
        p = r["plans"]
        print(f"| {name} | {m} MB | {vs(p['auto'])} | {vs(p['none'])} | {vs(p['dots'])} | "
              f"{held(r['runtime']['auto'])} | {held(r['runtime']['none'])} | {saved} MB |")
    print()
    print("| net (training, its grad_req) | MXNet 1.9.1 plan | aotexec plan, `auto` / `none` | batch scaled by | "
          "scaled: MXNet 1.9.1 | scaled: aotexec `auto` (ratio) | scaled: `none` (ratio) |")
    print("|---|---|---|---|---|---|---|")
    for case, r in small.items():
        m, ms = next(mx), next(mx)
        p, s = r["plans"], r["scaled"]
        print(f"| {case} | {m} MB | {p['auto'] / 1024:.1f} / {p['none'] / 1024:.1f} KB | {r['scale']} | {ms} MB | "
              f"{s['auto'] / MB:.1f} MB{_ratio(s['auto'], ms)} | {s['none'] / MB:.1f} MB{_ratio(s['none'], ms)} |")


if __name__ == "__main__":
    main()
