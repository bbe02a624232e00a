"""Fuzzing what users hand aotexec directly: symbol JSON text (``ax.sym.load_json``) and parameter
files (.npz and MXNet .params, ``read_params`` then ``ax.compile``'s checks).  Seeded mutations
(tests/fuzzing.py), each case under a time limit: every one ends in an AotexecError or a correct
result, never another exception, a crash or a hang.  Artifacts (manifest, modules, archives)
are fuzzed in tests/test_fuzz_artifact.py; MXNet's NDArray format alone in test_ndarray_file.py."""
from __future__ import annotations

import random
import warnings
from pathlib import Path

import numpy as np
import pytest

import aotexec as ax
from aotexec.manifest import prepare_params, read_params
from aotexec.runtime.bind_args import bind_typing
from fuzzing import Hang, cpu_seconds, mutate_bytes, mutate_json_text, time_limit

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SYMBOL_CASES = 1000
PARAMS_CASES = 600
CASE_SECONDS = 10


def _conv_net() -> str:
    d = ax.sym.Variable("data")
    c = ax.sym.Convolution(d, num_filter=4, kernel=(3, 3), pad=(1, 1), name="c1")
    a = ax.sym.Activation(ax.sym.BatchNorm(c, name="bn1"), act_type="relu")
    p = ax.sym.Flatten(ax.sym.Pooling(a, kernel=(2, 2), stride=(2, 2), pool_type="max"))
    fc = ax.sym.FullyConnected(ax.sym.Concat(p, p, dim=1), num_hidden=3, name="fc")
    return ax.sym.SoftmaxOutput(ax.sym.Dropout(fc, p=0.5), name="sm").tojson()


class Findings:
    """Cases that ended otherwise than in an AotexecError or a correct result."""

    def __init__(self):
        self.items: list[str] = []

    def case(self, what: str, fn) -> None:
        try:
            with time_limit(CASE_SECONDS):
                fn()
        except ax.AotexecError:
            pass
        except Hang as e:
            self.items.append(f"{what}: hang ({e})")
        except Exception as e:   # noqa: BLE001 (what the fuzz looks for)
            self.items.append(f"{what}: {type(e).__name__}: {str(e)[:200]}")

    def check(self) -> None:
        assert not self.items, f"{len(self.items)} findings:\n" + "\n".join(self.items[:20])


def test_fuzz_symbol_json():
    texts = [(EXAMPLES / "mlp-symbol.json").read_text(), _conv_net()]
    shapes = [(4, 784), (2, 3, 8, 8)]
    found = Findings()
    t0 = cpu_seconds()

    def one(text: str, shape: tuple) -> None:
        warnings.simplefilter("ignore")        # infer_shape's "cannot decide" warnings are results
        sym = ax.sym.load_json(text)
        sym.list_arguments(), sym.list_outputs(), sym.list_auxiliary_states()
        again = sym.tojson()
        assert ax.sym.load_json(again).tojson() == again, "tojson does not round-trip"
        if "data" in sym.list_arguments():
            sym.infer_shape_partial(data=shape)
            sym.infer_type(data=np.float32)

    for i in range(SYMBOL_CASES):
        rng = random.Random(i)
        k = i % len(texts)
        text = mutate_json_text(rng, texts[k])
        with warnings.catch_warnings():
            found.case(f"symbol case {i}", lambda: one(text, shapes[k]))
    found.check()
    assert cpu_seconds() - t0 < 60


def test_fuzz_params_files(tmp_path):
    sym = ax.sym.load(str(EXAMPLES / "mlp-symbol.json"))
    typings = [bind_typing(sym, {"data": (8, 784)}, {})]
    npz = (EXAMPLES / "mlp-params.npz").read_bytes()
    with np.load(EXAMPLES / "mlp-params.npz") as f:
        arrays = {k: f[k] for k in f.files}
    ax.nd.save(str(tmp_path / "ref.params"), {k: ax.nd.array(v) for k, v in arrays.items()})
    bases = [npz, (tmp_path / "ref.params").read_bytes()]
    found = Findings()
    t0 = cpu_seconds()

    def one(path: Path) -> None:
        got = read_params(path)
        checked = prepare_params(got, sym, typings, ["data", "softmax_label"])
        for key, arr in checked.items():     # a correct result: what the file holds, typed as the symbol says
            src = got.get(key, got.get(key.split(":", 1)[1]))
            assert src is not None and arr.dtype == np.float32 and np.array_equal(arr, src, equal_nan=True), key

    for i in range(PARAMS_CASES):
        rng = random.Random(i)
        path = tmp_path / f"case{i % 2}"
        path.write_bytes(mutate_bytes(rng, bases[i % 2]))
        found.case(f"params case {i} ({'npz' if i % 2 == 0 else '.params'})", lambda: one(path))
    found.check()
    assert cpu_seconds() - t0 < 60


@pytest.mark.parametrize("seconds", [0.2])
def test_time_limit_catches_a_hang(seconds):
    with pytest.raises(Hang):
        with time_limit(seconds):
            while True:
                pass
