"""``AttrScope``: attributes attached to every symbol created inside a ``with`` block."""
from __future__ import annotations

import threading

# MXNet stores these attribute keys wrapped in double underscores (c_api_symbolic.cc kHiddenKeys)
HIDDEN_KEYS = {"ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage", "profiler_scope"}


def attr_key(key: str) -> str:
    return f"__{key}__" if key in HIDDEN_KEYS else key


class AttrScope:
    _local = threading.local()

    def __init__(self, **kwargs: str) -> None:
        for v in kwargs.values():
            if not isinstance(v, str):
                raise ValueError("Attributes need to be string")
        self._attr = kwargs
        self._old: "AttrScope | None" = None

    def get(self, attr: dict[str, str] | None) -> dict[str, str]:
        if self._attr:
            merged = dict(self._attr)
            merged.update(attr or {})
            return merged
        return dict(attr) if attr else {}

    def __enter__(self) -> "AttrScope":
        self._old = AttrScope.current()
        merged = dict(self._old._attr)
        merged.update(self._attr)
        self._attr = merged
        AttrScope._local.value = self
        return self

    def __exit__(self, *exc) -> None:
        AttrScope._local.value = self._old

    @classmethod
    def current(cls) -> "AttrScope":
        cur = getattr(cls._local, "value", None)
        if cur is None:
            cur = cls._local.value = AttrScope()
        return cur
