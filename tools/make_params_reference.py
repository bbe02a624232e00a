"""Reference NDArray files written by MXNet 1.9.1, for aotexec's reader and writer
(``tests/test_ndarray_file.py``): ``tests/data/ndfile/`` gets

- ``tiny-symbol.json`` + ``tiny-0000.params``: ``mx.model.save_checkpoint`` of a small net
  (Convolution, BatchNorm, relu, Pooling, FullyConnected, SoftmaxOutput), so ``arg:`` and ``aux:``
  keys both occur; ``tiny-expected.npz``: the same parameters (``arg:<name>`` / ``aux:<name>``),
  the input ``data`` and MXNet's inference ``output``;
- ``arrays-dict.nd`` / ``arrays-list.nd``: ``mx.nd.save`` of a dict and of a list covering every
  dtype MXNet 1.9 saves (float16/32/64, int8/32/64, uint8, bool), 1-d to 4-d, a non-ASCII name;
- ``arrays-np.nd``: the same under ``mx.np_shape(True)`` (V3 magic: a 0-d and a zero-size array);
- ``empty.nd``: ``mx.nd.save`` of an empty list;
- ``arrays.npz``: the expected values, ``<file>_<i>`` for the i-th array of ``arrays-<file>.nd`` and
  ``<file>_names`` for the names (numpy only, no pickle).

Then it checks the other direction: aotexec (run by ``--aotexec-python``, default the project's
``.venv``, with this checkout first on PYTHONPATH) saves those arrays and the checkpoint again,
from its loader and from fresh numpy arrays, and MXNet 1.9.1 loads every file it wrote with the
expected names, dtypes and values; the checkpoint gives MXNet's output again.  ``--no-check``
skips that step (e.g. before aotexec can write files).

    python tools/make_params_reference.py [--out tests/data/ndfile] [--aotexec-python PY] [--no-check]

runs itself in the MXNet virtualenv of the benchmark harness (benchmarks/venvs.py) when ``mxnet``
is not importable.  MXNet is only needed here, never by aotexec or its tests.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED = 0
DATA_SHAPE = (2, 3, 8, 8)


def tiny_net(mx):
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, num_filter=4, kernel=(3, 3), pad=(1, 1), name="conv0")
    net = mx.sym.BatchNorm(net, fix_gamma=False, name="bn0")
    net = mx.sym.Activation(net, act_type="relu", name="relu0")
    net = mx.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool0")
    net = mx.sym.FullyConnected(net, num_hidden=5, name="fc0")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def checkpoint(mx, np, out: Path) -> None:
    rng = np.random.RandomState(SEED)
    sym = tiny_net(mx)
    arg_shapes, _, aux_shapes = sym.infer_shape(data=DATA_SHAPE)
    args = {n: rng.uniform(-0.5, 0.5, s).astype(np.float32) for n, s in zip(sym.list_arguments(), arg_shapes)
            if n not in ("data", "softmax_label")}
    aux = {"bn0_moving_mean": rng.uniform(-0.2, 0.2, aux_shapes[0]).astype(np.float32),
           "bn0_moving_var": rng.uniform(0.5, 1.5, aux_shapes[1]).astype(np.float32)}
    assert sym.list_auxiliary_states() == list(aux)
    data = rng.uniform(-1, 1, DATA_SHAPE).astype(np.float32)
    mx.model.save_checkpoint(str(out / "tiny"), 0, sym, {k: mx.nd.array(v) for k, v in args.items()},
                             {k: mx.nd.array(v) for k, v in aux.items()})
    output = forward(mx, sym, data, args, aux)
    np.savez(out / "tiny-expected.npz", data=data, output=output, **{f"arg:{k}": v for k, v in args.items()},
             **{f"aux:{k}": v for k, v in aux.items()})


def forward(mx, sym, data, args: dict, aux: dict):
    ex = sym.simple_bind(mx.cpu(), grad_req="null", data=data.shape)
    ex.copy_params_from({k: mx.nd.array(v, dtype=v.dtype) for k, v in args.items()},
                        {k: mx.nd.array(v, dtype=v.dtype) for k, v in aux.items()})
    return ex.forward(is_train=False, data=mx.nd.array(data))[0].asnumpy()


def arrays(np) -> dict[str, object]:
    """One array per dtype MXNet 1.9 saves, with the values that catch byte-order, sign and width bugs."""
    rng = np.random.RandomState(SEED + 1)
    return {
        "arg:w_float32": np.array([[1.5, -0.0, np.inf], [np.nan, 3.4e38, -1e-45]], np.float32),
        "aux:float64": np.array([np.pi, -np.e, 1e300, 5e-324], np.float64),
        "float16": rng.uniform(-8, 8, (2, 3, 2, 2)).astype(np.float16),
        "int8": np.array([-128, -1, 0, 1, 127], np.int8),
        "int32": np.array([[-2**31, 2**31 - 1], [7, -7]], np.int32),
        "int64": np.array([-2**63, 2**63 - 1, 2**40 + 3], np.int64),
        "uint8": np.arange(0, 256, 17, dtype=np.uint8).reshape(4, 4),
        "bool": np.array([True, False, True], np.bool_),
        "one": np.array([42.0], np.float32),
        "caf\u00e9 \u03bb": rng.uniform(-1, 1, (3, 1, 2)).astype(np.float32),
    }


def nd_files(mx, np, out: Path) -> None:
    vals = arrays(np)
    mx.nd.save(str(out / "arrays-dict.nd"), {k: mx.nd.array(v, dtype=v.dtype) for k, v in vals.items()})
    mx.nd.save(str(out / "arrays-list.nd"), [mx.nd.array(v, dtype=v.dtype) for v in vals.values()])
    np_vals = {"scalar": np.array(2.5, np.float32), "empty": np.zeros((2, 0), np.float32),
               "vector": np.array([1, -2, 3], np.int64)}
    with mx.np_shape(True):
        mx.nd.save(str(out / "arrays-np.nd"), {k: mx.nd.array(v, dtype=v.dtype) for k, v in np_vals.items()})
    mx.nd.save(str(out / "empty.nd"), [])
    expected = {"dict_names": np.array(list(vals)), "np_names": np.array(list(np_vals))}
    for prefix, group in (("dict", vals), ("list", vals), ("np", np_vals)):
        expected.update({f"{prefix}_{i}": v for i, v in enumerate(group.values())})
    np.savez(out / "arrays.npz", **expected)


# what aotexec runs for the check: it writes files from its own loader and from fresh numpy arrays
AOTEXEC_WRITER = """
import sys
import numpy as np
import aotexec as ax
src, dst = sys.argv[1], sys.argv[2]
with np.load(f"{src}/arrays.npz", allow_pickle=False) as f:
    exp = {k: f[k] for k in f.files}
