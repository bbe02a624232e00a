"""MXNet's KVStore surface: ``ax.kvstore.create('local' | 'device' | 'dist_sync')`` with
``init`` / ``push`` / ``pull`` / ``pushpull`` / ``set_optimizer`` / ``rank`` / ``num_workers``.

Semantics follow MXNet 1.9: a push of several values for one key (one per device) sums them;
'dist_sync' also sums across ranks (bucketed ``MPI_Iallreduce``, ``aotexec.distributed``);
with an optimizer set, the summed gradient updates the stored weight, otherwise the sum
replaces it; pull copies the stored value out. MXNet's parameter servers hold one weight and
apply the update there; here every rank holds the same weight and runs the same update on the
same summed gradient, which gives every rank the numbers a server would send back.
``init`` takes rank 0's values, as MXNet's servers do.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import distributed, optimizer as opt
from .base import AotexecError

KINDS = ("local", "device", "dist_sync", "dist_device_sync", "dist")


def create(name: str = "local", timeout: float | None = None) -> "KVStore":
    """A KVStore by MXNet's name; 'dist_async' is refused (all updates here are synchronous)."""
    if not isinstance(name, str) or name not in KINDS:
        raise AotexecError(f"unknown kvstore type {name!r}; aotexec has {KINDS}")
    return KVStore(name, distributed.world(timeout) if name.startswith("dist") else None)


def _keys(key: Any, value: Any) -> tuple[list, list]:
    """(keys, values) as lists: one key with a value (or a list of per-device values), or a
    list of keys with a list of values."""
    if isinstance(key, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(key):
            raise AotexecError(f"kvstore: {len(key)} keys need a list of {len(key)} values")
        keys, values = list(key), list(value)
    else:
        keys, values = [key], [value]
    for k in keys:
        if not isinstance(k, (int, str)) or isinstance(k, bool):
            raise AotexecError(f"kvstore keys are int or str, got {k!r}")
    return keys, values


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _numpy(v: Any) -> np.ndarray:
    return v.asnumpy() if hasattr(v, "asnumpy") else np.array(v)


class KVStore:
    def __init__(self, kind: str, comm: distributed.Communicator | None):
        self._type, self._comm = kind, comm
        self._store: dict[Any, np.ndarray] = {}
        self._updater: Callable[[Any, np.ndarray, np.ndarray], None] | None = None

    @property
    def type(self) -> str:
        return self._type

    @property
    def rank(self) -> int:
        return self._comm.rank if self._comm else 0

    @property
    def num_workers(self) -> int:
        return self._comm.size if self._comm else 1

    def init(self, key: Any, value: Any) -> None:
        keys, values = _keys(key, value)
        arrays = [_numpy(_as_list(v)[0]).copy() for v in values]
        for k, a in zip(keys, arrays):
            if k in self._store:
                raise AotexecError(f"kvstore: key {k!r} is already initialized")
        if self._comm:
            self._comm.broadcast(arrays, root=0)
        self._store.update(zip(keys, arrays))

    def _stored(self, k: Any) -> np.ndarray:
        if k not in self._store:
            raise AotexecError(f"kvstore: key {k!r} was not initialized (call init first)")
        return self._store[k]

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        keys, values = _keys(key, value)
        merged = []
        for k, v in zip(keys, values):
            parts = [_numpy(p) for p in _as_list(v)]
            if any(p.shape != self._stored(k).shape for p in parts):
                raise AotexecError(f"kvstore: push of shape {parts[0].shape} to key {k!r} "
                                   f"of shape {self._stored(k).shape}")
            merged.append(np.sum(parts, axis=0, dtype=parts[0].dtype) if len(parts) > 1 else parts[0].copy())

        def apply(idx: list[int]) -> None:
            for i in idx:
                stored = self._store[keys[i]]
                if self._updater is not None:
                    self._updater(keys[i], merged[i], stored)
                else:
                    stored[...] = merged[i]

        if self._comm:
            self._comm.allreduce(merged, on_ready=apply)   # updates overlap later buckets' transfer
        else:
            apply(list(range(len(keys))))

    def pull(self, key: Any, out: Any = None, priority: int = 0, ignore_sparse: bool = True) -> None:
        if out is None:
            raise AotexecError("kvstore.pull needs out= (the arrays to copy the values into)")
        keys, outs = _keys(key, out)
        for k, o in zip(keys, outs):
            for dst in _as_list(o):
                dst[:] = self._stored(k)

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority)

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        self.init(key, value)
        self.pull(key, out, priority)

    def set_optimizer(self, optimizer: opt.Optimizer) -> None:
        self._set_updater(opt.get_updater(optimizer))

    def _set_updater(self, updater: Callable[[Any, np.ndarray, np.ndarray], None]) -> None:
        self._updater = updater

    def set_gradient_compression(self, compression_params: dict) -> None:
        raise AotexecError("kvstore: gradient compression is not supported by aotexec")

    def barrier(self) -> None:
        if self._comm:
            self._comm.barrier()

    def _barrier(self) -> None:
        self.barrier()

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        if not isinstance(self._updater, opt.Updater):
            raise AotexecError("kvstore: save_optimizer_states needs set_optimizer first")
        Path(fname).write_bytes(self._updater.get_states(dump_optimizer))

    def load_optimizer_states(self, fname: str) -> None:
        if not isinstance(self._updater, opt.Updater):
            raise AotexecError("kvstore: load_optimizer_states needs set_optimizer first")
        try:
            self._updater.set_states(Path(fname).read_bytes())
        except OSError as e:
            raise AotexecError(f"kvstore: cannot load optimizer states from {fname}: {e}") from None

