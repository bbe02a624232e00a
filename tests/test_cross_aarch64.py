"""Cross-compiled artifacts for ARM: ``aotexec compile --cpu-triple aarch64-linux-gnu`` builds
modules an x86 machine loads and validates but does not run (one line says why); the aarch64
``iree-run-module`` (from the aarch64 iree-base-runtime wheel) runs them under qemu-user, with
the command ``aotexec export-run-cmd`` prints, and gives what the x86 Python runtime gives.
Skipped only where qemu-user cannot be installed (.ci/run installs it)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from aarch64_runtime import PACKAGES, qemu, runtime_tools, wrapper
from cli_runner import invoke
from iree_tools import export, outputs, run_snippet

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SYMBOL, PARAMS = EXAMPLES / "mlp-symbol.json", EXAMPLES / "mlp-params.npz"
TRIPLE = "aarch64-linux-gnu"

EMULATOR = qemu()
needs_qemu = pytest.mark.skipif(EMULATOR is None, reason=f"qemu-user for aarch64 is not installed (bash .ci/run "
                                                         f"installs it: apt-get install {PACKAGES})")


def _compile(out: Path, *args) -> Path:
    res = invoke(["compile", SYMBOL, "--shape", "data=8,784", "--params", PARAMS, "--cpu-triple", TRIPLE,
                  "--out", out, *args])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def arm(tmp_path_factory) -> Path:
    return _compile(tmp_path_factory.mktemp("arm") / "mlp", "--cpu", "cortex-a76", "--grad-req", "write")


@pytest.fixture(scope="module")
def run_module(tmp_path_factory) -> Path:
    """``iree-run-module`` for aarch64, run by qemu (a wrapper script, so the snippet runs as printed)."""
    if EMULATOR is None:
        pytest.skip("qemu-user for aarch64 is not installed")
    return wrapper(tmp_path_factory.mktemp("qemu"), EMULATOR, runtime_tools() / "iree-run-module")


@pytest.fixture
def work(arm, tmp_path) -> Path:
    shutil.copytree(arm, tmp_path / "mlp")
    np.save(tmp_path / "data.npy", np.load(EXAMPLES / "mlp-input.npy"))
    np.save(tmp_path / "softmax_label.npy", (np.arange(8) % 10).astype(np.float32))
    return tmp_path


def test_the_manifest_records_the_target_and_x86_refuses_to_run_it(arm):
    m = json.loads((arm / "manifest.json").read_text())
    cpu = m["targets"]["llvm-cpu"]["cpu"]
    assert cpu["triple"] == TRIPLE and cpu["cpu"] == "cortex-a76"
    art = ax.load(arm)                              # validates everything without running it
    with pytest.raises(ax.AotexecError, match=f"compiled for {TRIPLE}.*this machine is x86_64"):
        art.simple_bind(ax.cpu())


def test_host_cpu_is_not_a_cross_target(tmp_path):
    res = invoke(["compile", SYMBOL, "--shape", "data=8,784", "--cpu-triple", TRIPLE, "--cpu", "host",
                  "--out", tmp_path / "x"])
    assert res.exit_code == 2 and "--cpu host names this machine's CPU" in res.stderr, res.output
    assert not (tmp_path / "x").exists()


def _x86(work: Path):
    """The same model on this machine, by the Python runtime (the x86 reference)."""
    sym = ax.sym.load(str(SYMBOL))
    with np.load(PARAMS) as f:
        params = {k.split(":", 1)[1]: f[k] for k in f.files}
    ex = sym.simple_bind(ax.cpu(), grad_req={n: "null" if n in ("data", "softmax_label") else "write"
                                             for n in sym.list_arguments()}, data=(8, 784))
    ex.copy_params_from(params)
    return ex, {"data": np.load(work / "data.npy"), "softmax_label": (np.arange(8) % 10).astype(np.float32)}


@needs_qemu
def test_inference_under_qemu_matches_x86(work, run_module):
    snippet = export([work / "mlp", "--tool", run_module])
    assert "resident.vmfb" in snippet and "--task_worker_stack_size=" in snippet
    run_snippet(snippet, work)
    ex, feeds = _x86(work)
    want = ex.forward(data=feeds["data"])[0].asnumpy()
    np.testing.assert_allclose(np.load(work / "outputs" / "softmax_output.npy"), want, rtol=1e-5, atol=1e-6)


@needs_qemu
def test_training_step_under_qemu_matches_x86(work, run_module):
    run_snippet(export([work / "mlp", "-f", "train_step", "--params-dir", work / "params", "--tool", run_module]),
                work)
    got = outputs(work / "outputs")
    ex, feeds = _x86(work)
    ex.forward_backward(**feeds)
    np.testing.assert_allclose(got["softmax_output"], ex.outputs[0].asnumpy(), rtol=1e-5, atol=1e-6)
    for n, g in ex.grad_dict.items():
        if g is not None:
            np.testing.assert_allclose(got[f"grad.{n}"], g.asnumpy(), rtol=1e-4, atol=1e-5, err_msg=n)


@needs_qemu
def test_generic_aarch64_is_the_default_cpu(tmp_path, run_module):
    art = _compile(tmp_path / "generic")
    assert json.loads((art / "manifest.json").read_text())["targets"]["llvm-cpu"]["cpu"]["cpu"] == "generic"
    np.save(tmp_path / "data.npy", np.load(EXAMPLES / "mlp-input.npy"))
    run_snippet(export([art, "--tool", run_module]), tmp_path)
    ex, feeds = _x86(tmp_path)
    want = ex.forward(data=feeds["data"])[0].asnumpy()
    np.testing.assert_allclose(np.load(tmp_path / "outputs" / "softmax_output.npy"), want, rtol=1e-5, atol=1e-6)
