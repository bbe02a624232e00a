"""Batch inference on Ray Data with an artifact (runtime only on the workers):

    ds = ray.data.from_numpy(x).rename_columns({"data": "data"})
    out = ds.map_batches(ax.ray.predictor("artifacts/mlp"), batch_size=64, concurrency=2)

``predictor`` returns a callable class (Ray builds one per actor, so each actor loads the
artifact and binds once). A batch of any size runs on the artifact's variants: split into
chunks of the largest variant's batch, the last one padded up to the smallest variant that
holds it, and the padding dropped from the outputs. Ray itself is imported by the caller, not
here: this module needs only numpy and the runtime.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .artifact import Artifact, load
from .base import AotexecError
from .runtime.context import Context, cpu


class Predictor:
    """``__call__(batch) -> batch``: the artifact's inference on the columns named like its data
    inputs (or ``columns``: input name -> column), its outputs added as columns named
    ``list_outputs()`` (or ``outputs``: output name -> column); other columns pass through."""

    def __init__(self, artifact_path: str, columns: dict[str, str] | None = None,
                 outputs: dict[str, str] | None = None, ctx: Context | None = None, keep_inputs: bool = True):
        self.artifact: Artifact = load(artifact_path)
        self.inputs = list(self.artifact.data_inputs)
        self.columns = {n: n for n in self.inputs} | dict(columns or {})
        names = self.artifact.symbol.list_outputs()
        self.outputs = {n: n for n in names} | dict(outputs or {})
        unknown = sorted(set(self.columns) - set(self.inputs)) + sorted(set(self.outputs) - set(names))
        if unknown:
            raise AotexecError(f"{unknown} are not data inputs {self.inputs} or outputs {names} of {artifact_path}")
        self.ctx, self.keep_inputs = ctx or cpu(), keep_inputs
        # batch sizes the artifact was compiled for (the first input's leading dimension)
        self.sizes = sorted({self.artifact.variant_shapes(k)[self.inputs[0]][0]
                             for k in range(len(self.artifact.variants))})
        self._executors: dict[int, Any] = {}

    def _executor(self, n: int) -> Any:
        if n not in self._executors:
            k = next(k for k in range(len(self.artifact.variants))
                     if self.artifact.variant_shapes(k)[self.inputs[0]][0] == n)
            self._executors[n] = self.artifact.simple_bind(self.ctx, grad_req="null", variant=k)
        return self._executors[n]

    def _run(self, arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
        n = len(arrays[self.inputs[0]])
        size = next(s for s in self.sizes if s >= n)
        ex = self._executor(size)
        feed = {}
        for name, a in arrays.items():
            want = ex.arg_dict[name]
            a = np.asarray(a, dtype=want.dtype)
            if a.shape[1:] != want.shape[1:]:
                raise AotexecError(f"column {self.columns[name]!r}: rows of shape {a.shape[1:]}, "
                                   f"the artifact's input {name!r} takes {want.shape[1:]}")
            feed[name] = np.concatenate([a, np.zeros((size - n,) + a.shape[1:], a.dtype)]) if size > n else a
        return [o.asnumpy()[:n] for o in ex.forward(is_train=False, **feed)]

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [c for c in self.columns.values() if c not in batch]
        if missing:
            raise AotexecError(f"batch has no column {missing[0]!r}; it has {sorted(batch)}")
        arrays = {name: np.stack(list(batch[c])) if batch[c].dtype == object else batch[c]
                  for name, c in self.columns.items()}
        total, step = len(arrays[self.inputs[0]]), self.sizes[-1]
        chunks = [self._run({k: v[i:i + step] for k, v in arrays.items()}) for i in range(0, total, step)]
        out = dict(batch) if self.keep_inputs else {}
        for j, name in enumerate(self.artifact.symbol.list_outputs()):
            if name in self.outputs:
                out[self.outputs[name]] = np.concatenate([c[j] for c in chunks]) if chunks else np.zeros((0,))
        return out


def predictor(artifact_path: str, **kwargs: Any) -> type:
    """A ``Predictor`` class with these arguments bound, for ``Dataset.map_batches(cls, ...)``."""
    path = str(artifact_path)

    class BoundPredictor(Predictor):
        def __init__(self) -> None:
            super().__init__(path, **kwargs)

    BoundPredictor.__name__ = BoundPredictor.__qualname__ = "AotexecPredictor"
    return BoundPredictor
