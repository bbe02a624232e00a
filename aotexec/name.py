"""Automatic naming (MXNet's ``mx.name.NameManager`` and ``Prefix``)."""
from __future__ import annotations

import threading


class NameManager:
    """Gives ``<hint><n>`` names (``fullyconnected0``); a ``with`` block gets fresh counters."""

    _local = threading.local()

    def __init__(self) -> None:
        self._counter: dict[str, int] = {}
        self._old: "NameManager | None" = None

    def get(self, name: str | None, hint: str) -> str:
        if name:
            return name
        n = self._counter.get(hint, 0)
        self._counter[hint] = n + 1
        return f"{hint}{n}"

    def __enter__(self) -> "NameManager":
        self._old = NameManager.current()
        NameManager._local.value = self
        return self

    def __exit__(self, *exc) -> None:
        NameManager._local.value = self._old

    @classmethod
    def current(cls) -> "NameManager":
        cur = getattr(cls._local, "value", None)
        if cur is None:
            cur = cls._local.value = NameManager()
        return cur


class Prefix(NameManager):
    """Prefixes every name, given or automatic (``mx.name.Prefix('net1_')``)."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self._prefix = prefix

    def get(self, name: str | None, hint: str) -> str:
        return self._prefix + super().get(name, hint)


current = NameManager.current