for name in ("dict", "list"):
    ax.nd.save(f"{dst}/reloaded-{name}.nd", ax.nd.load(f"{src}/arrays-{name}.nd"))
with ax.np_shape():
    ax.nd.save(f"{dst}/reloaded-np.nd", ax.nd.load(f"{src}/arrays-np.nd"))
    ax.nd.save(f"{dst}/fresh-np.nd", {str(n): ax.nd.array(exp[f"np_{i}"]) for i, n in enumerate(exp["np_names"])})
ax.nd.save(f"{dst}/fresh-dict.nd", {str(n): ax.nd.array(exp[f"dict_{i}"]) for i, n in enumerate(exp["dict_names"])})
ax.nd.save(f"{dst}/fresh-list.nd", [exp[f"list_{i}"] for i in range(len(exp["dict_names"]))])   # numpy values
sym, args, aux = ax.model.load_checkpoint(f"{src}/tiny", 0)
ax.model.save_checkpoint(f"{dst}/tiny", 3, sym, args, aux)
same = {f: open(f"{src}/{a}", "rb").read() == open(f"{dst}/{b}", "rb").read() for f, a, b in (
    ("dict", "arrays-dict.nd", "reloaded-dict.nd"), ("list", "arrays-list.nd", "reloaded-list.nd"),
    ("np", "arrays-np.nd", "reloaded-np.nd"), ("checkpoint", "tiny-0000.params", "tiny-0003.params"))}
assert all(same.values()), same
print("aotexec wrote its files; round trips are byte-identical:", sorted(same))
"""


def check_aotexec_files(mx, np, src: Path, python: str) -> None:
    """aotexec writes files (subprocess); MXNet loads them with the expected names, dtypes, values."""
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        subprocess.run([python, "-c", AOTEXEC_WRITER, str(src), tmp], check=True, env=env)
        with np.load(src / "arrays.npz", allow_pickle=False) as f:
            exp = {k: f[k] for k in f.files}
        for stem in ("reloaded", "fresh"):
            for kind in ("dict", "list"):
                got = mx.nd.load(f"{tmp}/{stem}-{kind}.nd")
                names = [str(n) for n in exp["dict_names"]]
                if kind == "dict":
                    assert list(got) == names, (stem, list(got))
                    got = list(got.values())
                same_values(np, got, [exp[f"{kind}_{i}"] for i in range(len(names))], f"{stem}-{kind}")
            with mx.np_shape(True):
                got = mx.nd.load(f"{tmp}/{stem}-np.nd")
                same_values(np, list(got.values()), [exp[f"np_{i}"] for i in range(len(got))], f"{stem}-np")
        sym, args, aux = mx.model.load_checkpoint(f"{tmp}/tiny", 3)
        with np.load(src / "tiny-expected.npz", allow_pickle=False) as f:
            ref = {k: f[k] for k in f.files}
        out = forward(mx, sym, ref["data"], {k: v.asnumpy() for k, v in args.items()},
                      {k: v.asnumpy() for k, v in aux.items()})
        np.testing.assert_array_equal(out, ref["output"])
    print("MXNet", mx.__version__, "loads every file aotexec wrote, with the expected names, dtypes and values")


def same_values(np, got: list, want: list, what: str) -> None:
    assert len(got) == len(want), (what, len(got), len(want))
    for g, w in zip(got, want):
        a = g.asnumpy()
        assert a.dtype == w.dtype and a.shape == w.shape, (what, a.dtype, w.dtype, a.shape, w.shape)
        np.testing.assert_array_equal(a, w, err_msg=what)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "ndfile")
    ap.add_argument("--aotexec-python", default=str(ROOT / ".venv" / "bin" / "python"),
                    help="a Python with aotexec's dependencies (this checkout is put first on PYTHONPATH)")
    ap.add_argument("--no-check", action="store_true", help="skip loading aotexec-written files in MXNet")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import venvs
    mx, code = venvs.native_mxnet(__file__, sys.argv[1:])
    if mx is None:
        return code
    import numpy as np
    a.out.mkdir(parents=True, exist_ok=True)
    checkpoint(mx, np, a.out)
    nd_files(mx, np, a.out)
    sizes = {p.name: p.stat().st_size for p in sorted(a.out.iterdir()) if p.name not in ("meta.json", "README.md")}
    meta = {"mxnet": mx.__version__, "numpy": np.__version__, "seed": SEED, "bytes": sizes}
    (a.out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {a.out}: {sum(sizes.values()):,} bytes in {len(sizes)} files")
    if not a.no_check:
        check_aotexec_files(mx, np, a.out, a.aotexec_python)
    return 0


if __name__ == "__main__":
    sys.exit(main())
