"""Past the sha256: an artifact whose parts disagree (re-saved parameters, an edited manifest,
a crafted folder) is refused at load with one line, and so is bad input at compile (params of
the wrong kind, shape or dtype, an unknown CPU) - before anything compiles or is written."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from cli_runner import invoke

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SYMBOL = EXAMPLES / "mlp-symbol.json"
PARAMS = EXAMPLES / "mlp-params.npz"


def _params() -> dict[str, np.ndarray]:
    with np.load(PARAMS, allow_pickle=False) as f:
        return {k: f[k] for k in f.files}


@pytest.fixture(scope="module")
def art_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("valid") / "mlp"
    ax.compile(ax.sym.load(str(SYMBOL)), [{"data": (2, 784)}, {"data": (8, 784)}], params=str(PARAMS), out=out)
    return out


@pytest.fixture
def copy(art_dir, tmp_path):
    def make(name: str = "a") -> Path:
        return Path(shutil.copytree(art_dir, tmp_path / name))
    return make


def _manifest(a: Path) -> dict:
    return json.loads((a / "manifest.json").read_text())


def _write_manifest(a: Path, m: dict) -> None:
    (a / "manifest.json").write_text(json.dumps(m))


def _resave_params(a: Path, arrays: dict, raw: bytes | None = None) -> None:
    """A user re-saving params.npz and fixing up the manifest's hash (what the sha256 cannot catch)."""
    path = a / "params.npz"
    if raw is None:
        np.savez(path, **arrays)
    else:
        path.write_bytes(raw)
    m = _manifest(a)
    m["params"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    m["params"]["names"] = sorted(arrays)
    _write_manifest(a, m)


def _refused(a: Path, pattern: str) -> str:
    with pytest.raises(ax.AotexecError, match=pattern) as e:
        ax.load(a)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"invalid artifact {a}"), msg
    return msg


# ------------------------------------------------------------------ parameters
def test_params_missing_a_key_are_refused_not_zeros(copy):
    a = copy()
    p = _params()
    del p["arg:fc3_bias"]
    _resave_params(a, p)
    _refused(a, "params.npz lacks fc3_bias")


def test_params_of_the_wrong_shape_or_dtype_are_refused(copy):
    a = copy("shape")
    p = _params()
    p["arg:fc1_weight"] = p["arg:fc1_weight"].T.copy()
    _resave_params(a, p)
    _refused(a, r"fc1_weight has shape \(784, 128\); the symbol needs \(128, 784\)")
    for dtype in ("float64", "int32"):
        b = copy(dtype)
        p = _params()
        p["arg:fc1_bias"] = p["arg:fc1_bias"].astype(dtype)
        _resave_params(b, p)
        _refused(b, f"fc1_bias is {dtype}; the symbol needs float32")


def test_garbage_or_mislabelled_params_file_is_refused(copy):
    a = copy("garbage")
    _resave_params(a, _params(), raw=b"this is not a zip file at all")
    _refused(a, "not a parameter file")
    b = copy("names")
    p = _params()
    np.savez(b / "params.npz", **p)
    m = _manifest(b)
    m["params"]["sha256"] = hashlib.sha256((b / "params.npz").read_bytes()).hexdigest()
    m["params"]["names"] = sorted(p)[:-1]
    _write_manifest(b, m)
    _refused(b, "the manifest lists")
    c = copy("kind")
    p = _params()
    p["aux:fc1_bias"] = p.pop("arg:fc1_bias")
    _resave_params(c, p)
    _refused(c, "'aux:fc1_bias' is not an argument")


# ------------------------------------------------------------------ the manifest
def test_paths_outside_the_artifact_folder_are_refused(copy, tmp_path):
    a = copy("dotdot")
    m = _manifest(a)
    m["variants"][0]["files"]["llvm-cpu"]["file"] = "../x.vmfb"
    _write_manifest(a, m)
    _refused(a, "must be a plain file name inside the artifact folder")
    b = copy("abs")
    m = _manifest(b)
    m["symbol"] = "/etc/passwd"
    _write_manifest(b, m)
    _refused(b, "must be a plain file name")
    c = copy("link")
    outside = tmp_path / "outside.vmfb"
    shutil.copy(c / "llvm-cpu.vmfb", outside)
    (c / "llvm-cpu.vmfb").unlink()
    os.symlink(outside, c / "llvm-cpu.vmfb")
    _refused(c, "leads outside the artifact folder")


