"""MXNet 1.9.1's SGD (with weight decay and momentum) and Adam, in numpy, for kvstore and
training loops: ``ax.optimizer.create('sgd', learning_rate=0.1, momentum=0.9, wd=1e-4)``.

The update formulas are those of MXNet's kernels (``sgd_update``, ``sgd_mom_update``,
``adam_update``) and its Python ``Optimizer`` (learning rate and weight decay multipliers,
per-key update counts, Adam's bias correction folded into the learning rate), so that a run
ported from MXNet gives its numbers. Weights and gradients are numpy arrays updated in place.
"""
from __future__ import annotations

import io
import math
import zipfile
from typing import Any, Callable

import numpy as np

from .base import AotexecError

Key = int | str
_REGISTRY: dict[str, type["Optimizer"]] = {}


def register(cls: type["Optimizer"]) -> type["Optimizer"]:
    _REGISTRY[cls.__name__.lower()] = cls
    return cls


def create(name: str | "Optimizer", **kwargs: Any) -> "Optimizer":
    """An optimizer by MXNet's name (``'sgd'``, ``'adam'``), or ``name`` itself if it is one."""
    if isinstance(name, Optimizer):
        return name
    cls = _REGISTRY.get(str(name).lower())
    if cls is None:
        raise AotexecError(f"unknown optimizer {name!r}; aotexec has {sorted(_REGISTRY)}")
    return cls(**kwargs)


class Optimizer:
    """MXNet's ``Optimizer`` base: ``lr`` / ``wd`` scaled per key by ``lr_mult`` / ``wd_mult``.
    As in MXNet, when ``param_idx2name`` is given, parameters whose name ends neither in
    ``_weight`` nor ``_gamma`` get no weight decay."""

    def __init__(self, learning_rate: float = 0.01, wd: float = 0.0, rescale_grad: float = 1.0,
                 clip_gradient: float | None = None, lr_scheduler: Callable[[int], float] | None = None,
                 param_idx2name: dict[int, str] | None = None, begin_num_update: int = 0,
                 multi_precision: bool = False, **unused: Any):
        self.lr, self.wd, self.rescale_grad, self.clip_gradient = learning_rate, wd, rescale_grad, clip_gradient
        self.lr_scheduler = lr_scheduler
        self.begin_num_update = self.num_update = begin_num_update
        self._index_update_count: dict[Key, int] = {}
        self.idx2name = dict(param_idx2name or {})
        self.lr_mult: dict[Key, float] = {}
        self.wd_mult: dict[Key, float] = {n: 0.0 for n in self.idx2name.values()
                                          if not n.endswith(("_weight", "_gamma"))}

    @property
    def learning_rate(self) -> float:
        return self.lr_scheduler(self.num_update) if self.lr_scheduler else self.lr

    def set_learning_rate(self, lr: float) -> None:
        self.lr = lr

    def set_lr_mult(self, args_lr_mult: dict[Key, float]) -> None:
        self.lr_mult = dict(args_lr_mult)

    def set_wd_mult(self, args_wd_mult: dict[Key, float]) -> None:
        self.wd_mult.update(args_wd_mult)

    def _mult(self, table: dict[Key, float], index: Key) -> float:
        if index in table:
            return table[index]
        return table.get(self.idx2name[index], 1.0) if index in self.idx2name else 1.0

    def _get_lr(self, index: Key) -> float:
        return self.learning_rate * self._mult(self.lr_mult, index)

    def _get_wd(self, index: Key) -> float:
        return self.wd * self._mult(self.wd_mult, index)

    def _update_count(self, index: Key) -> None:
        self._index_update_count[index] = self._index_update_count.get(index, self.begin_num_update) + 1
        self.num_update = max(self._index_update_count[index], self.num_update)

    def _scaled(self, grad: np.ndarray) -> np.ndarray:
        g = grad * np.asarray(self.rescale_grad, grad.dtype)
        return np.clip(g, -self.clip_gradient, self.clip_gradient) if self.clip_gradient else g

    def create_state(self, index: Key, weight: np.ndarray) -> Any:
        return None

    def update(self, index: Key, weight: np.ndarray, grad: np.ndarray, state: Any) -> None:
        raise NotImplementedError


