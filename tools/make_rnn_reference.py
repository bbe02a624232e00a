"""Reference data for aotexec's recurrent ops (tests/test_rnn.py), written by MXNet 1.9.1 into
``tests/data/rnn/``:

- ``<case>-symbol.json`` + ``<case>.npz`` per op case (``cases.json`` lists them): the fused
  ``RNN`` op in every mode (rnn_relu, rnn_tanh, lstm, gru), stacked, bidirectional, with and
  without state outputs, LSTM with a projection (inference only: MXNet's CPU kernel refuses to
  train it, "No training support for LSTM with projection on CPU currently"), and SequenceMask /
  SequenceLast / SequenceReverse with and without ``sequence_length`` on axes 0 and 1.  The npz
  holds ``arg:<name>`` (inputs), ``head:<i>`` (head gradients), ``out:<i>`` (outputs) and
  ``grad:<name>`` (gradients of ``sum(out_i * head_i)``) for the arguments in ``cases.json``'s
  ``grads``.
- ``<net>-symbol.json`` + ``<net>-0000.params`` (``net.export()`` of a hybridized Gluon model)
  + ``<net>.npz`` (``data``, ``head``, ``output``, ``grad:<param>``): an LSTM language model
  (Embedding -> 2-layer LSTM -> Dense) and a GRU tagger (Embedding -> 2-layer bidirectional
  GRU -> Dense).

Expectations are computed in float64 (MXNet's native kernels; with ``MXNET_MKLDNN_ENABLED=0``
MXNet 1.9.1's float32 RNN fails, "Check failed: in_data.size() == num_inputs") and stored as
float32.  MXNet 1.9.1's CPU kernels refuse ``use_sequence_length`` ("only available
for cuDNN") and LSTM state clipping ("only supported for GPU with CuDNN"): tests/rnn_numpy.py
is the reference for those, itself checked against these files.

    python tools/make_rnn_reference.py [--out tests/data/rnn]

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
T, N, I, H = 5, 3, 4, 5           # op cases: steps, batch, input size, state size


def rnn_cases() -> dict[str, dict]:
    """case -> RNN attributes (and whether MXNet trains it)."""
    return {
        "rnn_relu_l1": dict(mode="rnn_relu", num_layers=1),
        "rnn_tanh_l2_bi": dict(mode="rnn_tanh", num_layers=2, bidirectional=True, state_outputs=True),
        "lstm_l1": dict(mode="lstm", num_layers=1),
        "lstm_l2_bi_states": dict(mode="lstm", num_layers=2, bidirectional=True, state_outputs=True),
        "gru_l1_states": dict(mode="gru", num_layers=1, state_outputs=True),
        "gru_l2_bi": dict(mode="gru", num_layers=2, bidirectional=True),
        "lstmp_l2_bi_infer": dict(mode="lstm", num_layers=2, bidirectional=True, projection_size=3,
                                  state_outputs=True, train=False),
    }


def sequence_cases() -> dict[str, tuple[str, dict, tuple[int, ...]]]:
    """case -> (op, attributes, data shape); lengths are one per batch element."""
    return {
        "seqmask_axis0": ("SequenceMask", {}, (T, N, 2)),
        "seqmask_axis0_len": ("SequenceMask", dict(use_sequence_length=True, value=-1.5), (T, N, 2)),
        "seqmask_axis1_len": ("SequenceMask", dict(use_sequence_length=True, axis=1), (N, T, 2, 2)),
        "seqlast_axis0": ("SequenceLast", {}, (T, N, 2)),
        "seqlast_axis0_len": ("SequenceLast", dict(use_sequence_length=True), (T, N, 2, 2)),
        "seqlast_axis1_len": ("SequenceLast", dict(use_sequence_length=True, axis=1), (N, T, 3)),
        "seqreverse": ("SequenceReverse", {}, (T, N, 2)),
        "seqreverse_len": ("SequenceReverse", dict(use_sequence_length=True), (T, N, 2, 2)),
    }


def run(mx, np, sym, args: dict, grads: list[str], heads: list | None):
    """Outputs (and gradients of sum(out * head) when ``heads``) in float64."""
    nd = {k: mx.nd.array(v, dtype="float64") for k, v in args.items()}
    g = {k: mx.nd.zeros(args[k].shape, dtype="float64") for k in grads}
    req = {k: ("write" if k in grads else "null") for k in sym.list_arguments()}
    ex = sym.bind(mx.cpu(), args=nd, args_grad=g if heads else None, grad_req=req if heads else "null")
    outs = [o.asnumpy() for o in ex.forward(is_train=heads is not None)]
    if heads is None:
        return outs, {}
    ex.backward([mx.nd.array(h, dtype="float64") for h in heads])
    mx.nd.waitall()
    return outs, {k: v.asnumpy() for k, v in g.items()}


def f32(np, d: dict) -> dict:
    return {k: np.asarray(v, np.float32) for k, v in d.items()}


def write_case(mx, np, out: Path, name: str, sym, args: dict, grads: list[str], train: bool,
               rng) -> dict:
    arg32 = f32(np, args)
    outs, _ = run(mx, np, sym, arg32, grads, None)
    heads = [rng.uniform(-1, 1, o.shape) for o in outs] if train else None
    if train:
        outs, g = run(mx, np, sym, arg32, grads, heads)
    else:
        g = {}
    (out / f"{name}-symbol.json").write_text(sym.tojson())
    arrays = {f"arg:{k}": v for k, v in arg32.items()}
    arrays.update({f"out:{i}": o for i, o in enumerate(outs)})
    arrays.update({f"head:{i}": h for i, h in enumerate(heads or [])})
    arrays.update({f"grad:{k}": v for k, v in g.items()})
    np.savez_compressed(out / f"{name}.npz", **f32(np, arrays))
    return {"name": name, "data": list(args[sym.list_arguments()[0]].shape), "train": train,
            "grads": grads if train else []}


def op_cases(mx, np, out: Path) -> list[dict]:
    rng = np.random.RandomState(SEED)
    metas = []
    for name, attrs in rnn_cases().items():
        attrs = dict(attrs)
        train = attrs.pop("train", True)
        sym = mx.sym.RNN(mx.sym.var("data"), state_size=H, name="rnn", **attrs)
        shapes, _, _ = sym.infer_shape(data=(T, N, I))
        args = {k: rng.uniform(-0.6, 0.6, s) for k, s in zip(sym.list_arguments(), shapes)}
        metas.append(write_case(mx, np, out, name, sym, args, list(args), train, rng) | {"op": "RNN", "attrs": attrs})
    for name, (op, attrs, shape) in sequence_cases().items():
        data = mx.sym.var("data")
        ins = [data, mx.sym.var("sequence_length")] if attrs.get("use_sequence_length") else [data]
        sym = getattr(mx.sym, op)(*ins, name="seq", **attrs)
        args = {"data": rng.uniform(-1, 1, shape)}
        if len(ins) == 2:
            steps = shape[attrs.get("axis", 0)]
            batch = shape[1 - attrs.get("axis", 0)]
            args["sequence_length"] = np.array([steps, 1, max(2, steps - 2)][:batch] + [steps] * (batch - 3), np.float64)
        metas.append(write_case(mx, np, out, name, sym, args, ["data"], True, rng) | {"op": op, "attrs": attrs})
    return metas


def gluon_nets(mx):
    from mxnet import gluon

    def lm():
        net = gluon.nn.HybridSequential(prefix="lm_")
        with net.name_scope():
            net.add(gluon.nn.Embedding(20, 8), gluon.rnn.LSTM(16, num_layers=2, layout="NTC"),
                    gluon.nn.Dense(20, flatten=False))
        return net

    def tagger():
        net = gluon.nn.HybridSequential(prefix="tagger_")
        with net.name_scope():
            net.add(gluon.nn.Embedding(20, 8), gluon.rnn.GRU(12, num_layers=2, bidirectional=True, layout="NTC"),
                    gluon.nn.Dense(7, flatten=False))
        return net
    return {"lstm_lm": (lm, "Embedding(20, 8) -> LSTM(16, num_layers=2, layout='NTC') -> Dense(20, flatten=False)"),
            "gru_tagger": (tagger, "Embedding(20, 8) -> GRU(12, num_layers=2, bidirectional=True, layout='NTC') "
                                   "-> Dense(7, flatten=False)")}


def as_float64(symbol_json: str) -> str:
    """The exported graph computing in float64 (its begin-state _zeros nodes name their dtype)."""
    doc = json.loads(symbol_json)
    for node in doc["nodes"]:
        if node["op"] in ("_zeros", "_ones") and "dtype" in node.get("attrs", {}):
            node["attrs"]["dtype"] = "float64"
    return json.dumps(doc)


def net_cases(mx, np, out: Path, batch: int = 2, steps: int = 8) -> list[dict]:
    metas = []
    for name, (build, what) in gluon_nets(mx).items():
        mx.random.seed(SEED)
        rng = np.random.RandomState(SEED)
        net = build()
        net.initialize(mx.init.Xavier())
        net.hybridize()
        data = rng.randint(0, 20, (batch, steps)).astype(np.float32)
        net(mx.nd.array(data)).wait_to_read()
        with tempfile.TemporaryDirectory() as tmp:
            net.export(str(Path(tmp) / name))
            text = (Path(tmp) / f"{name}-symbol.json").read_text()
            (out / f"{name}-symbol.json").write_text(text)
            (out / f"{name}-0000.params").write_bytes((Path(tmp) / f"{name}-0000.params").read_bytes())
            _, params, _ = mx.model.load_checkpoint(str(Path(tmp) / name), 0)
        sym = mx.sym.load_json(as_float64(text))
        args = {k: v.asnumpy() for k, v in params.items()} | {"data": data}
        outs, _ = run(mx, np, sym, args, [], None)
        head = rng.uniform(-1, 1, outs[0].shape)
        outs, g = run(mx, np, sym, args, [k for k in params], [head])
        np.savez_compressed(out / f"{name}.npz", **f32(np, {"data": data, "head": head, "output": outs[0]}
                                                       | {f"grad:{k}": v for k, v in g.items()}))
        metas.append({"name": name, "built_as": what, "data": [batch, steps]})
    return metas


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "rnn")
    a = ap.parse_args()
    # float64 runs MXNet's native kernels (oneDNN has none); MXNET_MKLDNN_ENABLED=0 would break
    # the float32 forward Gluon's export needs ("in_data.size() == num_inputs (4 vs. 3)")
    os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")           # no fusion
    os.environ.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")
    try:
        import mxnet as mx
    except ImportError:   # run in the benchmark harness's MXNet venv
        sys.path.insert(0, str(ROOT / "benchmarks"))
        import venvs
        return subprocess.call([str(venvs.ensure("mxnet")), __file__, "--out", str(a.out)])
    import numpy as np
    a.out.mkdir(parents=True, exist_ok=True)
    meta = {"mxnet": mx.__version__, "seed": SEED, "cases": op_cases(mx, np, a.out),
            "nets": net_cases(mx, np, a.out)}
    (a.out / "cases.json").write_text(json.dumps(meta, indent=1) + "\n")
    total = sum(p.stat().st_size for p in a.out.iterdir())
    print(f"{len(meta['cases'])} op cases, {len(meta['nets'])} nets: {total / 1024:.0f} KB in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
