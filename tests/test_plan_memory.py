"""The memory plan pass: offsets never overlap for entries alive at the same time, the arena
is at least the peak of live bytes, in-place outputs share their input's bytes."""
from __future__ import annotations

import pytest

import aotexec as ax
from aotexec.debug_str import full_graph
from aotexec.passes.plan_memory import lifetimes, plan_memory
from aotexec.runtime.executor import bind_typing
from golden import all_cases

NETS = [c for c in all_cases() if c.id in ("net_lenet_train", "net_resblock_train", "net_mlp_train")]


@pytest.mark.parametrize("policy", ["none", "dots"])
@pytest.mark.parametrize("case", NETS, ids=[c.id for c in NETS])
def test_plan_is_valid_and_tight(case, policy):
    s = ax.sym.load_json(case.symbol_json)
    t = bind_typing(s, {k: tuple(v) for k, v in case.meta["shapes"].items()}, {})
    wrt = [n for n in s.list_arguments() if case.meta["grad_req"].get(n, "write") != "null"] \
        if isinstance(case.meta["grad_req"], dict) else s.list_arguments()
    _, full = full_graph(s, t, wrt, policy)
    plan = plan_memory(full)
    span, group, inplace = lifetimes(full)
    roots = list(span)
    for i, a in enumerate(roots):
        for b in roots[i + 1:]:
            (sa, ea, za), (sb, eb, zb) = span[a], span[b]
            if ea < sb or eb < sa or not za or not zb:
                continue
            oa, ob = plan.offset[a], plan.offset[b]
            assert oa + za <= ob or ob + zb <= oa, (a, b)        # alive together: disjoint bytes
    steps = range(min(v[0] for v in span.values()), max(v[1] for v in span.values()) + 1)
    peak = max(sum(z for s_, e, z in span.values() if s_ <= k <= e) for k in steps)
    assert peak <= plan.total_bytes <= sum(z for _, _, z in span.values())
    for eid, src in inplace.items():
        assert plan.offset[eid] == plan.offset[src] and group[eid] == group[src]
    assert inplace, "the nets have elementwise ops that run in place"


def _replay_values(full, plan) -> None:
    """Run the plan in program order on value ids: every read must find, in the bytes its
    entry was given, the value that entry holds (an in-place write must not clobber a value
    still to be read; an entry sharing storage as the same value keeps its input's id)."""
    g = full.graph
    value: dict[int, int] = {}                 # entry -> the value it holds
    held: dict[int, int] = {}                  # group root -> the value its bytes hold now
    _, group, _ = lifetimes(full)
    for i, n in enumerate(g.nodes):
        if n.op is None:
            continue
        for e in n.inputs:
            eid = g.eid(e)
            if eid in group:
                assert held[group[eid]] == value[eid], f"{n.name} reads {e.name}, whose bytes were overwritten"
        for k in range(n.num_outputs):
            eid = g.row_ptr[i] + k
            src = g.eid(n.inputs[0]) if n.inputs else None
            value[eid] = value.get(src, src) if k in n.op.identity_outputs else eid
            if eid in group:
                held[group[eid]] = value[eid]


BENCH = {"lenet": ((8, 1, 28, 28), (8,)), "resnet8": ((2, 3, 32, 32), (2,)), "mlp": ((4, 784), (4,))}


@pytest.mark.parametrize("policy", ["none", "dots"])
@pytest.mark.parametrize("net", list(BENCH) + [c.id for c in NETS] + ["net_shared_weights_train"])
def test_plan_never_overwrites_a_value_still_read(net, policy):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    import nets
    if net in BENCH:
        s = nets.symbol(ax.sym, net)
        shapes = dict(zip(("data", "softmax_label"), BENCH[net]))
        wrt = [n for n in s.list_arguments() if n not in shapes]
    else:
        case = next(c for c in all_cases() if c.id == net)
        s = ax.sym.load_json(case.symbol_json)
        shapes = {k: tuple(v) for k, v in case.meta["shapes"].items()}
        req = case.meta["grad_req"]
        wrt = [n for n in s.list_arguments() if (req if isinstance(req, str) else req.get(n, "null")) != "null"]
    _, full = full_graph(s, bind_typing(s, shapes, {}), wrt, policy)
    plan = plan_memory(full)
    _replay_values(full, plan)
    assert plan.inplace
