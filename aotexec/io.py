"""``ax.io``: MXNet's ``DataDesc`` and ``DataBatch``, what ``ax.mod.Module`` binds with and
runs on (MXNet 1.9.1 python/mxnet/io/io.py)."""
from __future__ import annotations

from collections import namedtuple
from typing import Any, Sequence

import numpy as np


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """An input's name and shape, with its dtype and layout ('NCHW' unless said)."""

    def __new__(cls, name: str, shape: Sequence[int], dtype: Any = np.float32, layout: str = "NCHW"):
        desc = super().__new__(cls, name, tuple(shape))
        desc.dtype, desc.layout = dtype, layout
        return desc

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        return 0 if layout is None else layout.find("N")

    @staticmethod
    def get_list(shapes: Sequence[tuple[str, Sequence[int]]], types: Sequence[tuple[str, Any]] | None = None) -> list:
        dtypes = dict(types or ())
        return [DataDesc(name, shape, dtypes.get(name, np.float32)) for name, shape in shapes]


class DataBatch:
    """One batch: ``data`` and ``label`` are lists of arrays in the module's input order."""

    def __init__(self, data: list, label: list | None = None, pad: int | None = None, index: Any = None,
                 bucket_key: Any = None, provide_data: list | None = None, provide_label: list | None = None):
        if data is not None and not isinstance(data, (list, tuple)):
            raise AssertionError("Data must be list of NDArrays")
        if label is not None and not isinstance(label, (list, tuple)):
            raise AssertionError("Label must be list of NDArrays")
        self.data, self.label, self.pad, self.index = data, label, pad, index
        self.bucket_key, self.provide_data, self.provide_label = bucket_key, provide_data, provide_label

    def __str__(self) -> str:
        data = [d.shape for d in self.data]
        label = [lb.shape for lb in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data} label shapes: {label}"


def _named(data: Any, default_name: str) -> list[tuple[str, np.ndarray]]:
    """MXNet's _init_data: an array, a list of arrays (named ``_0_<name>``...), or a dict."""
    if data is None:
        return []
    if isinstance(data, dict):
        items = list(data.items())
    elif isinstance(data, (list, tuple)):
        items = [(default_name if len(data) == 1 else f"_{i}_{default_name}", d) for i, d in enumerate(data)]
    else:
        items = [(default_name, data)]
    # NDArrays keep their dtype; anything else becomes float32, as MXNet's ``nd.array`` makes it
    return [(name, d.asnumpy() if hasattr(d, "asnumpy") else np.asarray(d, dtype=np.float32)) for name, d in items]


class DataIter:
    """MXNet's iterator protocol: ``reset()``, ``next()`` -> ``DataBatch`` (StopIteration at the
    end), ``provide_data`` / ``provide_label``."""

    def __init__(self, batch_size: int = 0):
        self.batch_size = batch_size

    def __iter__(self) -> "DataIter":
        return self

    def __next__(self) -> DataBatch:
        return self.next()

    def reset(self) -> None:
        pass

    def next(self) -> DataBatch:
        raise StopIteration


class NDArrayIter(DataIter):
    """Batches of in-memory arrays along axis 0. ``last_batch_handle``: 'pad' (the last batch
    filled from the start, ``DataBatch.pad`` saying how many), 'discard' (dropped) or
    'roll_over' (its samples open the next epoch)."""

    def __init__(self, data: Any, label: Any = None, batch_size: int = 1, shuffle: bool = False,
                 last_batch_handle: str = "pad", data_name: str = "data", label_name: str = "softmax_label",
                 layout: str = "NCHW"):
        super().__init__(batch_size)
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError(f"last_batch_handle must be 'pad', 'discard' or 'roll_over', got {last_batch_handle!r}")
        self.data, self.label = _named(data, data_name), _named(label, label_name)
        if not self.data:
            raise ValueError("NDArrayIter needs data")
        self.num_data = self.data[0][1].shape[0]
        if any(a.shape[0] != self.num_data for _, a in self.data + self.label):
            raise ValueError("every array of an NDArrayIter needs the same number of samples (axis 0)")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.shuffle, self.last_batch_handle, self.layout = shuffle, last_batch_handle, layout
        self._carry = np.zeros(0, np.int64)      # roll_over: the last epoch's short batch
        self.idx = np.arange(self.num_data)
        self.reset()

    def _descs(self, arrays: list[tuple[str, np.ndarray]]) -> list[DataDesc]:
        return [DataDesc(name, (self.batch_size,) + a.shape[1:], a.dtype, layout=self.layout) for name, a in arrays]

    @property
    def provide_data(self) -> list[DataDesc]:
        return self._descs(self.data)

    @property
    def provide_label(self) -> list[DataDesc]:
        return self._descs(self.label)

    def reset(self) -> None:
        if self.shuffle:
            np.random.shuffle(self.idx)
        self._order = np.concatenate([self._carry, self.idx])
        self._carry = np.zeros(0, np.int64)
        self.cursor = 0

    def next(self) -> DataBatch:
        from .runtime.ndarray import array
        start, end = self.cursor, self.cursor + self.batch_size
        if start >= len(self._order):
            raise StopIteration
        pick, pad = self._order[start:end], 0
        if len(pick) < self.batch_size:
            if self.last_batch_handle == "discard":
                raise StopIteration
            if self.last_batch_handle == "roll_over":
                self._carry, self.cursor = pick, len(self._order)
                raise StopIteration
            pad = self.batch_size - len(pick)
            pick = np.concatenate([pick, np.resize(self.idx, pad)])
        self.cursor = end
        batch = lambda arrays: [array(a[pick], dtype=a.dtype) for _, a in arrays]  # noqa: E731
        return DataBatch(batch(self.data), batch(self.label) or None, pad=pad, provide_data=self.provide_data,
                         provide_label=self.provide_label)

    def getpad(self) -> int:
        return max(self.cursor - len(self._order), 0)
