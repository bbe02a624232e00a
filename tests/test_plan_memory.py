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