@pytest.mark.parametrize("edit,pattern", [
    (lambda m: m.pop("arg_names"), "lacks 'arg_names'"),
    (lambda m: m.pop("inputs"), "lacks 'inputs'"),
    (lambda m: m.__setitem__("output_names", ["bogus_output"]), "output_names"),
    (lambda m: m.__setitem__("arg_names", m["arg_names"][::-1]), "arg_names"),
    (lambda m: m.__setitem__("inputs", ["nope"]), "inputs"),
    (lambda m: m.__setitem__("mirror", "sometimes"), "mirror"),
    (lambda m: m["targets"].__setitem__("tpu", {}), "unknown target 'tpu'"),
    (lambda m: m.__setitem__("format_version", 3), "earlier aotexec"),
    (lambda m: m["variants"][1]["dtypes"].__setitem__("data", "float16"), "differs from variant 0"),
    (lambda m: m["variants"][0]["shapes"].__setitem__("fc1_weight", [3, 784]), "do not fit the symbol"),
    (lambda m: m["variants"][0]["shapes"].pop("softmax_label"), "gives shapes for"),
    (lambda m: m["variants"][0]["entry_points"]["llvm-cpu"]["forward_infer"]["inputs"][0].__setitem__("shape", [4, 784]),
     r"variable data is \(4, 784\) float32 in the manifest; the symbol gives \(2, 784\)"),
    (lambda m: m["variants"][0]["entry_points"]["llvm-cpu"]["forward_infer"]["outputs"][0].__setitem__("dtype", "float16"),
     "output softmax_output"),
    (lambda m: m["variants"][0]["entry_points"]["llvm-cpu"]["forward_infer"]["inputs"].pop(), "are not the symbol's"),
    (lambda m: m["variants"][0]["entry_points"]["llvm-cpu"].pop("forward_infer"), "lacks the entry points"),
    (lambda m: m["variants"][0].__setitem__("grad_req", {"fc1_weight": "write"}), "grad_req must name exactly"),
    (lambda m: m["variants"][0]["dtypes"].__setitem__("data", "object"), "aotexec's dtypes are"),
    (lambda m: m["variants"][0]["entry_points"]["llvm-cpu"]["forward_infer"]["outputs"][0].__setitem__("dtype", "complex128"),
     "dtype 'complex128'"),
    (lambda m: m["targets"]["llvm-cpu"]["cpu"].__setitem__("cpu", 7), "malformed llvm-cpu CPU record"),
    (lambda m: m["variants"][0]["files"]["llvm-cpu"].__setitem__("file", None), "must be a plain file name"),
])
def test_edited_manifest_fields_are_checked_against_the_symbol(copy, edit, pattern):
    a = copy()
    m = _manifest(a)
    edit(m)
    _write_manifest(a, m)
    _refused(a, pattern)


def test_consistently_edited_shapes_are_caught_by_the_modules_declarations(copy):
    """Variant 0's shapes and ports rewritten from batch 2 to 4 agree with the symbol, but not
    with what IREE compiled: the vmfb's ABI declaration is the last link of the chain."""
    a = copy()
    m = _manifest(a)
    v = m["variants"][0]
    v["shapes"]["data"], v["shapes"]["softmax_label"] = [4, 784], [4]
    for spec in (v["entry_points"]["llvm-cpu"], v["resident_entry_points"]):
        for port in spec["forward_infer"]["inputs"] + spec["forward_infer"]["outputs"]:
            if port["shape"] and port["shape"][0] == 2:
                port["shape"][0] = 4
    _write_manifest(a, m)
    _refused(a, r"was compiled with .*tensor<2x784xf32>.*tensor<4x784xf32>")


