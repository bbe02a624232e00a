"""Training from an artifact: forward_train / backward / train_step compiled ahead of time and
run by the runtime alone (no compiler), checked against MXNet 1.9.1's golden training step."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import aotexec as ax
from golden import all_cases
from test_artifact_cli import BLOCK_COMPILER, EXAMPLES, ROOT
from cli_runner import invoke

CASE = next(c for c in all_cases() if c.id == "net_resblock_train")   # conv, BatchNorm (aux updates), FC

RUNTIME_ONLY_TRAIN = BLOCK_COMPILER + textwrap.dedent("""
    import json
    import numpy as np
    import aotexec as ax
    art = ax.load(sys.argv[1])
    meta = json.loads(open(sys.argv[2]).read())
    with np.load(sys.argv[3], allow_pickle=False) as f:
        inp = {k: f[k] for k in f.files}
    results = {}
    for fused in (False, True):
        ex = art.simple_bind(ax.cpu(), **{n: tuple(s) for n, s in meta["shapes"].items() if n in meta["arg_names"]})
        for n in meta["arg_names"]:
            ex.arg_dict[n][:] = inp[n]
        for n in meta["aux_names"]:
            ex.aux_dict[n][:] = inp[n]
        if fused:
            outs = ex.forward_backward()
        else:
            outs = ex.forward(is_train=True)
            ex.backward()
        tag = "fused_" if fused else ""
        results[tag + "output_0"] = outs[0].asnumpy()
        for n, g in ex.grad_dict.items():
            if g is not None:
                results[tag + "grad_" + n] = g.asnumpy()
        for n, a in ex.aux_dict.items():
            results[tag + "aux_" + n] = a.asnumpy()
    np.savez(sys.argv[4], **results)
    assert "iree.compiler" not in sys.modules
    print("runtime-only training ok")
""")


@pytest.fixture(scope="module")
def resblock_artifact(tmp_path_factory):
    meta = CASE.meta
    sym = ax.sym.load_json(CASE.symbol_json)
    shapes = {n: tuple(s) for n, s in meta["shapes"].items() if n in meta["arg_names"]}
    out = tmp_path_factory.mktemp("train") / "resblock"
    return ax.compile(sym, shapes, grad_req=meta["grad_req"], out=out)


def test_runtime_only_training_step_matches_mxnet(resblock_artifact, tmp_path):
    inputs = tmp_path / "inputs.npz"
    np.savez(inputs, **CASE.inputs())
    script = tmp_path / "train.py"
    script.write_text(RUNTIME_ONLY_TRAIN)
    res = subprocess.run([sys.executable, str(script), str(resblock_artifact.path), str(CASE.path / "meta.json"),
                          str(inputs), str(tmp_path / "out.npz")], capture_output=True, text=True, cwd=ROOT,
                         timeout=180)
    assert res.returncode == 0, res.stderr
    assert "runtime-only training ok" in res.stdout
    exp, tol = CASE.expected(), dict(rtol=CASE.meta["rtol"], atol=CASE.meta["atol"])
    with np.load(tmp_path / "out.npz", allow_pickle=False) as f:
        got = {k: f[k] for k in f.files}
    for key, want in exp.items():
        if key.startswith(("output_", "grad_", "aux_")):
            for tag in ("", "fused_"):
                np.testing.assert_allclose(got[tag + key], want, err_msg=tag + key, **tol)
    assert any(k.startswith("grad_") for k in exp) and any(k.startswith("aux_") for k in exp)


def test_training_artifact_refuses_another_grad_req(resblock_artifact):
    other = dict(CASE.meta["grad_req"], data="null")
    with pytest.raises(ax.AotexecError, match="compiled for another grad_req.*data"):
        resblock_artifact.simple_bind(ax.cpu(), grad_req=other)
    ex = resblock_artifact.simple_bind(ax.cpu(), grad_req="null")      # inference always works
    assert ex.grad_dict.get("fc_weight") is None


def test_cli_grad_req_builds_a_training_artifact(tmp_path):
    out = tmp_path / "mlp_train"
    res = invoke(["compile", str(EXAMPLES / "mlp-symbol.json"), "--shape", "data=8,784",
                              "--params", str(EXAMPLES / "mlp-params.npz"), "--grad-req", "write", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "training      grad_req ['write'] for 6 arguments" in res.output
    art = ax.load(out)
    assert art.grad_req["data"] == "null" and art.grad_req["softmax_label"] == "null"
    assert art.grad_req["fc1_weight"] == "write"
    x = np.load(EXAMPLES / "mlp-input.npy")
    y = np.arange(8, dtype=np.float32) % 10
    ex = art.simple_bind(ax.cpu())
    ex.forward(is_train=True, data=x, softmax_label=y)
    ex.backward()
    # reference: the same net bound through the compiler
    ref = ax.sym.load(str(EXAMPLES / "mlp-symbol.json")).simple_bind(ax.cpu(), grad_req=art.grad_req, data=(8, 784))
    ref.copy_params_from(art.arg_params)
    ref.forward(is_train=True, data=x, softmax_label=y)
    ref.backward()
    for n in ("fc1_weight", "fc3_bias"):
        np.testing.assert_allclose(ex.grad_dict[n].asnumpy(), ref.grad_dict[n].asnumpy(), rtol=1e-5, atol=1e-6)
    bad = invoke(["compile", str(EXAMPLES / "mlp-symbol.json"), "--shape", "data=8,784",
                              "--grad-req", "sometimes", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "--grad-req must be null, write or add" in bad.output


def test_inference_artifact_says_how_to_get_training(tmp_path):
    art = ax.compile(ax.sym.load(str(EXAMPLES / "mlp-symbol.json")), {"data": (2, 784)}, out=tmp_path / "inf")
    assert art.grad_req is None
    with pytest.raises(ax.AotexecError, match="--grad-req write"):
        art.simple_bind(ax.cpu(), grad_req="write")
