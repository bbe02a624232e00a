"""Batch inference on a local Ray instance: ``Dataset.map_batches(ax.ray.predictor(artifact))``
gives, row for row, what the artifact's executor gives in this process, for batch sizes that
are not the artifact's (split, and the last chunk padded to a variant)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax

ray = pytest.importorskip("ray", reason="ray not installed: pip install 'aotexec[ray]'")
pytest.importorskip("ray.data", reason="ray[data] not installed: pip install 'aotexec[ray]'")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def mlp_artifact(tmp_path_factory) -> ax.Artifact:
    sym = ax.sym.load(str(EXAMPLES / "mlp-symbol.json"))
    return ax.compile(sym, [{"data": (4, 784)}, {"data": (8, 784)}], params=str(EXAMPLES / "mlp-params.npz"),
                      out=tmp_path_factory.mktemp("ray") / "mlp")


def test_map_batches_matches_the_executor(mlp_artifact, tmp_path):
    x = np.random.default_rng(0).normal(size=(21, 784)).astype(np.float32)
    ex = mlp_artifact.simple_bind(ax.cpu(), data=(8, 784))
    want = np.concatenate([ex.forward(data=np.concatenate([x[i:i + 8], np.zeros((8 - len(x[i:i + 8]), 784),
                                                                                  np.float32)]))[0].asnumpy()[:len(x[i:i + 8])]
                           for i in range(0, 21, 8)])
    temp = tempfile.mkdtemp(prefix="axray", dir="/tmp")   # Ray's socket paths must stay under 108 bytes
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    try:
        ds = ray.data.from_numpy(x)         # one column, "data"
        out = ds.map_batches(ax.ray.predictor(str(mlp_artifact.path)), batch_size=10, concurrency=1)
        rows = out.take_all()
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    assert len(rows) == 21 and set(rows[0]) == {"data", "softmax_output"}
    got = np.stack([r["softmax_output"] for r in sorted(rows, key=lambda r: tuple(r["data"][:4]))])
    order = sorted(range(21), key=lambda i: tuple(x[i][:4]))
    np.testing.assert_allclose(got, want[order], rtol=1e-6, atol=1e-7)


def test_predictor_checks_columns(mlp_artifact):
    pred = ax.ray.predictor(str(mlp_artifact.path))()
    out = pred({"data": np.zeros((3, 784), np.float32), "id": np.arange(3)})
    assert out["softmax_output"].shape == (3, 10) and list(out["id"]) == [0, 1, 2]
    assert pred.sizes == [4, 8]
    with pytest.raises(ax.AotexecError, match="batch has no column 'data'"):
        pred({"image": np.zeros((3, 784), np.float32)})
    with pytest.raises(ax.AotexecError, match="the artifact's input 'data' takes \\(784,\\)"):
        pred({"data": np.zeros((3, 100), np.float32)})
    with pytest.raises(ax.AotexecError, match="not data inputs"):
        ax.ray.Predictor(str(mlp_artifact.path), columns={"pixels": "x"})
