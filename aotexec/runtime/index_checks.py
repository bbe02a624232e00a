"""Out-of-range indices of ops that raise on them (``take(mode='raise')``, ``gather_nd``), checked
on the host.

A compiled program cannot raise, so after each forward the executor looks at the index values
those ops read straight from a bound argument (through ops that pass their input through
unchanged, such as BlockGrad), as MXNet checks them when the op runs.  As in MXNet, the error
surfaces when the outputs are read (``asnumpy``), not at ``forward``.  Indices computed inside
the graph are not checked (they are clipped, as mode 'clip')."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import AotexecError, OutOfBoundsIndex
from ..graph import Entry
from ..passes.infer import Typing


@dataclass(frozen=True)
class IndexCheck:
    node: str
    variable: str              # the argument holding the indices
    sizes: tuple[int, ...]     # take: (size,), indices 0 .. size - 1; gather_nd: row j of the
    rows: bool = False         # indices addresses axis j (rows=True), -size_j .. size_j - 1


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
                if axis is None:        # gather_nd: one row of indices per leading axis
                    rows = typing.shape_of(node.inputs[idx_pos])[0]
                    checks.append(IndexCheck(node.name, var, tuple(int(d) for d in shape[:rows]), rows=True))
                else:
                    checks.append(IndexCheck(node.name, var, (int(shape[axis % len(shape)]),)))
    return checks


def violation(checks: list[IndexCheck], arrays: dict) -> AotexecError | None:
    """MXNet's error for the first out-of-range index, or None."""
    for c in checks:
        idx = arrays[c.variable].asnumpy()
        if c.rows:
            for axis, size in enumerate(c.sizes):
                row = idx[axis]
                bad = row[(row < -size) | (row >= size)]
                if bad.size:
                    return OutOfBoundsIndex(f"index {int(bad.flat[0])} is out of bounds for axis {axis} with size {size}")
            continue
        size = c.sizes[0]
        bad = idx[(idx < 0) | (idx >= size)]
        if bad.size:
            return AotexecError(f"Error in operator {c.node}: take with mode='raise': index {np.asarray(bad).flat[0]} "
                                f"is out of bounds for an axis of size {size}")
    return None
