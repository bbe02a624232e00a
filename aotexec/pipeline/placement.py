"""Model parallelism (group2ctx): the full graph cut into runs of consecutive nodes on one
context, each compiled as a function of that context's module."""
from __future__ import annotations

from dataclasses import dataclass

from ..graph import Entry, IndexedGraph
from .kernel_build import kernels_for
from ..lowering.module import lower_function, module_text, uses_rng
from ..ops.registry import reads_value
from ..options import Options
from ..passes.infer import Typing
from ..signature import EntryPoint, ProgramSpec
from .entry_points import RNG, values
from .program import check_target_dtypes, compile_with_fallback, options_for, reductions_for
@dataclass
class Segment:
    """A run of consecutive nodes on one context, compiled as one function ``name``."""
    name: str
    ctx: object
    nodes: list
    inputs: list[Entry]
    outputs: list[Entry]
    backward: bool


def node_contexts(g: IndexedGraph, forward_ids: set[int], group2ctx: dict, default) -> dict[int, object]:
    """MXNet's placement: ``__ctx_group__`` picks the context of a forward node; a backward
    node runs where its forward node runs; helper nodes follow their first computed input."""
    place: dict[int, object] = {}
    for n in g.nodes:
        if n.op is None:
            continue
        if id(n) in forward_ids or "__ctx_group__" in n.attrs:   # forward nodes and their mirrors
            place[id(n)] = group2ctx.get(n.attrs.get("__ctx_group__"), default)
        elif n.control_deps:
            place[id(n)] = place[id(n.control_deps[0])]
        else:
            src = next((e.node for e in n.inputs if e.node.op is not None), None)
            place[id(n)] = place.get(id(src), default) if src is not None else default
    return place


def segment_plan(g: IndexedGraph, place: dict[int, object], forward_ids: set[int], heads: list[Entry]) -> list[Segment]:
    segments: list[Segment] = []
    for n in g.nodes:
        if n.op is None:
            continue
        bwd = id(n) not in forward_ids
        if segments and segments[-1].ctx == place[id(n)] and segments[-1].backward == bwd:
            segments[-1].nodes.append(n)
        else:
            segments.append(Segment(f"seg{len(segments)}", place[id(n)], [n], [], [], bwd))
    where = {id(n): k for k, s in enumerate(segments) for n in s.nodes}
    wanted = {(id(h.node), h.index) for h in heads}
    for k, seg in enumerate(segments):
        seen = set()
        for n in seg.nodes:
            for pos, e in enumerate(n.inputs):
                key = (id(e.node), e.index)
                if not reads_value(n, pos) or key in seen or where.get(id(e.node)) == k:
                    continue
                seen.add(key)
                seg.inputs.append(e)
    read_later: set[tuple[int, int]] = set(wanted)
    for seg in segments:
        read_later |= {(id(e.node), e.index) for e in seg.inputs}
    for seg in segments:
        seg.outputs = [Entry(n, i) for n in seg.nodes for i in range(n.num_outputs)
                       if (id(n), i) in read_later]
    return segments


def compile_segments(segments: list[Segment], typing: Typing, is_train: bool, options: Options,
                     cpu: str = "host") -> dict:
    """One vmfb per context holding its segments' functions: {ctx: (vmfb, spec)}."""
    by_ctx: dict = {}
    for seg in segments:
        by_ctx.setdefault(seg.ctx, []).append(seg)
    out = {}
    for ctx, segs in by_ctx.items():
        opts = options_for(ctx, cpu=cpu, options=options)
        spec = ProgramSpec()
        for seg in segs:
            rng = [RNG] if uses_rng(typing, seg.outputs, seg.inputs, is_train) else []
            spec.entries[seg.name] = EntryPoint(seg.name, tuple(values(typing, seg.inputs) + rng),
                                                tuple(values(typing, seg.outputs)))

        kernels = kernels_for(opts, options or Options(), typing.graph)

        def build(reductions: str, segs=segs, spec=spec, target=opts.target, fenced_pointwise: bool = False,
                  kernels=kernels):
            return module_text([lower_function(seg.name, typing, seg.inputs, seg.outputs, is_train=is_train,
                                               reductions=reductions, target=target,
                                               fenced_pointwise=fenced_pointwise, kernels=kernels)
                                for seg in segs], kernels), spec
        check_target_dtypes(typing, opts.target)
        out[ctx] = compile_with_fallback(build, reductions_for(opts), opts, options)
    return out
