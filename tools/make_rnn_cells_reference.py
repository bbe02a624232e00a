"""Reference data for ``ax.rnn`` cells and ``ax.mod.Module`` (tests/test_rnn_cells.py,
tests/test_module.py), written by MXNet 1.9.1 into ``tests/data/rnn_cells/``:

- ``<case>-symbol.json`` + ``<case>.npz`` per cell case (``cases.json`` lists them with their
  sizes): the graph ``unroll`` builds (node names and ops are compared), and through MXNet's
  ``Module`` bound with ``inputs_need_grad``: ``arg:<name>`` (data and parameters, numpy-drawn),
  ``head:<i>``, ``out:<i>`` (training-mode forward) and ``grad:<name>`` (data and parameter
  gradients of ``sum(out_i * head_i)``).  Fused cases add ``unpacked:<name>``: MXNet's
  ``unpack_weights`` of the packed vector.
- ``module_sgd.npz`` + ``module_sgd-symbol.json``: an MLP with SoftmaxOutput trained three steps
  by ``Module.init_optimizer('sgd', momentum, wd)`` / ``forward_backward`` / ``update`` from
  given parameters: ``arg:*`` (start), ``batch<i>:data`` / ``batch<i>:label``, ``final:*``.
- ``module_fit.npz``: that MLP through ``Module.fit`` (an ``NDArrayIter`` whose last batch is
  padded, two epochs, accuracy and cross-entropy), ``score`` and ``predict``: ``x`` / ``y``,
  ``arg:*``, ``final:*``, ``train<epoch>:<metric>``, ``score:<metric>``, ``predict``.

    python tools/make_rnn_cells_reference.py [--out tests/data/rnn_cells]

runs itself in the MXNet virtualenv of the benchmark harness (benchmarks/venvs.py) when ``mxnet``
is not importable.  MXNet is only needed here, never by aotexec or its tests.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
T, N, I, H = 3, 2, 4, 5


def cell_cases(mx):
    """case -> (builder of (cell, merge_outputs), layout)."""
    rnn = mx.rnn

    def lstm_stack():
        stack = rnn.SequentialRNNCell()
        stack.add(rnn.LSTMCell(H, prefix="l0_"))
        stack.add(rnn.LSTMCell(H, prefix="l1_"))
        return stack, True

    def gru_bidirectional():
        return rnn.BidirectionalCell(rnn.GRUCell(H, prefix="l0_"), rnn.GRUCell(H, prefix="r0_")), True

    def rnn_residual_steps():
        stack = rnn.SequentialRNNCell()
        stack.add(rnn.RNNCell(I, activation="relu", prefix="a_"))
        stack.add(rnn.ResidualCell(rnn.RNNCell(I, activation="tanh", prefix="b_")))
        return stack, False

    def fused_lstm_bidirectional():
        return rnn.FusedRNNCell(H, num_layers=2, mode="lstm", bidirectional=True, get_next_state=True,
                                prefix=""), True

    def fused_gru_tnc():
        return rnn.FusedRNNCell(H, num_layers=1, mode="gru", prefix="g_"), True

    return {"lstm_stack": (lstm_stack, "NTC"), "gru_bidirectional": (gru_bidirectional, "NTC"),
            "rnn_residual_steps": (rnn_residual_steps, "NTC"),
            "fused_lstm_bidirectional": (fused_lstm_bidirectional, "NTC"), "fused_gru_tnc": (fused_gru_tnc, "TNC")}


def write_cells(mx, np, out: Path) -> dict:
    rng = np.random.default_rng(0)
    listing = {}
    for case, (build, layout) in cell_cases(mx).items():
        with mx.name.NameManager():      # automatic names (split0...) counted from 0 per case
            cell, merge = build()
            outputs, _ = cell.unroll(T, mx.sym.Variable("data"), layout=layout, merge_outputs=merge)
        sym = outputs if merge else mx.sym.Group(outputs)
        sym.save(str(out / f"{case}-symbol.json"))
        dshape = (N, T, I) if layout == "NTC" else (T, N, I)
        mod = mx.mod.Module(sym, label_names=None, context=mx.cpu())
        mod.bind(data_shapes=[("data", dshape)], inputs_need_grad=True)
        arg_shapes, _, _ = sym.infer_shape(data=dshape)
        arrays = {n: rng.uniform(-0.5, 0.5, s).astype(np.float32)
                  for n, s in zip(sym.list_arguments(), arg_shapes)}
        mod.set_params({n: mx.nd.array(v) for n, v in arrays.items() if n != "data"}, {})
        mod.forward(mx.io.DataBatch(data=[mx.nd.array(arrays["data"])]), is_train=True)
        outs = [o.asnumpy() for o in mod.get_outputs()]
        heads = [rng.uniform(-1, 1, o.shape).astype(np.float32) for o in outs]
        mod.backward(out_grads=[mx.nd.array(h) for h in heads])
        record = {f"arg:{n}": v for n, v in arrays.items()}
        record.update({f"out:{i}": o for i, o in enumerate(outs)})
        record.update({f"head:{i}": h for i, h in enumerate(heads)})
        record["grad:data"] = mod.get_input_grads()[0].asnumpy()
        grads = dict(zip(mod._exec_group.param_names, mod._exec_group.grad_arrays))
        record.update({f"grad:{n}": g[0].asnumpy() for n, g in grads.items()})
        if case.startswith("fused"):
            unpacked = cell.unpack_weights({n: mx.nd.array(v) for n, v in arrays.items() if n != "data"})
            record.update({f"unpacked:{n}": v.asnumpy() for n, v in unpacked.items()})
        np.savez(out / f"{case}.npz", **record)
        listing[case] = {"layout": layout, "merge_outputs": merge, "data_shape": list(dshape)}
    return listing


def write_module_sgd(mx, np, out: Path) -> None:
    rng = np.random.default_rng(1)
    data = mx.sym.Variable("data")
    net = mx.sym.FullyConnected(data, num_hidden=6, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=3, name="fc2")
    net = mx.sym.SoftmaxOutput(net, name="softmax")
    net.save(str(out / "module_sgd-symbol.json"))
    mod = mx.mod.Module(net, context=mx.cpu())
    mod.bind(data_shapes=[("data", (4, 5))], label_shapes=[("softmax_label", (4,))])
    shapes = dict(zip(net.list_arguments(), net.infer_shape(data=(4, 5))[0]))
    start = {n: rng.uniform(-0.5, 0.5, shapes[n]).astype(np.float32) for n in ("fc1_weight", "fc1_bias",
                                                                               "fc2_weight", "fc2_bias")}
    mod.set_params({n: mx.nd.array(v) for n, v in start.items()}, {})
    mod.init_optimizer(optimizer="sgd", optimizer_params=(("learning_rate", 0.5), ("momentum", 0.9), ("wd", 1e-3)))
    record = {f"arg:{n}": v for n, v in start.items()}
    for step in range(3):
        x = rng.uniform(-1, 1, (4, 5)).astype(np.float32)
        y = rng.integers(0, 3, (4,)).astype(np.float32)
        record[f"batch{step}:data"], record[f"batch{step}:label"] = x, y
        mod.forward_backward(mx.io.DataBatch(data=[mx.nd.array(x)], label=[mx.nd.array(y)]))
        mod.update()
    args, _ = mod.get_params()
    record.update({f"final:{n}": v.asnumpy() for n, v in args.items()})
    np.savez(out / "module_sgd.npz", **record)


def write_module_fit(mx, np, out: Path) -> None:
    """``Module.fit`` over an NDArrayIter of 10 samples in batches of 4 (the last one padded),
    two epochs of SGD, then ``score`` and ``predict``; the same MLP as module_sgd."""
    rng = np.random.default_rng(2)
    net = mx.sym.load(str(out / "module_sgd-symbol.json"))
    shapes = dict(zip(net.list_arguments(), net.infer_shape(data=(4, 5))[0]))
    start = {n: rng.uniform(-0.5, 0.5, shapes[n]).astype(np.float32) for n in ("fc1_weight", "fc1_bias",
                                                                               "fc2_weight", "fc2_bias")}
    x = rng.uniform(-1, 1, (10, 5)).astype(np.float32)
    y = rng.integers(0, 3, (10,)).astype(np.float32)
    train = mx.io.NDArrayIter(x, y, batch_size=4)
    mod = mx.mod.Module(net, context=mx.cpu())
    seen = {}

    def at_batch_end(param):
        seen[param.epoch] = param.eval_metric.get_name_value()
    mod.fit(train, eval_metric=["acc", "ce"], optimizer="sgd",
            optimizer_params=(("learning_rate", 0.2), ("momentum", 0.9)),
            arg_params={n: mx.nd.array(v) for n, v in start.items()}, aux_params={}, num_epoch=2,
            batch_end_callback=at_batch_end)
    record = {f"arg:{n}": v for n, v in start.items()}
    record.update(x=x, y=y)
    record.update({f"final:{n}": v.asnumpy() for n, v in mod.get_params()[0].items()})
    for epoch, pairs in seen.items():
        record.update({f"train{epoch}:{name}": np.float64(value) for name, value in pairs})
    record.update({f"score:{name}": np.float64(value) for name, value in mod.score(train, ["acc", "ce"])})
    record["predict"] = mod.predict(train).asnumpy()
    np.savez(out / "module_fit.npz", **record)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "tests" / "data" / "rnn_cells"))
    args = parser.parse_args()
    try:
        import mxnet as mx
        import numpy as np
    except ImportError:
        python = ROOT / ".bench-venvs" / "mxnet" / "bin" / "python"
        if not python.exists():
            sys.exit("needs mxnet==1.9.1: run `python benchmarks/venvs.py` first")
        sys.exit(subprocess.call([str(python), __file__, *sys.argv[1:]], env={**os.environ, "PYTHONPATH": ""}))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = write_cells(mx, np, out)
    write_module_sgd(mx, np, out)
    write_module_fit(mx, np, out)
    (out / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    print(f"wrote {len(cases)} cell cases and module_sgd to {out}")


if __name__ == "__main__":
    main()
