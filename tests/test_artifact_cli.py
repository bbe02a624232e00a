"""Artifacts end to end: CLI compile, runtime-only load and run, corrupt artifacts, compile cache."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from cli_runner import invoke

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def mlp_artifact(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("art") / "mlp"
    res = invoke(["compile", str(EXAMPLES / "mlp-symbol.json"), "--shape", "data=8,784",
                              "--params", str(EXAMPLES / "mlp-params.npz"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and "llvm-cpu" in res.output
    return out


def _reference_outputs() -> np.ndarray:
    """The same model bound directly (compiler present), as the reference for the artifact."""
    sym = ax.sym.load(str(EXAMPLES / "mlp-symbol.json"))
    with np.load(EXAMPLES / "mlp-params.npz", allow_pickle=False) as f:
        params = {k.split(":", 1)[1]: f[k] for k in f.files}
    x = np.load(EXAMPLES / "mlp-input.npy")
    ex = sym.simple_bind(ax.cpu(), grad_req="null", data=x.shape)
    ex.copy_params_from(params)
    out = ex.forward(data=x)[0].asnumpy()
    # independent numpy check of the same MLP
    h = x
    for i in (1, 2, 3):
        h = h @ params[f"fc{i}_weight"].T + params[f"fc{i}_bias"]
        if i < 3:
            h = np.maximum(h, 0)
    e = np.exp(h - h.max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    return out


# a runtime-only environment: importing the compiler fails (as on an edge install)
BLOCK_COMPILER = textwrap.dedent("""
    import sys, importlib.abc
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name == "iree.compiler" or name.startswith("iree.compiler.") or name == "typer":
                raise ImportError(f"{name} is blocked: runtime-only environment")
    sys.meta_path.insert(0, Block())
""")

RUNTIME_ONLY = BLOCK_COMPILER + textwrap.dedent("""
    import numpy as np
    import aotexec as ax
    art = ax.load(sys.argv[1])
    ex = art.simple_bind(ax.cpu())
    out = ex.forward(data=np.load(sys.argv[2]))[0].asnumpy()
    np.save(sys.argv[3], out)
    assert "iree.compiler" not in sys.modules
    # the runtime reaches no compile-side module (pipeline, compiler, lowering, backward passes)
    compile_side = sorted(m for m in sys.modules if m.startswith((
        "aotexec.pipeline", "aotexec.compiler", "aotexec.compile_cache", "aotexec.lowering", "aotexec.debug_str",
        "aotexec.passes.gradient", "aotexec.passes.mirror", "aotexec.passes.plan_memory", "aotexec.passes.layout")))
    assert not compile_side, compile_side
    print("runtime-only ok", art.targets)
""")


def test_runtime_only_environment_runs_the_artifact(mlp_artifact, tmp_path):
    script = tmp_path / "run.py"
    script.write_text(RUNTIME_ONLY)
    out = tmp_path / "out.npy"
    res = subprocess.run([sys.executable, str(script), str(mlp_artifact), str(EXAMPLES / "mlp-input.npy"), str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "runtime-only ok" in res.stdout
    np.testing.assert_allclose(np.load(out), _reference_outputs(), rtol=1e-6, atol=1e-7)


def test_cli_inspect_and_run(mlp_artifact, tmp_path):
    res = invoke(["inspect", str(mlp_artifact)])
    assert res.exit_code == 0, res.output
    assert "forward_infer" in res.output and "(8, 784)" in res.output and "llvm-cpu" in res.output
    res = invoke(["run", str(mlp_artifact), "--input", f"data={EXAMPLES / 'mlp-input.npy'}",
                              "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    np.testing.assert_allclose(np.load(tmp_path / "softmax_output.npy"), _reference_outputs(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("args,message", [
    (["run", "{art}", "--input", "data={bad_shape}"], "it has: variant 0: data=(8, 784)"),
    (["run", "{art}", "--input", "nope={good}"], "not an input"),
    (["run", "{art}", "--input", "data"], "NAME=VALUE"),
    (["compile", "{sym}", "--shape", "data=8,x"], "comma-separated integers"),
    (["compile", "{sym}", "--shape", "dta=8,784"], "not inputs of the symbol"),
    (["compile", "missing.json", "--shape", "data=8,784"], "does not exist"),
    (["inspect", "{tmp}"], "no manifest.json"),
])
def test_cli_bad_input_exits_2_with_one_line(mlp_artifact, tmp_path, args, message):
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((3, 784), np.float32))
    subst = {"art": str(mlp_artifact), "bad_shape": str(bad), "good": str(EXAMPLES / "mlp-input.npy"),
             "sym": str(EXAMPLES / "mlp-symbol.json"), "tmp": str(tmp_path)}
    res = invoke([a.format(**subst) for a in args])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "Traceback" not in res.output


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_corrupt_artifacts_are_refused(mlp_artifact, tmp_path):
    # truncated vmfb -> hash mismatch
    a = _copy(mlp_artifact, tmp_path / "trunc")
    vm = a / "llvm-cpu.vmfb"
    vm.write_bytes(vm.read_bytes()[:100])
    with pytest.raises(ax.AotexecError, match="does not match the sha256"):
        ax.load(a)
    # edited manifest (newer format)
    b = _copy(mlp_artifact, tmp_path / "newer")
    m = json.loads((b / "manifest.json").read_text())
    m["format_version"] = 99
    (b / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ax.AotexecError, match="newer than this aotexec supports"):
        ax.load(b)
    # manifest that is not JSON
    c = _copy(mlp_artifact, tmp_path / "garbled")
    (c / "manifest.json").write_text("{not json")
    with pytest.raises(ax.AotexecError, match="not valid JSON"):
        ax.load(c)
    # missing params file
    d = _copy(mlp_artifact, tmp_path / "noparams")
    (d / "params.npz").unlink()
    with pytest.raises(ax.AotexecError, match="missing params.npz"):
        ax.load(d)
    # IREE version mismatch
    e = _copy(mlp_artifact, tmp_path / "oldiree")
    m = json.loads((e / "manifest.json").read_text())
    m["iree_compiler_version"] = "2.9.0@abc"
    (e / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ax.AotexecError, match="built by IREE 2.9.0"):
        ax.load(e)
    # CPU features this machine lacks
    f = _copy(mlp_artifact, tmp_path / "cpu")
    m = json.loads((f / "manifest.json").read_text())
    m["targets"]["llvm-cpu"]["cpu"]["features"].append("avx10.9-fake")
    (f / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ax.AotexecError, match="avx10.9-fake"):
        ax.load(f).simple_bind(ax.cpu())


def test_artifact_refuses_other_shapes_and_targets(mlp_artifact):
    art = ax.load(mlp_artifact)
    with pytest.raises(ax.AotexecError, match="compiled for shapes"):
        art.simple_bind(ax.cpu(), data=(4, 784))
    with pytest.raises(ax.AotexecError, match="compiled for: llvm-cpu"):
        art.program(ax.vulkan())


def test_second_bind_hits_the_compile_cache():
    from aotexec import pipeline
    data = ax.sym.Variable("data")
    net = ax.sym.FullyConnected(data, num_hidden=3, name="cachefc")
    before = dict(pipeline.stats)
    ex1 = net.simple_bind(ax.cpu(), grad_req="null", data=(2, 7))
    ex1.forward()
    mid = dict(pipeline.stats)
    ex2 = net.simple_bind(ax.cpu(), grad_req="null", data=(2, 7))
    ex2.forward()
    after = dict(pipeline.stats)
    assert mid["misses"] == before["misses"] + 1
    assert after["hits"] == mid["hits"] + 1 and after["misses"] == mid["misses"]
    assert ex1._programs[("forward_infer",)].module is ex2._programs[("forward_infer",)].module


RUNTIME_ONLY_RESHAPE = BLOCK_COMPILER + textwrap.dedent("""
    import numpy as np
    import aotexec as ax
    art = ax.load(sys.argv[1])
    x = np.load(sys.argv[2])
    big = art.simple_bind(ax.cpu())                   # first variant: batch 8
    small = big.reshape(partial_shaping=True, data=(2, 784))   # second variant, no compiler needed
    out = small.forward(data=x[:2])[0].asnumpy()
    np.save(sys.argv[3], out)
    try:
        big.reshape(partial_shaping=True, data=(4, 784))
    except ax.AotexecError as e:
        print("refused:", e)
