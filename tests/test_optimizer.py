"""aotexec.optimizer against MXNet 1.9.1's updates (tests/data/optimizer_reference.npz, written
by tools/make_optimizer_reference.py): SGD, momentum, clipping and Adam's bias correction,
several steps, with MXNet's rule that only ``*_weight`` / ``*_gamma`` get weight decay."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from make_optimizer_reference import CASES, NAMES, STEPS  # noqa: E402

pytestmark = pytest.mark.lowering      # numpy only: the fast tier


@pytest.mark.parametrize("case", sorted(CASES))
def test_updates_match_mxnet(case):
    name, kw = CASES[case]
    with np.load(ROOT / "tests" / "data" / "optimizer_reference.npz") as f:
        ref = {k: f[k] for k in f.files}
    upd = ax.optimizer.get_updater(ax.optimizer.create(name, param_idx2name=NAMES, **kw))
    ws = {i: ref[f"w{i}"].copy() for i in NAMES}
    for s in range(STEPS):
        for i in NAMES:
            upd(i, ref[f"g{i}_{s}"].copy(), ws[i])
    for i in NAMES:
        assert ws[i].dtype == np.float32
        np.testing.assert_allclose(ws[i], ref[f"{case}_w{i}"], rtol=2e-6, atol=1e-6, err_msg=f"{case} {NAMES[i]}")


def test_states_round_trip_and_bad_names():
    upd = ax.optimizer.get_updater(ax.optimizer.create("adam"))
    w = np.ones(3, np.float32)
    upd(0, np.ones(3, np.float32), w)
    other = ax.optimizer.get_updater(ax.optimizer.create("adam"))
    other.set_states(upd.get_states())
    assert np.array_equal(other.states[0][0], upd.states[0][0]) and other.optimizer._index_update_count == {0: 1}
    sgd = ax.optimizer.get_updater(ax.optimizer.create("sgd", momentum=0.9))
    sgd("w", np.ones(3, np.float32), w)
    sgd2 = ax.optimizer.get_updater(ax.optimizer.create("sgd"))
    sgd2.set_states(sgd.get_states())
    assert np.array_equal(sgd2.states["w"], sgd.states["w"])
    with pytest.raises(ax.AotexecError, match="not an aotexec states file"):
        sgd2.set_states(b"garbage")
    with pytest.raises(ax.AotexecError, match="unknown optimizer 'rmsprop'"):
        ax.optimizer.create("rmsprop")
    with pytest.raises(ax.AotexecError, match="unknown kvstore type 'dist_async'"):
        ax.kvstore.create("dist_async")


def test_local_kvstore_saves_and_loads_optimizer_states(tmp_path):
    kv = ax.kv.create("local")
    kv.init(["a", "b"], [ax.nd.ones((2, 2)), ax.nd.zeros(3)])
    kv.set_optimizer(ax.optimizer.create("sgd", learning_rate=0.5, momentum=0.9))
    kv.push(["a", "b"], [[ax.nd.ones((2, 2)), ax.nd.ones((2, 2))], ax.nd.ones(3)])   # two devices for "a"
    out = ax.nd.zeros((2, 2))
    kv.pull("a", out=out)
    np.testing.assert_allclose(out.asnumpy(), np.full((2, 2), 1 - 0.5 * 2, np.float32))
    kv.save_optimizer_states(str(tmp_path / "s.states"))
    other = ax.kv.create("local")
    other.set_optimizer(ax.optimizer.create("sgd", learning_rate=0.5, momentum=0.9))
    other.load_optimizer_states(str(tmp_path / "s.states"))
    assert np.array_equal(other._updater.states["a"], kv._updater.states["a"])
    assert (kv.rank, kv.num_workers, kv.type) == (0, 1, "local")
    with pytest.raises(ax.AotexecError, match="key 'c' was not initialized"):
        kv.pull("c", out=out)
