"""Executors under threads (README "Thread safety"): calls on one executor are serialized and
each thread reads its own outputs, so every result is the caller's own; separate executors of
one program run side by side; backward after another thread's forward(is_train=True) raises."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax

THREADS = 8
CALLS = 50
BATCH, IN, HIDDEN, OUT = 4, 16, 8, 5


def _net():
    x = ax.sym.Variable("data")
    h = ax.sym.Activation(ax.sym.FullyConnected(x, num_hidden=HIDDEN, name="tfc1"), act_type="relu", name="trelu")
    return ax.sym.FullyConnected(h, num_hidden=OUT, name="tfc2")


PARAMS = {n: np.random.RandomState(i).uniform(-1, 1, s).astype(np.float32) for i, (n, s) in enumerate(
    {"tfc1_weight": (HIDDEN, IN), "tfc1_bias": (HIDDEN,), "tfc2_weight": (OUT, HIDDEN), "tfc2_bias": (OUT,)}.items())}


def _reference(x: np.ndarray) -> np.ndarray:
    h = np.maximum(x @ PARAMS["tfc1_weight"].T + PARAMS["tfc1_bias"], 0)
    return h @ PARAMS["tfc2_weight"].T + PARAMS["tfc2_bias"]


def _inputs(i: int) -> list[np.ndarray]:
    """Thread i's inputs: distinct from every other thread's, so a swapped result shows."""
    rng = np.random.RandomState(100 + i)
    return [rng.uniform(-1, 1, (BATCH, IN)).astype(np.float32) + 10 * i for _ in range(5)]


def _hammer(forward_for) -> list:
    """Every thread calls ``forward_for(i)(x)`` CALLS times; returns the wrong results seen."""
    barrier = threading.Barrier(THREADS)
    wrong: list = []
    crashed: list = []

    def worker(i: int) -> None:
        try:
            forward = forward_for(i)
            xs = _inputs(i)
            barrier.wait()
            for c in range(CALLS):
                x = xs[c % len(xs)]
                out = forward(x)
                if not np.allclose(out, _reference(x), rtol=1e-4, atol=1e-4):
                    wrong.append((i, c))
        except BaseException as e:   # noqa: BLE001 (reported by the test)
            crashed.append(repr(e))
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not crashed, crashed
    return wrong


@pytest.fixture(scope="module")
def artifact(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("threads") / "net"
    ax.compile(_net(), {"data": (BATCH, IN)}, params=PARAMS, out=out)
    return out


def _bound(source, artifact_dir):
    if source == "symbol":
        ex = _net().simple_bind(ax.cpu(), grad_req="null", data=(BATCH, IN))
        ex.copy_params_from(PARAMS)
        return ex
    return ax.load(artifact_dir).simple_bind(ax.cpu())


@pytest.mark.parametrize("source", ["symbol", "artifact"])
def test_one_executor_shared_by_many_threads(source, artifact):
    ex = _bound(source, artifact)
    mine = _inputs(99)[0]
    ex.forward(data=mine)
    main_out = ex.outputs[0]
    assert _hammer(lambda i: (lambda x: ex.forward(data=x)[0].asnumpy())) == []
    # the binding thread's outputs are its own too: untouched by the workers' calls
    assert ex.outputs[0] is main_out
    np.testing.assert_allclose(main_out.asnumpy(), _reference(mine), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("source", ["symbol", "artifact"])
def test_one_executor_per_thread(source, artifact):
    _bound(source, artifact)        # compile (or load) once; the threads bind from the cache
    assert _hammer(lambda i: (lambda ex: (lambda x: ex.forward(data=x)[0].asnumpy()))(_bound(source, artifact))) == []


def test_outputs_read_later_stay_the_callers_own(artifact):
    """A thread that keeps its result and reads it after other threads ran still sees its own."""
    ex = _bound("artifact", artifact)
    barrier = threading.Barrier(THREADS)
    kept: dict[int, tuple] = {}

    def worker(i: int) -> None:
        x = _inputs(i)[0]
        out = ex.forward(data=x)[0]
        barrier.wait()                   # every other thread has run forward since
        kept[i] = (x, out.asnumpy())

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(kept) == list(range(THREADS))
    for x, out in kept.values():
        np.testing.assert_allclose(out, _reference(x), rtol=1e-4, atol=1e-4)


def test_backward_after_another_threads_forward_raises():
    ex = _net().simple_bind(ax.cpu(), grad_req="write", data=(BATCH, IN))
    ex.copy_params_from(PARAMS)
    ex.forward(is_train=True, data=_inputs(0)[0])
    t = threading.Thread(target=lambda: ex.forward(is_train=True, data=_inputs(1)[0]))
    t.start()
    t.join()
    with pytest.raises(ax.AotexecError, match="another thread ran forward\\(is_train=True\\)"):
        ex.backward(out_grads=ax.nd.ones((BATCH, OUT)))
    ex.forward(is_train=True, data=_inputs(0)[0])         # this thread's own forward: fine again
    ex.backward(out_grads=ax.nd.ones((BATCH, OUT)))
    assert np.abs(ex.grad_dict["tfc2_bias"].asnumpy() - BATCH).max() < 1e-5
