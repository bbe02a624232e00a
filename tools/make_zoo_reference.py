"""Reference data for aotexec tests on MXNet 1.9.1's Gluon model zoo, one net per family:
``tests/data/zoo/<net>/`` holds

- ``symbol.json``: the Gluon export (raw logits head, no loss);
- ``symbol_train.json``: only where the net has Dropout: the same graph with ``p=0``, whose
  training forward is deterministic (MXNet's dropout mask cannot be reproduced elsewhere);
- ``params.npz``: ``arg:<name>`` / ``aux:<name>`` (numpy only, no pickle, compressed), except for
  nets over ``LIMIT_MB``, whose parameters come from a seed (tests/zoo_params.py) and whose large
  gradients are kept at ``SAMPLE`` seeded entries (``index:<param>`` in ``expected.npz``);
- ``inputs.npz``: ``data`` and ``head_grad`` (the gradient of ``sum(output * head_grad)``);
- ``expected.npz``: ``infer:output`` (``forward(is_train=False)``), ``train:output``
  (``forward(is_train=True)``), ``grad:<param>`` (parameter gradients, ``grad_req='null'`` for
  data) and ``aux:<name>`` (BatchNorm moving statistics after forward + backward: MXNet's native
  BatchNorm updates them in backward);
- ``expected.npz`` also holds ``mxnet32:<param>``: the relative error of MXNet's own float32
  gradient against the float64 reference (the tests allow aotexec twice that, or 1e-4);
- ``meta.json``: how the net was built (width, classes, input), shapes, versions.

CI-sized: batch 1-2, the smallest input the net's fixed pooling allows, 10 classes, and the
narrowest width the zoo offers (``mobilenet0.25``, or the zoo's ResNet / DenseNet classes with
fewer channels).  MXNet runs its native kernels (no MKL-DNN, no fusion).

    python tools/make_zoo_reference.py [--out tests/data/zoo] [NET ...]

runs itself in the MXNet virtualenv of the benchmark harness (benchmarks/venvs.py; created on
first use) when ``mxnet`` is not importable.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from zoo_params import FLOOR, FULL, SAMPLE, relative_error, sample_index, seeded_params  # noqa: E402  (shared with the tests)
LIMIT_MB = 6.0   # parameters + gradients of one net, float32 (squeezenet1.1, 10 classes: 5.8)
SEED = 0


def families(vision) -> dict[str, tuple[Callable, tuple[int, ...], str]]:
    """net -> (builder, input shape, how it differs from the zoo model of that name)."""
    narrow_resnet = [8, 8, 16, 32, 64]          # resnet18's channels are [64, 64, 128, 256, 512]
    return {
        "resnet18_v1": (lambda: vision.ResNetV1(vision.BasicBlockV1, [2, 2, 2, 2], narrow_resnet, classes=10),
                        (2, 3, 64, 64), "resnet18_v1's blocks at 1/8 width (channels 8-64), 10 classes "
                                        "(vision.ResNetV1(BasicBlockV1, [2,2,2,2], [8,8,16,32,64]))"),
        "resnet18_v2": (lambda: vision.ResNetV2(vision.BasicBlockV2, [2, 2, 2, 2], narrow_resnet, classes=10),
                        (2, 3, 64, 64), "resnet18_v2's blocks at 1/8 width (channels 8-64), 10 classes "
                                        "(vision.ResNetV2(BasicBlockV2, [2,2,2,2], [8,8,16,32,64]))"),
        "mobilenet1.0": (lambda: vision.get_model("mobilenet0.25", classes=10), (2, 3, 64, 64),
                         "mobilenet0.25 (the zoo's narrowest MobileNet), 10 classes"),
        "mobilenetv2_1.0": (lambda: vision.get_model("mobilenetv2_0.25", classes=10), (2, 3, 64, 64),
                            "mobilenetv2_0.25 (the zoo's narrowest MobileNetV2), 10 classes"),
        "squeezenet1.1": (lambda: vision.get_model("squeezenet1.1", classes=10), (1, 3, 224, 224),
                          "squeezenet1.1, 10 classes; 224x224 because its final AvgPool2D(13) needs a 13x13 map"),
        "vgg11_bn": (lambda: vision.get_model("vgg11_bn", classes=10), (2, 3, 64, 64),
                     "vgg11_bn, 10 classes (its classifier's two Dense(4096) layers are fixed in vision.VGG)"),
        "densenet121": (lambda: vision.DenseNet(8, 4, [2, 3, 4, 3], classes=10), (1, 3, 224, 224),
                        "densenet121's layer kinds with 2-4 dense layers per block (block config [2,3,4,3] "
                        "instead of [6,12,24,16]), growth rate 4 and 8 initial features instead of 32 / 64, "
                        "10 classes; 224x224 because its final AvgPool2D(7) needs a 7x7 map"),
        "inceptionv3": (lambda: vision.get_model("inceptionv3", classes=10), (1, 3, 299, 299),
                        "inceptionv3, 10 classes; 299x299 is the smallest input its stride-2 stages and "
                        "final AvgPool2D(8) allow"),
    }


def export(mx, net, shape, tmp: Path):
    """Initialise (seeded Xavier), hybridize, run once, export; (symbol json text, args, aux)."""
    import numpy as np
    net.initialize(mx.init.Xavier())
    net.hybridize()
    net(mx.nd.array(np.zeros(shape, np.float32))).wait_to_read()
    net.export(str(tmp / "net"))
    sym, args, aux = mx.model.load_checkpoint(str(tmp / "net"), 0)
    return sym, {k: v.asnumpy() for k, v in args.items()}, {k: v.asnumpy() for k, v in aux.items()}


def without_dropout(symbol_json: str) -> tuple[str, list[str]]:
    """The graph with every Dropout's p set to 0, and the names of those nodes."""
    doc = json.loads(symbol_json)
    names = []
    for node in doc["nodes"]:
        if node["op"] == "Dropout":
            node.setdefault("attrs", {})["p"] = "0"
            names.append(node["name"])
    return json.dumps(doc, indent=2), names