def test_not_an_artifact(tmp_path, art_dir):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ax.AotexecError, match="it is a file, not an artifact directory"):
        ax.load(f)
    res = invoke(["inspect", str(f)])
    assert res.exit_code == 2 and "it is a file" in res.output and "Traceback" not in res.output


# ------------------------------------------------------------------ compile time
def _no_leftovers(parent: Path, name: str) -> None:
    assert not (parent / name).exists()
    assert not [p.name for p in parent.iterdir() if p.name.startswith(f".{name}.")]


@pytest.mark.parametrize("make,message", [
    (lambda d: np.save(d / "p.npy", np.zeros(3)) or d / "p.npy", "single-array numpy .npy file"),
    (lambda d: (d / "p.npz").write_bytes(b"garbage") and d / "p.npz", "not a parameter file"),
    (lambda d: np.savez(d / "p.npz", **{k: v for k, v in _params().items() if "fc3" not in k}) or d / "p.npz",
     "params lack fc3_weight, fc3_bias"),
    (lambda d: np.savez(d / "p.npz", **{k: v.T for k, v in _params().items()}) or d / "p.npz",
     r"fc1_weight has shape \(784, 128\)"),
    (lambda d: np.savez(d / "p.npz", **{k: v.astype("float64") for k, v in _params().items()}) or d / "p.npz",
     "is float64; the symbol needs float32.*--cast-params"),
    (lambda d: np.savez(d / "p.npz", nope=np.zeros(3)) or d / "p.npz", "'nope' is not an argument"),
])
def test_bad_params_fail_compile_before_anything_is_written(tmp_path, make, message):
    params = make(tmp_path)
    out = tmp_path / "out" / "art"
    res = invoke(["compile", str(SYMBOL), "--shape", "data=2,784", "--params", str(params), "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert re.search(message, res.output), res.output
    assert "compiling" not in res.output and "Traceback" not in res.output
    assert not out.exists()


def test_cast_params_is_explicit(tmp_path):
    p = tmp_path / "p64.npz"
    np.savez(p, **{k: v.astype("float64") for k, v in _params().items()})
    out = tmp_path / "cast"
    res = invoke(["compile", str(SYMBOL), "--shape", "data=2,784", "--params", str(p), "--cast-params", "--out", str(out)])
    assert res.exit_code == 0, res.output
    art = ax.load(out)
    assert art.arg_params["fc1_weight"].dtype == np.float32
    np.testing.assert_array_equal(art.arg_params["fc1_weight"], _params()["arg:fc1_weight"])
    with pytest.raises(ax.AotexecError, match="complex64; the symbol needs float32"):   # within the kind only
        ax.compile(ax.sym.load(str(SYMBOL)), {"data": (2, 784)}, out=tmp_path / "x", cast_params=True,
                   params={k: (v.astype("float64") if "fc1_bias" not in k else v.astype(np.complex64))
                           for k, v in _params().items()})
    assert not (tmp_path / "x").exists()


def test_failed_compile_leaves_no_half_artifact(tmp_path, monkeypatch, art_dir):
    from aotexec import pipeline
    real = pipeline.compile_program
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:        # after variant 0's modules are written
            raise ax.AotexecError("simulated compiler failure")
        return real(*args, **kwargs)
    monkeypatch.setattr(pipeline, "compile_program", flaky)
    sym = ax.sym.load(str(SYMBOL))
    with pytest.raises(ax.AotexecError, match="simulated"):
        ax.compile(sym, [{"data": (2, 784)}, {"data": (8, 784)}], out=tmp_path / "new")
    _no_leftovers(tmp_path, "new")
    # replacing an existing artifact: a failure keeps the old one whole
    old = Path(shutil.copytree(art_dir, tmp_path / "old"))
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    calls.clear()
    with pytest.raises(ax.AotexecError, match="simulated"):
        ax.compile(sym, [{"data": (2, 784)}, {"data": (8, 784)}], out=old)
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".old.")]
    ax.load(old)


