"""Programs compiled on demand (through the caches) for executors bound from a symbol."""
from __future__ import annotations

from typing import Sequence

from ..debug_str import render
from ..graph import IndexedGraph
from ..options import Options
from ..passes.common_expr import eliminate_common_expr, has_common_expr
from ..passes.gradient import check_differentiable
from ..passes.infer import Typing
from ..runtime.context import Context
from ..runtime.program import Program, resident_wanted
from ..runtime.provider import Placement
from . import program as _program
from .entry_points import resident_parameters
from .placement import compile_segments, node_contexts, segment_plan
from .plan import training_plan


class CompileProvider:
    """``runtime.provider.ProgramProvider`` by compiling; ``options.mirror`` is the
    recomputation policy of ``passes.mirror``."""
    eager = False

    def __init__(self, options: Options, cpu: str = "host"):
        self.options = options
        self.cpu = cpu

    def executed_symbol(self, symbol):
        if not self.options.common_expr or not has_common_expr(symbol._outputs):
            return symbol
        clone = symbol.__deepcopy__(None)
        return type(symbol)(eliminate_common_expr(clone._outputs))

    def program(self, symbol, typing: Typing, modes: Sequence[str], ctx: Context, reqs: dict,
                monitor: str | None = None) -> Program:
        opts = _program.options_for(ctx, cpu=self.cpu, options=self.options)
        resident = resident_parameters(symbol, typing) \
            if monitor is None and resident_wanted(modes, reqs, opts.target, self.options.resident) else []
        # the traced build keeps MXNet's node sequence: no mirror nodes in the monitor's view
        vmfb, spec = _program.compile_program(symbol, typing, modes, opts, self.options, reqs=reqs,
                                              mirror="none" if monitor else self.options.mirror,
                                              monitor=monitor, resident=resident, shape_generic=True)
        return Program(ctx, vmfb, spec, traced=monitor is not None)

    def check_gradients(self, symbol, wrt: list[str]) -> None:
        check_differentiable(symbol._outputs, wrt)

    def debug_str(self, symbol, typing: Typing, wrt: list[str]) -> str:
        return render(symbol, typing, wrt, self.options.mirror)

    def placement(self, symbol, typing: Typing, reqs: dict, group2ctx: dict, ctx: Context,
                  train: bool) -> Placement:
        if train:
            tp = training_plan(symbol, typing, reqs, self.options.mirror)
            heads, full = tp.gg.heads, tp.typing
        else:
            heads, full = list(symbol._outputs), typing
        g = IndexedGraph(heads)
        forward_ids = {id(n) for n in typing.graph.nodes}
        segments = segment_plan(g, node_contexts(g, forward_ids, group2ctx, ctx), forward_ids, heads)
        programs = {c: Program(c, vmfb, spec) for c, (vmfb, spec) in
                    compile_segments(segments, full, train, self.options, cpu=self.cpu).items()}
        if not train:
            return Placement(segments, programs)
        return Placement(segments, programs, dict(tp.gg.head_grad_vars), dict(tp.gg.grad_heads),
                         dict(tp.gg.aux_updates))


def compile_provider(options: Options | None = None, cpu: str = "host") -> CompileProvider:
    return CompileProvider(options or Options.from_env(), cpu)