def run_mxnet(mx, symbol_json: str, data, args: dict, aux: dict, head_grad, train: bool, dtype="float64"):
    """MXNet's output (and gradients + aux after forward + backward when ``train``), computed in
    ``dtype``: float64 is the reference, since MXNet's own float32 kernels drift ~1e-2 from it on
    the deep nets' early-layer gradients (``meta.json``: ``mxnet_float32_error``)."""
    import numpy as np
    sym = mx.sym.load_json(symbol_json)
    cast = lambda v: mx.nd.array(v, dtype=dtype)   # noqa: E731
    nd = {k: cast(v) for k, v in args.items()}
    nd["data"] = cast(data)
    grads = {k: mx.nd.zeros(v.shape, dtype=dtype) for k, v in args.items()} if train else None
    req = {k: ("write" if train and k != "data" else "null") for k in sym.list_arguments()}
    aux_nd = {k: cast(v) for k, v in aux.items()}
    ex = sym.bind(mx.cpu(), args=nd, args_grad=grads, grad_req=req, aux_states=aux_nd)
    out = ex.forward(is_train=train)[0].asnumpy()
    if not train:
        return out, {}, {}
    ex.backward(out_grads=[cast(head_grad)])
    # MXNet's native BatchNorm updates its moving statistics in backward, in place, behind the
    # engine's dependency tracking: only waitall() orders the reads after it
    mx.nd.waitall()
    aux_after = {k: v.asnumpy() for k, v in aux_nd.items()}
    g = {k: v.asnumpy() for k, v in ex.grad_dict.items() if k != "data" and v is not None}
    assert all(np.isfinite(v).all() for v in g.values())
    return out, g, aux_after


def float32_errors(actual: dict, truth: dict) -> dict:
    """Each gradient's relative error (tests/test_zoo.py's measure) against ``truth``."""
    import numpy as np
    floor = FLOOR * max(float(np.abs(t).max()) for t in truth.values())
    return {k: relative_error(actual[k], t, floor) for k, t in truth.items()}


