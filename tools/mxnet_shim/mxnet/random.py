"""mxnet.random: seeding (aotexec's generator and the numpy stream these arrays come from)."""
from __future__ import annotations

import numpy as np

import aotexec as ax

_rng = np.random.default_rng(0)


def seed(seed_state, ctx="all") -> None:
    global _rng
    ax.random.seed(int(seed_state))
    _rng = np.random.default_rng(int(seed_state))


def _array(values, dtype, ctx):
    from .ndarray import array
    return array(np.asarray(values), ctx=ctx, dtype=dtype or "float32")


def uniform(low=0.0, high=1.0, shape=(1,), dtype=None, ctx=None, out=None, **kwargs):
    return _fill(out, _array(_rng.uniform(low, high, size=shape), dtype, ctx))


def normal(loc=0.0, scale=1.0, shape=(1,), dtype=None, ctx=None, out=None, **kwargs):
    return _fill(out, _array(_rng.normal(loc, scale, size=shape), dtype, ctx))


def randn(*shape, loc=0.0, scale=1.0, dtype=None, ctx=None, **kwargs):
    return normal(loc, scale, shape, dtype, ctx)


def randint(low, high, shape=(1,), dtype="int32", ctx=None, out=None, **kwargs):
    return _fill(out, _array(_rng.integers(low, high, size=shape), dtype, ctx))


def _fill(out, value):
    if out is None:
        return value
    out[:] = value
    return out
