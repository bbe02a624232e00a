"""Out-of-range indices of ops that raise on them (``take(mode='raise')``), checked on the host.

A compiled program cannot raise, so after each forward the executor looks at the index values
those ops read straight from a bound argument (through ops that pass their input through
unchanged, such as BlockGrad), as MXNet checks them when the op runs.  As in MXNet, the error
surfaces when the outputs are read (``asnumpy``), not at ``forward``.  Indices computed inside
the graph are not checked (they are clipped, as mode 'clip')."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Entry
from ..passes.infer import Typing


@dataclass(frozen=True)
class IndexCheck:
    node: str
    variable: str          # the argument holding the indices
    size: int              # valid indices: 0 .. size - 1


def _source_variable(e: Entry) -> str | None:
    while not e.node.is_variable:
        if 0 not in e.node.op.identity_outputs:
            return None
        e = e.node.inputs[0]
    return e.node.name


def index_checks(typing: Typing) -> list[IndexCheck]:
    checks = []
    for node in typing.graph.nodes:
        rule = None if node.op is None else node.op.index_checks
        for idx_pos, data_pos, axis in (rule(node.params) if rule else ()):
            var = _source_variable(node.inputs[idx_pos])
            if var is not None:
                shape = typing.shape_of(node.inputs[data_pos])
                checks.append(IndexCheck(node.name, var, int(shape[axis % len(shape)])))
    return checks


def violation(checks: list[IndexCheck], arrays: dict) -> str | None:
    """MXNet's message for the first out-of-range index, or None."""
    for c in checks:
        idx = arrays[c.variable].asnumpy()
        bad = idx[(idx < 0) | (idx >= c.size)]
        if bad.size:
            return (f"Error in operator {c.node}: take with mode='raise': index {np.asarray(bad).flat[0]} is out of "
                    f"bounds for an axis of size {c.size}")
    return None
