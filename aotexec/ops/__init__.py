"""Operator definitions; importing this package registers every op."""
from . import elemwise, index, loss, dense, conv, pool, activation, norm, reduce, reshape, join_split, broadcast, autograd  # noqa: F401  (registration side effects)
from .registry import CONSTRUCTORS, OPS, OpDef, get_op  # noqa: F401
