"""Memory numbers for docs/MEMORY.md: the memory plan's bytes (debug_str's ``Total N MB``)
and what a training executor really holds, against MXNet 1.9.1's figure.

    python benchmarks/memory_report.py          # compiles the three nets (about a minute)
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import aotexec as ax  # noqa: E402
from aotexec import build  # noqa: E402
from aotexec.debug_str import full_graph  # noqa: E402
from aotexec.passes.plan_memory import plan_memory  # noqa: E402
from aotexec.runtime.executor import bind_typing  # noqa: E402
from nets import NETS, inputs_and_params, shapes_of, symbol  # noqa: E402

# MXNet 1.9.1's "Total N MB allocated" for the same nets and shapes, training (issue 5)
MXNET_MB = {"lenet": 12, "resnet8": 11}
MB = 2 ** 20


def report(name: str) -> dict:
    sym = symbol(ax.sym, name)
    data, label = NETS[name]
    t = bind_typing(sym, {"data": data, "softmax_label": label}, {})
    reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in sym.list_arguments()}
    wrt = [n for n, r in reqs.items() if r != "null"]
    plans = {p: plan_memory(full_graph(sym, t, wrt, p)[1]).total_bytes for p in ("none", "dots")}
    saved = {p: build.saved_activation_bytes(sym, t, reqs, p) for p in ("none", "mxnet", "dots")}
    # what the runtime holds after one training step
    runtime = {}
    for policy in ("none", "dots"):
        ex = sym.simple_bind(ax.cpu(), grad_req=reqs, data=data, softmax_label=label, mirror=policy)
        x, y, params, aux = inputs_and_params(name, *shapes_of(sym, name))
        ex.copy_params_from(params, aux)
        ex.forward(is_train=True, data=x, softmax_label=y)
        ex.backward()
        runtime[policy] = ex.memory_usage()
    return {"plans": plans, "saved": saved, "runtime": runtime}


def main() -> None:
    print("| net (training, parameter grads) | MXNet 1.9.1 plan | aotexec plan (ratio) | plan, `mirror='dots'` (ratio) | "
          "runtime: saved activations + transient arena (ratio) | runtime, `mirror='dots'` (ratio) | "
          "saved activations: none / mxnet / dots |")
    print("|---|---|---|---|---|---|---|")
    for name in ("mlp", "lenet", "resnet8"):
        r = report(name)
        mx = MXNET_MB.get(name)

        def vs(b: int) -> str:
            return f"{b / MB:.2f} MB" + (f" ({b / (mx * MB):.2f}x)" if mx else "")
        def held(rt: dict) -> str:
            return (f"{rt['saved_activations'] / MB:.2f} + {rt['transient_arena'] / MB:.2f} = "
                    f"{vs(rt['saved_activations'] + rt['transient_arena'])}")
        saved = " / ".join(f"{r['saved'][p] / MB:.2f}" for p in ("none", "mxnet", "dots"))
        print(f"| {name} | {f'{mx} MB' if mx else '-'} | {vs(r['plans']['none'])} | {vs(r['plans']['dots'])} | "
              f"{held(r['runtime']['none'])} | {held(r['runtime']['dots'])} | {saved} MB |")


if __name__ == "__main__":
    main()
