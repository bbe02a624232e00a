"""Fuzzing artifacts: mutated manifests, symbol.json, params.npz (re-hashed, as a user re-saving
them would), and every hashed file mutated behind its sha256.  Each case ends in an AotexecError
or an artifact that runs correctly (inference and a training step give the unmutated results,
or, for changed parameters, what numpy computes from the parameters it loaded); never another
exception, a crash, a hang or a wrong answer.

Modules (.vmfb) and params.irpa are parsed by IREE's C code, so their sha-consistent mutations
load in a child process (tests/fuzz_worker.py): a crash there is a finding, not the end of the
suite.  Those are loaded and validated, not run: a .vmfb is machine code, and an artifact
whose manifest was rewritten to match changed code runs that code (the fuzz saw SIGSEGV and
SIGILL, and wrong results); the sha256 in the manifest is what keeps a changed file from running,
and mutations behind it are refused before IREE reads a byte."""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from aotexec.param_archive import archive_arrays, write_archive
from fuzzing import cpu_seconds, mutate_bytes, mutate_json_text
from test_fuzz import Findings

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MANIFEST_CASES = 300
SYMBOL_CASES = 150
PARAMS_CASES = 150
HASHED_CASES = 120
CHILD_CASES = 300
SHAPES = [{"data": (2, 784)}, {"data": (8, 784)}]
GRAD_REQ = {"data": "null", "softmax_label": "null", "fc1_weight": "write", "fc1_bias": "add", "fc2_weight": "write",
            "fc2_bias": "write", "fc3_weight": "write", "fc3_bias": "write"}
X = {b: np.random.RandomState(b).uniform(-1, 1, (b, 784)).astype(np.float32) for b in (2, 8)}
LABEL = {b: (np.arange(b) % 10).astype(np.float32) for b in (2, 8)}


def _run(art) -> dict:
    """Every variant's inference output and training step (outputs and gradients), by batch size."""
    out = {}
    for k in range(len(art.variants)):
        b = art.variant_shapes(k)["data"][0]
        out[("infer", b)] = [art.simple_bind(ax.cpu(), grad_req="null", variant=k).forward(data=X[b])[0].asnumpy()]
        if art.grad_req:
            ex = art.simple_bind(ax.cpu(), variant=k)
            ex.forward_backward(data=X[b], softmax_label=LABEL[b])
            out[("train", b)] = [ex.outputs[0].asnumpy()] + [g.asnumpy() for g in ex.grad_arrays if g is not None]
    return out


def _same(got: dict, ref: dict) -> None:
    for key, arrays in got.items():
        assert key in ref, f"ran a variant never compiled: {key}"
        for a, r in zip(arrays, ref[key], strict=True):
            assert np.allclose(a, r, rtol=1e-5, atol=1e-6), f"wrong answer for {key}"


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("fuzz") / "mlp"
    ax.compile(ax.sym.load(str(EXAMPLES / "mlp-symbol.json")), SHAPES, grad_req=GRAD_REQ,
               params=str(EXAMPLES / "mlp-params.npz"), out=out)
    return out, _run(ax.load(out))


def _linked_copy(src: Path, dst: Path) -> Path:
    """A copy sharing the files' storage (cheap); ``_write`` replaces a file without touching ``src``."""
    shutil.copytree(src, dst, copy_function=os.link)
    return dst


def _write(path: Path, data: bytes) -> None:
    path.unlink(missing_ok=True)
    path.write_bytes(data)


def _rehash(art: Path, manifest: dict, rec: dict) -> None:
    rec["sha256"] = hashlib.sha256((art / rec["file"]).read_bytes()).hexdigest()
    _write(art / "manifest.json", json.dumps(manifest).encode())


def _hashed_records(m: dict) -> list[dict]:
    return [rec for v in m["variants"] for rec in v["files"].values()] + [m["params"], m["params"]["irpa"]]