def make(mx, name: str, spec, out_dir: Path) -> dict:
    """Write one net's folder; returns its meta (or a skip record)."""
    import numpy as np
    build, shape, note = spec
    mx.random.seed(SEED)
    np.random.seed(SEED)
    with tempfile.TemporaryDirectory() as tmp:
        sym, args, aux = export(mx, build(), shape, Path(tmp))
    n_params = sum(v.size for v in args.values())
    mb = 2 * 4 * n_params / 2**20   # parameters + their gradients, float32
    seeded = mb > LIMIT_MB
    if seeded:   # too large to commit: parameters from tests/zoo_params.py, gradients sampled
        values = seeded_params({k: v.shape for k, v in args.items()}, {k: v.shape for k, v in aux.items()})
        args = {k: values[f"arg:{k}"] for k in args}
        aux = {k: values[f"aux:{k}"] for k in aux}
    rng = np.random.RandomState(SEED + 1)
    data = rng.uniform(-1, 1, shape).astype(np.float32)
    text = sym.tojson()
    train_text, dropped = without_dropout(text)
    out_shape = sym.infer_shape(data=shape)[1][0]
    head_grad = rng.normal(0, 1, out_shape).astype(np.float32)
    infer_out, _, _ = run_mxnet(mx, text, data, args, aux, head_grad, train=False)
    train_out, grads, aux_after = run_mxnet(mx, train_text, data, args, aux, head_grad, train=True)
    _, grads32, _ = run_mxnet(mx, train_text, data, args, aux, head_grad, train=True, dtype="float32")
    mxnet32 = float32_errors(grads32, grads)
    f32 = lambda d: {k: v.astype(np.float32) for k, v in d.items()}   # noqa: E731
    infer_out, train_out = infer_out.astype(np.float32), train_out.astype(np.float32)
    grads, aux_after = f32(grads), f32(aux_after)
    index = {k: i for k, i in ((k, sample_index(k, v.size)) for k, v in grads.items()) if i is not None}
    grads = {k: v.ravel()[index[k]] if k in index else v for k, v in grads.items()}
    d = out_dir / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "symbol.json").write_text(text)
    if dropped:
        (d / "symbol_train.json").write_text(train_text)
    elif (d / "symbol_train.json").exists():
        (d / "symbol_train.json").unlink()
    if seeded:
        (d / "params.npz").unlink(missing_ok=True)
    else:
        np.savez_compressed(d / "params.npz", **{f"arg:{k}": v for k, v in args.items()},
                            **{f"aux:{k}": v for k, v in aux.items()})
    np.savez_compressed(d / "inputs.npz", data=data, head_grad=head_grad)
    np.savez_compressed(d / "expected.npz", **{"infer:output": infer_out, "train:output": train_out},
                        **{f"grad:{k}": v for k, v in grads.items()},
                        **{f"index:{k}": i.astype(np.int32) for k, i in index.items()},
                        **{f"mxnet32:{k}": np.float64(e) for k, e in mxnet32.items()},
                        **{f"aux:{k}": v for k, v in aux_after.items()})
    meta = {
        "net": name, "built_as": note, "mxnet": mx.__version__, "seed": SEED,
        "init": "mx.random.seed(0), np.random.seed(0), Xavier(); inputs: RandomState(1) uniform(-1, 1), "
                "head_grad normal(0, 1)",
        "inputs": {"data": list(shape)}, "output": list(out_shape), "parameters": int(n_params),
        "arguments": sym.list_arguments(), "aux_states": sym.list_auxiliary_states(),
        "params": "seeded: tests/zoo_params.py" if seeded else "params.npz",
        "sampled_gradients": sorted(index),
        "grad_req": "write for every argument but data (null)",
        "reference_dtype": "float64 (stored as float32)",
        "mxnet_float32_error": max(mxnet32.values()),
        "train_symbol": "symbol_train.json" if dropped else "symbol.json",
        "dropout_zeroed_for_train": dropped,
        "mxnet_env": {k: os.environ.get(k) for k in ("MXNET_SUBGRAPH_BACKEND", "MXNET_MKLDNN_ENABLED")},
        "bytes": sum(f.stat().st_size for f in d.iterdir() if f.name != "meta.json"),
    }
    (d / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def readme(out_dir: Path, metas: list[dict]) -> None:
    L = ["# Model-zoo reference data", "",
         "Written by `tools/make_zoo_reference.py` with MXNet 1.9.1 (Gluon model zoo, random Xavier weights, "
         "seed 0; native kernels: `MXNET_MKLDNN_ENABLED=0`, `MXNET_SUBGRAPH_BACKEND=NONE`): per net "
         "`symbol.json`, `params.npz`, `inputs.npz`, `expected.npz` (inference and training outputs, "
         "parameter gradients of `sum(output * head_grad)`, "
         "BatchNorm moving statistics after forward + backward) and `meta.json`. The expectations are "
         "computed in float64 (stored as float32); the table shows how far MXNet's own float32 gradients are "
         "from them (the largest relative error over parameters, as tests/test_zoo.py measures it). Nets with Dropout also have "
         "`symbol_train.json` (p=0) for the training expectations. No pickle: load with `allow_pickle=False`.",
         f"Nets whose parameters and gradients exceed {LIMIT_MB:.0f} MB in float32 (which does not compress) "
         "have no `params.npz`: their parameters are drawn from a seed by `tests/zoo_params.py` on both "
         f"sides, and their gradients above {FULL:,} entries are kept at {SAMPLE:,} seeded entries.",
         "", "CI-sized versions of the zoo nets (10 classes, narrowest width; see each `meta.json`):", "",
         "| net | built as | input | parameters | params | MXNet float32's gradient error | folder KB |",
         "|---|---|---|---|---|---|---|"]
    for m in metas:
        L.append(f"| {m['net']} | {m['built_as']} | {'x'.join(map(str, m['inputs']['data']))} | "
                 f"{m['parameters']:,} | {m['params']} | {m['mxnet_float32_error']:.1e} | {(m['bytes'] + 1023) // 1024} |")
    (out_dir / "README.md").write_text("\n".join(L) + "\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "zoo")
    ap.add_argument("nets", nargs="*")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import venvs
    mx, code = venvs.native_mxnet(__file__, ["--out", str(a.out), *a.nets])
    if mx is None:
        return code
    from mxnet.gluon.model_zoo import vision
    specs = families(vision)
    names = a.nets or list(specs)
    metas = []
    for name in names:
        m = make(mx, name, specs[name], a.out)
        metas.append(m)
        print(f"{name}: {m['bytes'] / 2**20:.2f} MB ({m['params']})", flush=True)
    if not a.nets:
        readme(a.out, metas)
    return 0


if __name__ == "__main__":
    sys.exit(main())
