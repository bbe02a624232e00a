"""Multi-variant artifacts everywhere: ``aotexec run`` / ``bench`` pick the variant the inputs
fit (or ``--variant``), ``Artifact.simple_bind`` binds any variant, ``Executor.reshape`` moves
between variants with MXNet's rules (the README's flags), and a shape with no variant is one
line listing the compiled ones.  Plus the runtime-only install: the CLI without the compiler."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from cli_runner import invoke
from test_artifact_cli import BLOCK_COMPILER

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SYMBOL = EXAMPLES / "mlp-symbol.json"


def _reference(x: np.ndarray) -> np.ndarray:
    with np.load(EXAMPLES / "mlp-params.npz", allow_pickle=False) as f:
        p = {k.split(":", 1)[1]: f[k] for k in f.files}
    h = x
    for i in (1, 2, 3):
        h = h @ p[f"fc{i}_weight"].T + p[f"fc{i}_bias"]
        h = np.maximum(h, 0) if i < 3 else h
    e = np.exp(h - h.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.fixture(scope="module")
def two(tmp_path_factory) -> Path:
    """The issue's artifact: batch 1 and batch 64, compiled by the CLI."""
    out = tmp_path_factory.mktemp("variants") / "mlp"
    res = invoke(["compile", SYMBOL, "--shape", "data=1,784", "--shape", "data=64,784",
                  "--params", EXAMPLES / "mlp-params.npz", "--out", out])
    assert res.exit_code == 0, res.output
    return out


@pytest.fixture(scope="module")
def x64(tmp_path_factory) -> tuple[Path, np.ndarray]:
    x = np.random.RandomState(0).uniform(0, 1, (64, 784)).astype(np.float32)
    path = tmp_path_factory.mktemp("inputs") / "x64.npy"
    np.save(path, x)
    return path, x


def test_run_picks_the_variant_the_inputs_fit(two, x64, tmp_path):
    path, x = x64
    res = invoke(["run", two, "--input", f"data={path}", "--out", tmp_path])
    assert res.exit_code == 0, res.output
    assert "variant 1: data=(64, 784)" in res.output
    np.testing.assert_allclose(np.load(tmp_path / "softmax_output.npy"), _reference(x), rtol=1e-5, atol=1e-6)
    one = tmp_path / "x1.npy"
    np.save(one, x[:1])
    res = invoke(["run", two, "--input", f"data={one}", "--out", tmp_path / "one"])
    assert res.exit_code == 0 and "variant 0: data=(1, 784)" in res.output
    np.testing.assert_allclose(np.load(tmp_path / "one" / "softmax_output.npy"), _reference(x[:1]), rtol=1e-5,
                               atol=1e-6)


def test_run_with_no_fitting_variant_lists_the_compiled_shapes(two, tmp_path):
    bad = tmp_path / "x3.npy"
    np.save(bad, np.zeros((3, 784), np.float32))
    res = invoke(["run", two, "--input", f"data={bad}"])
    assert res.exit_code == 2
    assert "no variant compiled for shapes data=(3, 784); it has: variant 0: data=(1, 784); variant 1: " \
           "data=(64, 784)" in res.output
    res = invoke(["run", two, "--input", f"data={bad}", "--variant", "1"])
    assert res.exit_code == 2 and "--variant 1 was compiled for data=(64, 784)" in res.output
    res = invoke(["run", two, "--zeros", "--variant", "5"])
    assert res.exit_code == 2 and "has 2 variant(s)" in res.output
    res = invoke(["run", two, "--zeros", "--variant", "1"])
    assert res.exit_code == 0 and "shape=(64, 10)" in res.output


def test_bench_times_the_variant_asked_for(two):
    for args, k in ((["--variant", "1"], 1), (["--shape", "data=64,784"], 1), ([], 0)):
        res = invoke(["bench", two, "--iters", "2", "--warmup", "0", "--json", *args])
        assert res.exit_code == 0, res.output
        report = json.loads(res.stdout)
        assert report["variant"] == k and report["shapes"]["data"] == ([1, 784], [64, 784])[k]
    res = invoke(["bench", two, "--shape", "data=3,784", "--iters", "1"])
    assert res.exit_code == 2 and "it has: variant 0" in res.output


