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
ZERO_GRAD = ("BlockGrad", "zeros_like", "ones_like", "_zeros", "_ones", "sign", "floor", "ceil", "round", "rint",
             "trunc", "fix", "logical_not", "argmax", "argmin", "one_hot", "_equal", "_not_equal", "_greater",
             "_greater_equal", "_lesser", "_lesser_equal", "_logical_and", "_logical_or", "_equal_scalar",
             "_not_equal_scalar", "_greater_scalar", "_greater_equal_scalar", "_lesser_scalar",
             "_lesser_equal_scalar", "_logical_and_scalar", "_logical_or_scalar", "broadcast_equal",
             "broadcast_not_equal", "broadcast_greater", "broadcast_greater_equal", "broadcast_lesser",
             "broadcast_lesser_equal", "broadcast_logical_and", "broadcast_logical_or")
for _name in ZERO_GRAD:
    OPS[_name].zero_grad = True
