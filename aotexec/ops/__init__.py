"""Operator definitions; importing this package registers every op (one module per family)."""
from . import (activation, autograd, broadcast, conv, dense, elemwise, index, join_split, loss,  # noqa: F401
               norm, pool, reduce, reshape, rnn, sequence, upsampling)
from . import contrib, init, ordering, sampler, spatial  # noqa: F401  (issue #18: ops exported models use)
from . import attention, contrib_tensor, correlation, ctc, distributions, histogram, im2col, image, linalg, linalg_eig, linalg_lu, linalg_solve, ravel, roi  # noqa: F401  (issue #21: ops MXNet's unit tests use)
from .registry import CONSTRUCTORS, OPS, OpDef, get_op  # noqa: F401
