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