""")


def test_shape_variants_let_runtime_only_reshape(tmp_path):
    out = tmp_path / "mlp2"
    res = invoke(["compile", str(EXAMPLES / "mlp-symbol.json"), "--shape", "data=8,784",
                              "--shape", "data=2,784", "--params", str(EXAMPLES / "mlp-params.npz"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "variant 1" in res.output
    script = tmp_path / "run.py"
    script.write_text(RUNTIME_ONLY_RESHAPE)
    res = subprocess.run([sys.executable, str(script), str(out), str(EXAMPLES / "mlp-input.npy"),
                          str(tmp_path / "o.npy")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"), _reference_outputs()[:2], rtol=1e-5, atol=1e-6)
    assert "refused:" in res.stdout and "(8, 784)" in res.stdout and "(2, 784)" in res.stdout


RUNTIME_ONLY_MULTI = BLOCK_COMPILER + textwrap.dedent("""
    import numpy as np
    import aotexec as ax
    art = ax.load(sys.argv[1])
    x = np.load(sys.argv[2])
    for i, ctx in enumerate((ax.cpu(), ax.vulkan())):
        out = art.simple_bind(ctx).forward(data=x)[0].asnumpy()
        np.save(sys.argv[3] + f"{i}.npy", out)
    print("targets", art.targets)
""")


def test_multi_target_artifact_runs_on_cpu_and_vulkan_runtime_only(tmp_path):
    from contexts import VULKAN_MISSING
    if VULKAN_MISSING:
        pytest.skip(VULKAN_MISSING)
    out = tmp_path / "multi"
    res = invoke(["compile", str(EXAMPLES / "mlp-symbol.json"), "--shape", "data=8,784",
                              "--params", str(EXAMPLES / "mlp-params.npz"), "--target", "llvm-cpu",
                              "--target", "vulkan-spirv", "--target", "cuda", "--out", str(out)])
    assert res.exit_code == 0, res.output
    res = invoke(["inspect", str(out)])
    assert "targets: llvm-cpu, vulkan-spirv, cuda" in res.output and "arch=sm_80" in res.output
    script = tmp_path / "run.py"
    script.write_text(RUNTIME_ONLY_MULTI)
    res = subprocess.run([sys.executable, str(script), str(out), str(EXAMPLES / "mlp-input.npy"),
                          str(tmp_path / "o")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    ref = _reference_outputs()
    for i in range(2):
        np.testing.assert_allclose(np.load(tmp_path / f"o{i}.npy"), ref, rtol=1e-4, atol=1e-6)
    cpu_only = tmp_path / "cpu_only"
    assert invoke(["compile", str(EXAMPLES / "mlp-symbol.json"), "--shape", "data=8,784",
                               "--out", str(cpu_only)]).exit_code == 0
    with pytest.raises(ax.AotexecError, match="compiled for: llvm-cpu"):
        ax.load(cpu_only).simple_bind(ax.vulkan())
