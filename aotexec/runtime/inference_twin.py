"""``backward(is_train=False)``: MXNet's backward of the inference-mode graph (Dropout passes the
gradient through, BatchNorm's gradient uses the moving statistics and leaves them as they are).

aotexec compiles gradients of training-mode graphs only, so an executor builds, on first use, a
twin over a copy of its symbol where each op declaring ``inference_params`` computes in training
mode what it computes in inference mode (Dropout with p=0, BatchNorm with use_global_stats),
sharing the executor's arguments, gradients and aux states."""
from __future__ import annotations

import dataclasses

from ..ops.params import to_attr_string


def inference_symbol(symbol):
    """A copy of ``symbol`` whose train-mode ops compute as in inference."""
    twin = symbol.__deepcopy__(None)
    for node in twin._graph.nodes:
        rule = None if node.op is None else node.op.inference_params
        if rule is None:
            continue
        params = rule(node.params)
        for f in dataclasses.fields(params):
            value = getattr(params, f.name)
            if value != getattr(node.params, f.name):
                node.attrs[f.name] = to_attr_string(value)
        node.params = params
    twin._indexed = None
    return twin