def test_fuzz_manifest(base, tmp_path):
    art, ref = base
    text = (art / "manifest.json").read_text()
    work = _linked_copy(art, tmp_path / "a")
    found, loaded = Findings(), 0
    t0 = cpu_seconds()
    for i in range(MANIFEST_CASES):
        _write(work / "manifest.json", mutate_json_text(random.Random(i), text).encode())

        def one() -> None:
            nonlocal loaded
            a = ax.load(work)
            loaded += 1
            _same(_run(a), ref)
        found.case(f"manifest case {i}", one)
    found.check()
    print(f"manifest: {MANIFEST_CASES} cases, {loaded} loaded and ran correctly, {cpu_seconds() - t0:.1f} s")
    assert 0 < loaded < MANIFEST_CASES and cpu_seconds() - t0 < 60


def test_fuzz_symbol_in_an_artifact(base, tmp_path):
    art, ref = base
    text = (art / "symbol.json").read_text()
    work = _linked_copy(art, tmp_path / "a")
    found = Findings()
    for i in range(SYMBOL_CASES):
        _write(work / "symbol.json", mutate_json_text(random.Random(10_000 + i), text).encode())
        found.case(f"symbol.json case {i}", lambda: _same(_run(ax.load(work)), ref))
    found.check()


def _numpy_mlp(params: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    h = x.astype(np.float64)
    for i in (1, 2, 3):
        h = h @ params[f"fc{i}_weight"].T.astype(np.float64) + params[f"fc{i}_bias"]
        h = np.maximum(h, 0) if i < 3 else h
    e = np.exp(h - h.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _mutate_arrays(rng: random.Random, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Array-level edits a byte flip cannot make (the .npz's CRC catches those): values, dtypes,
    shapes and keys."""
    arrays = dict(arrays)
    key = rng.choice(sorted(arrays))
    a = arrays[key].copy()
    kind = rng.randrange(6)
    if kind == 0 and a.size:
        a.reshape(-1)[rng.randrange(a.size)] = rng.choice([0.0, -1.0, 1e30, np.inf, np.nan, 3.5])
    elif kind == 1:
        a = a.astype(rng.choice([np.float64, np.float16, np.int32, np.uint8, np.bool_]))
    elif kind == 2:
        a = a.reshape(-1) if rng.random() < 0.5 else a[..., :max(a.shape[-1] - 1, 0)]
    elif kind == 3:
        del arrays[key]
        return arrays
    elif kind == 4:
        arrays[rng.choice(["aux:" + key.split(":")[1], key.upper(), "arg:nope", key.split(":")[1]])] = a
    else:
        a = a * rng.choice([0.5, -1.0, 2.0])
    arrays[key] = a
    return arrays


def test_fuzz_params_in_an_artifact(base, tmp_path):
    """params.npz changed and re-hashed (bytes, or arrays re-saved), with params.irpa re-made from
    it where it still reads (a user re-saving both): refused, or the forward pass numpy computes
    from what was loaded."""
    art, _ = base
    npz = (art / "params.npz").read_bytes()
    with np.load(art / "params.npz") as f:
        original = {k: f[k] for k in f.files}
    found, loaded = Findings(), 0
    for i in range(PARAMS_CASES):
        rng = random.Random(20_000 + i)
        work = _linked_copy(art, tmp_path / f"p{i}")
        m = json.loads((work / "manifest.json").read_text())
        if i % 2:
            _write(work / "params.npz", mutate_bytes(rng, npz))
        else:
            (work / "params.npz").unlink()
            np.savez(work / "params.npz", **_mutate_arrays(rng, original))
        try:
            with np.load(work / "params.npz", allow_pickle=False) as f:
                arrays = {k: f[k] for k in f.files}
            if i % 5:     # every 5th keeps the old archive: refused unless the arrays are unchanged
                _write(work / "params.irpa", b"")
                write_archive(work / "params.irpa", archive_arrays(arrays))
        except Exception:   # noqa: BLE001 (unreadable, or keys without a name: the archive stays as it was)
            pass
        m["params"]["irpa"]["sha256"] = hashlib.sha256((work / "params.irpa").read_bytes()).hexdigest()
        _rehash(work, m, m["params"])

        def one() -> None:
            nonlocal loaded
            a = ax.load(work)
            loaded += 1
            p = a.arg_params
            if all(np.isfinite(v).all() and np.abs(v).max(initial=0) < 1e3 for v in p.values()):
                got = a.simple_bind(ax.cpu(), grad_req="null", variant=1).forward(data=X[8])[0].asnumpy()
                np.testing.assert_allclose(got, _numpy_mlp(p, X[8]), rtol=1e-4, atol=1e-6)
        found.case(f"params case {i}", one)
        shutil.rmtree(work)
    found.check()
    print(f"params: {PARAMS_CASES} cases, {loaded} loaded and computed what numpy does")
    assert loaded > 0


def test_fuzz_files_behind_their_hash_never_reach_iree(base, tmp_path, monkeypatch):
    """A changed module, parameter file or archive whose hash was not updated is refused before
    IREE (or numpy) parses it."""
    art, _ = base
    m = json.loads((art / "manifest.json").read_text())
    files = [rec["file"] for rec in _hashed_records(m)]
    import aotexec.artifact as artifact

    def parsed(*args, **kwargs):
        raise AssertionError("a file was parsed before its sha256 was checked")
    monkeypatch.setattr(artifact, "check_module", parsed)
    monkeypatch.setattr(artifact, "read_params", parsed)
    for i in range(HASHED_CASES):
        rng = random.Random(30_000 + i)
        work = _linked_copy(art, tmp_path / f"h{i}")
        name = files[i % len(files)]
        data = (art / name).read_bytes()
        mutated = mutate_bytes(rng, data)
        if mutated == data:
            continue
        _write(work / name, mutated)
        with pytest.raises(ax.AotexecError, match=f"{name} .*does not match the sha256"):
            ax.load(work)
        shutil.rmtree(work)


def test_fuzz_modules_and_archive_in_a_child(base, tmp_path):
    """Re-hashed mutations of the modules and the archive: loading and validating them (IREE's
    flatbuffer and archive parsers) refuses or accepts each, in a child that must not die."""
    art, _ = base
    cases = tmp_path / "cases"
    cases.mkdir()
    np.save(cases / "input.npy", X[8])
    np.save(cases / "ref.npy", np.zeros(1))          # unused: the child loads, it does not run
    m0 = json.loads((art / "manifest.json").read_text())
    for i in range(CHILD_CASES):
        rng = random.Random(40_000 + i)
        work = _linked_copy(art, cases / f"case-{i:04d}")
        m = json.loads(json.dumps(m0))
        rec = rng.choice([r for r in _hashed_records(m) if r is not m["params"]])
        _write(work / rec["file"], mutate_bytes(rng, (art / rec["file"]).read_bytes()))
        _rehash(work, m, rec)
    outcomes: dict[str, int] = {}
    problems, start = [], 0
    t0 = cpu_seconds()
    while start < CHILD_CASES:
        try:
            proc = subprocess.run([sys.executable, str(Path(__file__).parent / "fuzz_worker.py"), str(cases),
                                   str(start)], capture_output=True, text=True, timeout=120, cwd=ROOT)
            stdout, code = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as e:
            stdout, code = (e.stdout or b"").decode(), "timeout (hang)"
        last = None
        for line in stdout.splitlines():
            kind, i = line.split()[:2]
            last = int(i) if kind == "start" else None
            if kind != "start":
                outcomes[kind] = outcomes.get(kind, 0) + 1
            if kind == "raised":
                problems.append(line)
        if code == 0:
            break
        stderr = proc.stderr[-600:] if code != "timeout (hang)" else ""
        problems.append(f"case {last}: the child ended with {code}: {stderr}")
        if last is None:
            break
        start = last + 1
    print(f"modules and archive: {CHILD_CASES} cases, {outcomes}, {cpu_seconds() - t0:.1f} s")
    assert not problems, "\n".join(problems[:20])
    assert outcomes.get("refused", 0) + outcomes.get("loaded", 0) == CHILD_CASES, outcomes
    assert cpu_seconds() - t0 < 60
