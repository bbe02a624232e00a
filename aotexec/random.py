"""``ax.random.seed``: the seed of aotexec's random streams (Dropout masks, initializers).

Every training call that has random ops passes ``(seed, counter)`` to the compiled
code, which derives a stream per node from it (``stablehlo.rng_bit_generator``);
the counter grows each call, so masks differ call to call and repeat after
``seed()`` is called again with the same value.
"""
from __future__ import annotations

import itertools
import threading

_lock = threading.Lock()
_seed = 0
_counter = itertools.count(1)


def seed(seed_state: int, ctx: str = "all") -> None:
    global _seed, _counter
    with _lock:
        _seed = int(seed_state) & 0xFFFFFFFFFFFFFFFF
        _counter = itertools.count(1)


def current_seed() -> int:
    return _seed


def next_stream() -> int:
    with _lock:
        return next(_counter)


def host_rng():
    """A numpy generator for values drawn on the host (initializers): its own stream of the
    current seed, so ``seed(n)`` repeats them."""
    import numpy as np
    return np.random.default_rng([current_seed(), next_stream()])
