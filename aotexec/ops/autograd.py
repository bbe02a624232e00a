"""Ops the gradient pass inserts: ``_identity_with_attr_like_rhs`` (how MXNet feeds a
head gradient into the backward graph, taking the shape of the output it belongs to).
"""
from __future__ import annotations

from .registry import define, lowers
from .rules import same_dtype, same_shape

# rhs is read for its shape only
identity_like_rhs = define("_identity_with_attr_like_rhs", inputs=["lhs", "rhs"],
                           infer_shape=same_shape, infer_type=same_dtype, inplace=True, shape_only_inputs=(1,))


@lowers(identity_like_rhs)
def _identity_like_rhs_lower(ctx, p, lhs, rhs):
    return lhs