def test_compile_refuses_to_overwrite_a_folder_that_is_not_an_artifact(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ax.AotexecError, match="is not an aotexec artifact"):
        ax.compile(ax.sym.load(str(SYMBOL)), {"data": (2, 784)}, out=out)
    assert (out / "notes.txt").read_text() == "keep me"


def test_unknown_cpu_is_one_line_not_llvm_abort(tmp_path):
    # a child process: LLVM aborts the process it runs in on an unknown CPU name
    out = tmp_path / "p9"
    res = subprocess.run([sys.executable, "-m", "aotexec.cli", "compile", str(SYMBOL), "--shape", "data=1,784",
                          "--cpu", "pentium9", "--out", str(out)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300)
    assert res.returncode == 2, res.stderr
    assert "unknown CPU 'pentium9'" in res.stderr
    assert "LLVM ERROR" not in res.stderr and "List of accepted CPUs" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    _no_leftovers(tmp_path, "p9")


# ------------------------------------------------------------------ other bad input
DUPLICATE_JSON = json.dumps({
    "nodes": [{"op": "null", "name": "x", "inputs": []}, {"op": "null", "name": "x", "inputs": []},
              {"op": "elemwise_add", "name": "add0", "inputs": [[0, 0, 0], [1, 0, 0]]}],
    "arg_nodes": [0, 1], "node_row_ptr": [0, 1, 2, 3], "heads": [[2, 0, 0]]})


def test_duplicate_argument_names_are_refused(tmp_path):
    with pytest.raises(ax.AotexecError, match="two variables named 'x'"):
        ax.sym.load_json(DUPLICATE_JSON)
    f = tmp_path / "dup-symbol.json"
    f.write_text(DUPLICATE_JSON)
    res = invoke(["compile", str(f), "--shape", "x=2,3", "--out", str(tmp_path / "dup")])
    assert res.exit_code == 2 and "two variables named 'x'" in res.output
    net = ax.sym.Variable("x") + ax.sym.Variable("x")      # built in Python: refused at bind
    with pytest.raises(ax.AotexecError, match="Duplicate names detected"):
        net.simple_bind(ax.cpu(), grad_req="null", x=(2, 3))


def test_resource_exhaustion_is_one_line_with_the_size():
    net = ax.sym.FullyConnected(ax.sym.Variable("data"), num_hidden=int(1e11), name="huge")
    with pytest.raises(ax.AotexecError, match=r"out of memory on cpu\(0\): cannot allocate 313,600,000,000,000 "
                                              r"bytes \(285.2 TiB\)") as e:
        net.simple_bind(ax.cpu(), grad_req="null", data=(1, 784))
    assert "\n" not in str(e.value) and "RESOURCE_EXHAUSTED" in str(e.value)


def test_run_needs_every_data_input_or_zeros(art_dir, tmp_path):
    res = invoke(["run", str(art_dir)])
    assert res.exit_code == 2 and "no --input for data" in res.output and "--zeros" in res.output
    res = invoke(["run", str(art_dir), "--zeros"])
    assert res.exit_code == 0 and "softmax_output: shape=(2, 10)" in res.output
    npz = tmp_path / "x.npz"
    np.savez(npz, data=np.zeros((2, 784), np.float32))
    res = invoke(["run", str(art_dir), "--input", f"data={npz}"])
    assert res.exit_code == 2 and "is an .npz archive" in res.output
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"junk")
    res = invoke(["run", str(art_dir), "--input", f"data={junk}"])
    assert res.exit_code == 2 and "is not a numpy .npy file" in res.output
    res = invoke(["run", str(art_dir), "--input", f"data={tmp_path / 'missing.npy'}"])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_copy_params_from_checks_shapes(art_dir):
    ex = ax.load(art_dir).simple_bind(ax.cpu())
    with pytest.raises(ax.AotexecError, match="operands shape mismatch.*fc1_bias of shape \\(3,\\)"):
        ex.copy_params_from({"fc1_bias": np.zeros(3, np.float32)})
