"""Memory numbers for docs/MEMORY.md: the memory plan's bytes (debug_str's ``Total N MB``)
against MXNet 1.9.1's figure, and the activations training saves with/without mirroring.

    python benchmarks/memory_report.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import aotexec as ax  # noqa: E402
from aotexec import build  # noqa: E402
from aotexec.debug_str import full_graph  # noqa: E402
from aotexec.graph import IndexedGraph  # noqa: E402
from aotexec.passes.infer import infer  # noqa: E402
from aotexec.passes.plan_memory import entry_bytes, plan_memory  # noqa: E402
from aotexec.runtime.executor import bind_typing  # noqa: E402
from nets import NETS, symbol  # noqa: E402

# MXNet 1.9.1's "Total N MB allocated" for the same nets and shapes, training (issue 5)
MXNET_MB = {"lenet": 12, "resnet8": 11}


def report(name: str) -> dict:
    sym = symbol(ax.sym, name)
    data, label = NETS[name]
    t = bind_typing(sym, {"data": data, "softmax_label": label}, {})
    reqs = {n: ("null" if n in ("data", "softmax_label") else "write") for n in sym.list_arguments()}
    wrt = [n for n, r in reqs.items() if r != "null"]
    _, heads = full_graph(sym, wrt)
    g = IndexedGraph(heads)
    full = infer(g, {n.name: t.node_shape(n) for n in t.graph.variables()},
                 {n.name: t.node_dtype(n) for n in t.graph.variables()})
    plan = plan_memory(full)
    naive = sum(entry_bytes(full, g.row_ptr[g.nid(n)] + i) for n in g.nodes if n.op is not None
                for i in range(n.num_outputs))
    return {"net": name, "plan_bytes": plan.total_bytes, "no_reuse_bytes": naive,
            "saved": build.saved_activation_bytes(sym, t, reqs, False),
            "saved_mirror": build.saved_activation_bytes(sym, t, reqs, True)}


def main() -> None:
    print("| net (training, parameter grads) | aotexec plan | without reuse | MXNet 1.9.1 | ratio | "
          "saved activations | with mirroring |")
    print("|---|---|---|---|---|---|---|")
    for name in ("mlp", "lenet", "resnet8"):
        r = report(name)
        mx = MXNET_MB.get(name)
        ratio = f"{r['plan_bytes'] / (mx << 20):.2f}x" if mx else "-"
        print(f"| {name} | {r['plan_bytes'] / 2**20:.2f} MB | {r['no_reuse_bytes'] / 2**20:.2f} MB | "
              f"{f'{mx} MB' if mx else '-'} | {ratio} | {r['saved'] / 2**20:.2f} MB | "
              f"{r['saved_mirror'] / 2**20:.2f} MB |")


if __name__ == "__main__":
    main()