def test_simple_bind_any_variant(two, x64):
    _, x = x64
    art = ax.load(two)
    for ex in (art.simple_bind(ax.cpu(), variant=1), art.simple_bind(ax.cpu(), data=(64, 784))):
        np.testing.assert_allclose(ex.forward(data=x)[0].asnumpy(), _reference(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(ax.AotexecError, match=r"it has: variant 0: data=\(1, 784\); variant 1: data=\(64, 784\)"):
        art.simple_bind(ax.cpu(), data=(3, 784))
    with pytest.raises(ax.AotexecError, match="variant 0 was compiled for data=\\(1, 784\\)"):
        art.simple_bind(ax.cpu(), variant=0, data=(64, 784))


def test_reshape_between_variants_follows_mxnet(two, x64):
    """The README's rules: growing needs allow_up_sizing=True, and softmax_label (not given,
    inferred from data) changing shape needs partial_shaping=True or its own shape."""
    _, x = x64
    small = ax.load(two).simple_bind(ax.cpu())
    with pytest.raises(ax.AotexecError, match="New shape of arg: data is larger.*set allow_up_sizing=True"):
        small.reshape(data=(64, 784))        # MXNet checks the arguments in order: data first
    with pytest.raises(ax.AotexecError, match="softmax_label changed.*set partial_shaping=True"):
        small.reshape(allow_up_sizing=True, data=(64, 784))
    with pytest.raises(ax.AotexecError, match="allow_up_sizing"):
        small.reshape(partial_shaping=True, data=(64, 784))
    for big in (small.reshape(partial_shaping=True, allow_up_sizing=True, data=(64, 784)),
                small.reshape(allow_up_sizing=True, data=(64, 784), softmax_label=(64,))):
        np.testing.assert_allclose(big.forward(data=x)[0].asnumpy(), _reference(x), rtol=1e-5, atol=1e-6)
    down = big.reshape(partial_shaping=True, data=(1, 784))       # shrinking: views, no allow_up_sizing
    np.testing.assert_allclose(down.forward(data=x[:1])[0].asnumpy(), _reference(x[:1]), rtol=1e-5, atol=1e-6)
    with pytest.raises(ax.AotexecError, match="no variant compiled for shapes data=\\(8, 784\\); it has"):
        big.reshape(partial_shaping=True, data=(8, 784))


RUNTIME_ONLY_CLI = BLOCK_COMPILER + textwrap.dedent("""
    from aotexec.cli.main import main
    code = main(sys.argv[1:])
    assert "iree.compiler" not in sys.modules
    sys.exit(code)
""")


def _runtime_only(tmp_path: Path, *args) -> subprocess.CompletedProcess:
    script = tmp_path / "cli.py"
    script.write_text(RUNTIME_ONLY_CLI)
    return subprocess.run([sys.executable, str(script), *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          timeout=180)


def test_runtime_only_cli_runs_inspects_and_benches(two, x64, tmp_path):
    path, x = x64
    res = _runtime_only(tmp_path, "inspect", two)
    assert res.returncode == 0, res.stderr
    assert "variant 1: data=(64, 784)" in res.stdout
    res = _runtime_only(tmp_path, "run", two, "--input", f"data={path}", "--out", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o" / "softmax_output.npy"), _reference(x), rtol=1e-5, atol=1e-6)
    res = _runtime_only(tmp_path, "bench", two, "--variant", "1", "--iters", "2", "--warmup", "0")
    assert res.returncode == 0, res.stderr
    assert "infer" in res.stdout and "memory plan" in res.stdout
    for args in (("compile", SYMBOL, "--shape", "data=1,784", "--out", tmp_path / "c"),
                 ("bench", SYMBOL, "--shape", "data=1,784")):
        res = _runtime_only(tmp_path, *args)
        assert res.returncode == 2 and "install aotexec[compiler]" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


RUNTIME_ONLY_BIND = BLOCK_COMPILER + textwrap.dedent("""
    import aotexec as ax
    net = ax.sym.FullyConnected(ax.sym.Variable("data"), num_hidden=3, name="fc")
    try:
        net.simple_bind(ax.cpu(), grad_req="null", data=(2, 4))
    except ax.AotexecError as e:
        print("refused:", e)
""")


def test_runtime_only_bind_of_a_symbol_says_install_the_compiler(tmp_path):
    script = tmp_path / "bind.py"
    script.write_text(RUNTIME_ONLY_BIND)
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 0, res.stderr
    line = res.stdout.strip()
    assert line.startswith("refused: binding a symbol") and "install aotexec[compiler]" in line
    assert len(res.stdout.strip().splitlines()) == 1


def test_the_cli_lives_under_aotexec():
    assert not (ROOT / "cli").exists()
    assert 'aotexec = "aotexec.cli.main:main"' in (ROOT / "pyproject.toml").read_text()
    res = subprocess.run([sys.executable, "-m", "aotexec.cli", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0 and "compile" in res.stdout and "bench" in res.stdout
