"""Ops the gradient pass inserts: ``_identity_with_attr_like_rhs`` (how MXNet feeds a
head gradient into the backward graph, taking the shape of the output it belongs to).
"""
from __future__ import annotations

from .registry import OPS, define, lowers
from .rules import same_dtype, same_shape

identity_like_rhs = define("_identity_with_attr_like_rhs", inputs=["lhs", "rhs"],
                           infer_shape=same_shape, infer_type=same_dtype)


@lowers(identity_like_rhs)
def _identity_like_rhs_lower(ctx, p, lhs, rhs):
    return lhs


# gradients that are zero everywhere: the gradient pass stops there (nnvm zero_ops)
for _name in ("BlockGrad", "zeros_like", "ones_like", "_zeros", "_ones"):
    OPS[_name].zero_grad = True