@register
class SGD(Optimizer):
    """``sgd_update``: w = (1 - lr*wd) w - lr g;  ``sgd_mom_update``: m = mu m - lr*wd w - lr g; w += m
    (g: the rescaled, clipped gradient)."""

    def __init__(self, momentum: float = 0.0, lazy_update: bool = True, **kwargs: Any):
        super().__init__(**kwargs)
        self.momentum = momentum

    def create_state(self, index: Key, weight: np.ndarray) -> np.ndarray | None:
        return np.zeros_like(weight) if self.momentum != 0.0 else None

    def update(self, index: Key, weight: np.ndarray, grad: np.ndarray, state: np.ndarray | None) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        g = self._scaled(grad)
        if state is None:
            weight[...] = (1 - lr * wd) * weight - lr * g
        else:
            state[...] = self.momentum * state - lr * wd * weight - lr * g
            weight += state


@register
class Adam(Optimizer):
    """``adam_update`` with MXNet's bias correction: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t), and
    epsilon added to the uncorrected sqrt(v); weight decay joins the gradient before clipping."""

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-8, lazy_update: bool = True, **kwargs: Any):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, index: Key, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros_like(weight), np.zeros_like(weight)

    def update(self, index: Key, weight: np.ndarray, grad: np.ndarray, state: tuple) -> None:
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        lr *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        g = grad * np.asarray(self.rescale_grad, grad.dtype) + np.asarray(wd, grad.dtype) * weight
        if self.clip_gradient:
            g = np.clip(g, -self.clip_gradient, self.clip_gradient)
        mean, var = state
        mean[...] = self.beta1 * mean + (1 - self.beta1) * g
        var[...] = self.beta2 * var + (1 - self.beta2) * np.square(g)
        weight -= lr * mean / (np.sqrt(var) + self.epsilon)


class Updater:
    """MXNet's ``optimizer.Updater``: per-key state, created on a key's first update."""

    def __init__(self, optimizer: Optimizer):
        self.optimizer = optimizer
        self.states: dict[Key, Any] = {}

    def __call__(self, index: Key, grad: np.ndarray, weight: np.ndarray) -> None:
        if index not in self.states:
            self.states[index] = self.optimizer.create_state(index, weight)
        self.optimizer.update(index, weight, grad, self.states[index])

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        """The per-key states and update counts as .npz bytes (no pickle, unlike MXNet: a states
        file is data, never code); the hyper-parameters stay with the optimizer object."""
        arrays: dict[str, np.ndarray] = {}
        for k, state in self.states.items():
            tag = f"{'i' if isinstance(k, int) else 's'}/{k}"
            parts = state if isinstance(state, tuple) else () if state is None else (state,)
            arrays[f"n/{tag}"] = np.array(len(parts) if isinstance(state, tuple) else -len(parts))
            arrays.update({f"{j}/{tag}": p for j, p in enumerate(parts)})
            arrays[f"c/{tag}"] = np.array(self.optimizer._index_update_count.get(k, 0))
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()

    def set_states(self, states: bytes) -> None:
        try:
            with np.load(io.BytesIO(states), allow_pickle=False) as f:
                data = {name: f[name] for name in f.files}
            loaded, counts = {}, {}
            for name in data:
                if name.startswith("n/"):
                    t, key = name[2:].split("/", 1)
                    k = int(key) if t == "i" else key
                    n = int(data[name])
                    parts = tuple(data[f"{j}/{t}/{key}"] for j in range(abs(n)))
                    loaded[k] = parts if n > 0 else parts[0] if parts else None
                    counts[k] = int(data[f"c/{t}/{key}"])
        except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile) as e:
            raise AotexecError(f"optimizer states are not an aotexec states file: {e}") from None
        self.states = loaded
        self.optimizer._index_update_count.update(counts)


def get_updater(optimizer: Optimizer) -> Updater:
    return Updater(optimizer)
