"""Artifacts run by IREE's own ``iree-run-module`` binary, without Python: the command
``aotexec export-run-cmd`` prints (run by bash as printed) gives what the Python runtime gives,
for inference (parameters from params.irpa), a fused training step and forward_train ->
backward (residuals passed as files).  The manifest's calling convention and params.irpa are
checked at load like every other part."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from aotexec.options import WORKER_STACK_BYTES
from cli_runner import invoke
from iree_tools import export, outputs, run_snippet, tool

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RUN = tool("iree-run-module")


@pytest.fixture(scope="module")
def art(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("irm") / "mlp"
    res = invoke(["compile", EXAMPLES / "mlp-symbol.json", "--shape", "data=8,784", "--params",
                  EXAMPLES / "mlp-params.npz", "--grad-req", "write", "--out", out])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture
def work(art, tmp_path) -> Path:
    """A folder with the inputs as .npy files and the artifact beside them (relative paths)."""
    shutil.copytree(art, tmp_path / "mlp")
    np.save(tmp_path / "data.npy", np.load(EXAMPLES / "mlp-input.npy"))
    np.save(tmp_path / "softmax_label.npy", (np.arange(8) % 10).astype(np.float32))
    return tmp_path


def test_inference_command_matches_python(work):
    res = invoke(["export-run-cmd", work / "mlp", "--tool", RUN])
    assert res.exit_code == 0, res.output
    snippet = res.stdout
    assert f"--task_worker_stack_size={WORKER_STACK_BYTES}" in snippet   # 256 KiB dispatch stacks
    assert "--parameters=aotexec=" in snippet and "params.irpa" in snippet and "resident.vmfb" in snippet
    assert "--input=@data.npy" in snippet and "--output=@outputs/softmax_output.npy" in snippet
    assert "EXEC @forward_infer" in run_snippet(snippet, work)
    got = np.load(work / "outputs" / "softmax_output.npy")
    ex = ax.load(work / "mlp").simple_bind(ax.cpu(), grad_req="null")
    want = ex.forward(data=np.load(work / "data.npy"))[0].asnumpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_training_step_command_matches_python(work):
    snippet = export([work / "mlp", "-f", "train_step", "--params-dir", work / "params", "--tool", RUN])
    assert (work / "params" / "fc1_weight.npy").is_file()       # the parameter inputs, from the artifact
    run_snippet(snippet, work)
    got = outputs(work / "outputs")
    ex = ax.load(work / "mlp").simple_bind(ax.cpu())
    ex.forward_backward(data=np.load(work / "data.npy"), softmax_label=np.load(work / "softmax_label.npy"))
    assert set(got) == {"softmax_output"} | {f"grad.{n}" for n in ex.grad_dict if ex.grad_dict[n] is not None}
    np.testing.assert_allclose(got["softmax_output"], ex.outputs[0].asnumpy(), rtol=1e-5, atol=1e-7)
    for n, g in ex.grad_dict.items():
        if g is not None:
            np.testing.assert_allclose(got[f"grad.{n}"], g.asnumpy(), rtol=1e-4, atol=1e-6, err_msg=n)


def test_forward_train_then_backward_pass_residuals_as_files(work):
    """The two-call form: forward_train writes its residuals, backward reads them back."""
    run_snippet(export([work / "mlp", "-f", "forward_train", "--params-dir", work / "params", "--output-dir", "fwd",
                        "--tool", RUN]), work)
    fwd = outputs(work / "fwd")
    assert any(k.startswith("residual.") for k in fwd)
    residuals = [f"--input=residual.{k[9:]}=fwd/{k}.npy" for k in fwd if k.startswith("residual.")]
    run_snippet(export([work / "mlp", "-f", "backward", "--params-dir", work / "params", "--output-dir", "bwd",
                        "--tool", RUN, *residuals]), work)
    got = outputs(work / "bwd")
    ex = ax.load(work / "mlp").simple_bind(ax.cpu())
    ex.forward(is_train=True, data=np.load(work / "data.npy"), softmax_label=np.load(work / "softmax_label.npy"))
    ex.backward()
    np.testing.assert_allclose(fwd["softmax_output"], ex.outputs[0].asnumpy(), rtol=1e-5, atol=1e-7)
    for n, g in ex.grad_dict.items():
        if g is not None:
            np.testing.assert_allclose(got[f"grad.{n}"], g.asnumpy(), rtol=1e-4, atol=1e-6, err_msg=n)


def test_non_resident_inference_takes_the_parameters_as_files(work):
    run_snippet(export([work / "mlp", "--no-resident", "--params-dir", work / "p", "--tool", RUN]), work)
    ex = ax.load(work / "mlp").simple_bind(ax.cpu(), grad_req="null")
    want = ex.forward(data=np.load(work / "data.npy"))[0].asnumpy()
    np.testing.assert_allclose(np.load(work / "outputs" / "softmax_output.npy"), want, rtol=1e-5, atol=1e-7)


def test_parameter_archive_is_keyed_by_variable_name(art):
    import subprocess
    dump = subprocess.run([tool("iree-dump-parameters"), f"--parameters=aotexec={art / 'params.irpa'}"],
                          capture_output=True, text=True, timeout=60)
    assert dump.returncode == 0, dump.stderr
    with np.load(art / "params.npz") as f:
        names = [k.split(":", 1)[1] for k in f.files]
    assert all(n in dump.stdout for n in names), dump.stdout


@pytest.mark.parametrize("args, message", [
    (["-f", "train_step"], "--params-dir"),
    (["-f", "no_such"], "has no function 'no_such'"),
    (["--input", "nope=x.npy"], "takes no input"),
    (["--target", "cuda"], "has no cuda module"),
    (["--variant", "3"], "has 1 variant"),
])
def test_export_bad_input_is_one_line(art, args, message):
    res = invoke(["export-run-cmd", art, *args])
    assert res.exit_code == 2 and message in res.stderr and res.stderr.count("\n") == 1, res.output


def _rehash(a: Path, rec: dict) -> None:
    rec["sha256"] = hashlib.sha256((a / rec["file"]).read_bytes()).hexdigest()


def test_recorded_calling_convention_is_checked_against_the_module(art, tmp_path):
    a = Path(shutil.copytree(art, tmp_path / "a"))
    m = json.loads((a / "manifest.json").read_text())
    for arg in m["variants"][0]["files"]["llvm-cpu-resident"]["abi"]["forward_infer"]:
        if arg["kind"] == "transients":
            arg["bytes"] //= 8      # too small an arena corrupts memory in iree-run-module
    (a / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ax.AotexecError, match="recorded calling convention"):
        ax.load(a)


def test_parameter_archive_must_match_the_npz(art, tmp_path):
    from aotexec.param_archive import write_archive
    a = Path(shutil.copytree(art, tmp_path / "a"))
    with np.load(a / "params.npz") as f:
        arrays = {k.split(":", 1)[1]: f[k] for k in f.files}
    m = json.loads((a / "manifest.json").read_text())
    arrays["fc1_bias"] = arrays["fc1_bias"] + 1
    write_archive(a / "params.irpa", arrays)
    _rehash(a, m["params"]["irpa"])
    (a / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ax.AotexecError, match="fc1_bias differs from its value in the .npz"):
        ax.load(a)
    arrays.pop("fc1_bias")
    write_archive(a / "params.irpa", arrays)
    _rehash(a, m["params"]["irpa"])
    (a / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ax.AotexecError, match="params.irpa holds"):
        ax.load(a)
    (a / "params.irpa").write_bytes(b"not an archive")
    _rehash(a, m["params"]["irpa"])
    (a / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ax.AotexecError, match="not an IREE parameter archive"):
        ax.load(a)
