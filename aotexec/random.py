"""``ax.random.seed``: the seed of aotexec's random generators (Dropout masks)."""
from __future__ import annotations

_seed = 0


def seed(seed_state: int, ctx: str = "all") -> None:
    global _seed
    _seed = int(seed_state)


def current_seed() -> int:
    return _seed
