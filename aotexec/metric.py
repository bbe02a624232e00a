"""``ax.metric``: MXNet 1.9.1's evaluation metrics (python/mxnet/metric.py) for ``Module.fit`` /
``score``: accumulated over batches on the host in numpy, ``get()`` -> (name, value)."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from .base import AotexecError


def _np(a: Any) -> np.ndarray:
    return a.asnumpy() if hasattr(a, "asnumpy") else np.asarray(a)


def _pairs(labels: Sequence, preds: Sequence) -> list[tuple[np.ndarray, np.ndarray]]:
    if len(labels) != len(preds):
        raise ValueError(f"Shape of labels {len(labels)} does not match shape of predictions {len(preds)}")
    return [(_np(lb), _np(p)) for lb, p in zip(labels, preds)]


class EvalMetric:
    """``sum_metric / num_inst`` over the batches since ``reset``."""

    def __init__(self, name: str, output_names: Any = None, label_names: Any = None, **kwargs: Any):
        self.name, self.output_names, self.label_names = str(name), output_names, label_names
        self.reset()

    def reset(self) -> None:
        self.num_inst, self.sum_metric = 0, 0.0

    def update(self, labels: Sequence, preds: Sequence) -> None:
        raise NotImplementedError()

    def get(self) -> tuple[str, float]:
        return self.name, (float("nan") if self.num_inst == 0 else self.sum_metric / self.num_inst)

    def get_name_value(self) -> list[tuple[str, float]]:
        name, value = self.get()
        if isinstance(name, list):
            return list(zip(name, value))
        return [(name, value)]

    def __str__(self) -> str:
        return f"EvalMetric: {dict(self.get_name_value())}"


class Accuracy(EvalMetric):
    """The fraction of samples whose largest prediction (along ``axis``) is the label."""

    def __init__(self, axis: int = 1, name: str = "accuracy", **kwargs: Any):
        super().__init__(name, **kwargs)
        self.axis = axis

    def update(self, labels: Sequence, preds: Sequence) -> None:
        for label, pred in _pairs(labels, preds):
            if pred.shape != label.shape:
                pred = np.argmax(pred, axis=self.axis)
            pred, label = pred.astype(np.int64).ravel(), label.astype(np.int64).ravel()
            if pred.shape != label.shape:
                raise ValueError(f"Shape of labels {label.shape} does not match shape of predictions {pred.shape}")
            self.sum_metric += int((pred == label).sum())
            self.num_inst += len(pred)


class TopKAccuracy(EvalMetric):
    def __init__(self, top_k: int = 1, name: str = "top_k_accuracy", **kwargs: Any):
        super().__init__(f"{name}_{top_k}", **kwargs)
        if top_k <= 1:
            raise AssertionError("Please use Accuracy if top_k is no more than 1")
        self.top_k = top_k

    def update(self, labels: Sequence, preds: Sequence) -> None:
        for label, pred in _pairs(labels, preds):
            top = np.argsort(pred.astype(np.float32), axis=1)[:, -self.top_k:]
            self.sum_metric += int((top == label.astype(np.int64).reshape(-1, 1)).any(axis=1).sum())
            self.num_inst += pred.shape[0]


class CrossEntropy(EvalMetric):
    """Mean of -log(probability of the label) over samples."""

    def __init__(self, eps: float = 1e-12, name: str = "cross-entropy", **kwargs: Any):
        super().__init__(name, **kwargs)
        self.eps = eps

    def update(self, labels: Sequence, preds: Sequence) -> None:
        for label, pred in _pairs(labels, preds):
            label = label.ravel().astype(np.int64)
            prob = pred[np.arange(label.shape[0]), label]
            self.sum_metric += float((-np.log(prob + self.eps)).sum())
            self.num_inst += label.shape[0]


class _PerBatch(EvalMetric):
    """MXNet 1.x's regression metrics: one value per batch, averaged over batches."""
    reduce: Callable[[np.ndarray], float]

    def update(self, labels: Sequence, preds: Sequence) -> None:
        for label, pred in _pairs(labels, preds):
            if label.ndim == 1:
                label = label.reshape(label.shape[0], 1)
            if pred.ndim == 1:
                pred = pred.reshape(pred.shape[0], 1)
            self.sum_metric += type(self).reduce(label - pred)
            self.num_inst += 1


class MSE(_PerBatch):
    def __init__(self, name: str = "mse", **kwargs: Any):
        super().__init__(name, **kwargs)

    reduce = staticmethod(lambda d: float(np.mean(d ** 2.0)))


class MAE(_PerBatch):
    def __init__(self, name: str = "mae", **kwargs: Any):
        super().__init__(name, **kwargs)

    reduce = staticmethod(lambda d: float(np.mean(np.abs(d))))


class RMSE(_PerBatch):
    def __init__(self, name: str = "rmse", **kwargs: Any):
        super().__init__(name, **kwargs)

    reduce = staticmethod(lambda d: float(math.sqrt(np.mean(d ** 2.0))))


class CustomMetric(EvalMetric):
    """``feval(label, pred)`` per (numpy) pair: a number, or (sum, count)."""

    def __init__(self, feval: Callable, name: str | None = None, allow_extra_outputs: bool = False, **kwargs: Any):
        super().__init__(f"custom({feval.__name__})" if name is None else name, **kwargs)
        self._feval, self._allow_extra_outputs = feval, allow_extra_outputs

    def update(self, labels: Sequence, preds: Sequence) -> None:
        if not self._allow_extra_outputs:
            _pairs(labels, preds)
        for label, pred in zip(labels, preds):
            value = self._feval(_np(label), _np(pred))
            if isinstance(value, tuple):
                self.sum_metric += value[0]
                self.num_inst += value[1]
            else:
                self.sum_metric += value
                self.num_inst += 1


class CompositeEvalMetric(EvalMetric):
    def __init__(self, metrics: Sequence[Any] | None = None, name: str = "composite", **kwargs: Any):
        self.metrics = [create(m) for m in (metrics or [])]
        super().__init__(name, **kwargs)

    def add(self, metric: Any) -> None:
        self.metrics.append(create(metric))

    def reset(self) -> None:
        for m in getattr(self, "metrics", []):
            m.reset()

    def update(self, labels: Sequence, preds: Sequence) -> None:
        for m in self.metrics:
            m.update(labels, preds)

    def get(self) -> tuple[list[str], list[float]]:   # type: ignore[override]
        pairs = [p for m in self.metrics for p in m.get_name_value()]
        return [n for n, _ in pairs], [v for _, v in pairs]


_NAMES: dict[str, Callable[..., EvalMetric]] = {
    "acc": Accuracy, "accuracy": Accuracy, "top_k_accuracy": TopKAccuracy, "top_k_acc": TopKAccuracy,
    "ce": CrossEntropy, "cross-entropy": CrossEntropy, "mse": MSE, "mae": MAE, "rmse": RMSE}


def create(metric: Any, *args: Any, **kwargs: Any) -> EvalMetric:
    """A metric from a name (``'acc'``, ``'ce'``, ``'mse'``...), a ``feval`` callable, a list of
    those (a composite), or a metric itself."""
    if isinstance(metric, EvalMetric):
        return metric
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, (list, tuple)):
        return CompositeEvalMetric(list(metric))
    cls = _NAMES.get(str(metric).lower())
    if cls is None:
        raise AotexecError(f"unknown metric {metric!r}; aotexec has {sorted(_NAMES)} and callables")
    return cls(*args, **kwargs)
