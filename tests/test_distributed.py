"""Data-parallel training under ``mpirun -np 2`` on loopback (TCP over lo): LeNet trained from
a runtime-only artifact on half batches equals one process on the full batch; MXNet-style
kvstore code gives the numbers of a one-process 'local' store; a rank that dies, stalls or
raises ends every rank with an error within a bounded time."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from test_artifact_cli import BLOCK_COMPILER

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("dist_worker.py")
EXAMPLE = ROOT / "examples" / "train_distributed.py"
MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not found: install openmpi-bin (bash .ci/run does)")
pytest.importorskip("mpi4py", reason="mpi4py not installed: pip install 'aotexec[distributed]'")

TIMEOUT = 5        # AOTEXEC_DIST_TIMEOUT for the ranks: a stalled peer is an error after 5 s


def _env() -> dict[str, str]:
    env = dict(os.environ, AOTEXEC_DIST_TIMEOUT=str(TIMEOUT))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _run(args: list[str], ranks: int = 0, limit: float = 60) -> tuple[subprocess.CompletedProcess, float]:
    """``python args`` alone (ranks=0) or under mpirun; its own session, so a hang is killed whole."""
    cmd = [sys.executable, *args]
    if ranks:
        cmd = [MPIRUN, "-np", str(ranks), "--oversubscribe", "--bind-to", "none",
               "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo",
               "-x", "PYTHONPATH", "-x", "AOTEXEC_DIST_TIMEOUT",
               *(["--allow-run-as-root"] if os.geteuid() == 0 else []), *cmd]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(args)} on {ranks} rank(s) hung for {limit} s:\n{out[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, ""), time.monotonic() - start


@pytest.fixture(scope="module")
def lenet_artifact(tmp_path_factory) -> Path:
    """The example's tiny LeNet, training entry points for shards of 8 (one rank) and 4 (two)."""
    sys.path.insert(0, str(EXAMPLE.parent))
    import train_distributed
    out = tmp_path_factory.mktemp("dist") / "lenet"
    train_distributed.compile_artifact(str(out), batch=8, tiny=True)
    return out


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_two_ranks_train_like_one_process_on_the_full_batch(lenet_artifact, tmp_path, optimizer):
    script = tmp_path / "runtime_only.py"     # the ranks run the example with the compiler blocked
    script.write_text(BLOCK_COMPILER + f"import runpy\nsys.argv = [{str(EXAMPLE)!r}] + sys.argv[1:]\n"
                      f"runpy.run_path({str(EXAMPLE)!r}, run_name='__main__')\n"
                      "assert 'iree.compiler' not in sys.modules\n")
    args = ["--artifact", str(lenet_artifact), "--tiny", "--steps", "4", "--batch", "8", "--optimizer", optimizer]
    one, _ = _run([str(script), *args, "--save", str(tmp_path / "one.npz")])
    assert one.returncode == 0, one.stdout[-3000:]
    two, _ = _run([str(script), *args, "--save", str(tmp_path / "two.npz")], ranks=2)
    assert two.returncode == 0, two.stdout[-3000:]
    assert "on 2 rank(s)" in two.stdout and "on 1 rank(s)" in one.stdout
    with np.load(tmp_path / "one.npz") as a, np.load(tmp_path / "two.npz") as b:
        assert sorted(a.files) == sorted(b.files) and len(a.files) == 8
        initial = 0.0
        for k in a.files:
            np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-6, err_msg=k)
            initial += float(np.abs(a[k]).sum())
    assert initial > 0


def test_kvstore_mxnet_style_code_gives_the_single_process_numbers(tmp_path):
    sim, _ = _run([str(WORKER), "kvstore", str(tmp_path / "local.npz"), "--simulate", "2"])
    assert sim.returncode == 0, sim.stdout[-3000:]
    dist, _ = _run([str(WORKER), "kvstore", str(tmp_path / "dist.npz")], ranks=2)
    assert dist.returncode == 0, dist.stdout[-3000:]
    with np.load(tmp_path / "local.npz") as want:
        for r in (0, 1):
            with np.load(tmp_path / f"dist.{r}.npz") as got:
                assert int(got["rank"]) == r
                for k in want.files:
                    if k != "rank":
                        np.testing.assert_array_equal(got[k], want[k], err_msg=f"rank {r} {k}")


@pytest.mark.parametrize("how,expect", [
    ("stall", f"rank 0 of 2: allreduce of 1 bucket(s), 24 bytes did not complete within {TIMEOUT} s"),
    ("kill", "rank 1 with PID"),        # mpirun reports the dead rank and ends the others at once
    ("raise", "ValueError: rank 1 broke"),
])
def test_a_failed_rank_is_an_error_on_every_rank(how, expect):
    res, seconds = _run([str(WORKER), "fail", how], ranks=2, limit=60)
    assert res.returncode != 0, res.stdout[-3000:]
    assert expect in res.stdout, res.stdout[-3000:]
    assert "finished" not in res.stdout
    assert seconds < TIMEOUT + 20
