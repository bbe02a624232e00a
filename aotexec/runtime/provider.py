"""What an executor needs from whoever supplies its compiled programs.

The runtime defines the interface; the compile side (``aotexec.pipeline.provider``, which
compiles on demand) and artifacts (``aotexec.artifact``, precompiled modules only)
implement it, so the runtime imports nothing from the compile side.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from ..passes.infer import Typing
from .context import Context
from .program import Program


@dataclass
class Placement:
    """A graph split over contexts (group2ctx): ``segments`` (each with ``name``, ``ctx``,
    ``inputs`` / ``outputs`` entries and a ``backward`` flag) in execution order, one
    program per context, and where the full graph's gradients and aux updates come from."""
    segments: list
    programs: dict[Context, Program]
    head_grad_vars: dict[int, Any] = field(default_factory=dict)    # output index -> variable node
    grad_heads: dict[str, Any] = field(default_factory=dict)        # argument -> gradient entry
    aux_updates: dict[str, Any] = field(default_factory=dict)       # aux state -> new value entry


class ProgramProvider(Protocol):
    #: programs are checked at bind (precompiled ones: a missing shape fails there)
    eager: bool

    def program(self, symbol, typing: Typing, modes: Sequence[str], ctx: Context, reqs: dict,
                monitor: str | None = None) -> Program:
        """The program holding ``modes`` for these shapes, grad_req and context; ``monitor``
        ("outputs" | "all"): the traced debug build."""

    def executed_symbol(self, symbol):
        """The graph the programs run for ``symbol`` (MXNet's bind-time passes: common
        subexpressions merged), ``symbol`` itself where they change nothing."""

    def check_gradients(self, symbol, wrt: list[str]) -> None:
        """Raise at bind, as MXNet does, where gradients for ``wrt`` cannot be built."""

    def debug_str(self, symbol, typing: Typing, wrt: list[str]) -> str:
        """``Executor.debug_str()``: the graph the programs run and its memory plan."""

    def placement(self, symbol, typing: Typing, reqs: dict, group2ctx: dict, ctx: Context,
                  train: bool) -> Placement:
        """Programs for a graph placed over several contexts."""
