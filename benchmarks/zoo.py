"""MXNet 1.9.1's Gluon model zoo as benchmark nets, defined once for every system.

A zoo *case* is ``MODEL:BATCH`` (``resnet18_v1:16``); the harness names the classic nets of
nets.py (``mlp``, ``lenet``, ``resnet8``) as they are.  Every case has a softmax head:
the exported graph + ``SoftmaxOutput`` (aotexec, MXNet) or ``cross_entropy`` (PyTorch),
so a training step is the loss gradient, as in the classic benchmark.

- **Export** (in the MXNet venv): ``python benchmarks/zoo.py export NAME...`` writes
  ``.bench-venvs/zoo/NAME/NAME-symbol.json`` + ``NAME-0000.params`` (Gluon ``export()``) and
  ``NAME-params.npz`` (keys ``arg:<name>`` / ``aux:<name>``, numpy only: aotexec does not read
  MXNet's ``.params``).  Seeded (``mx.random.seed(0)``, ``np.random.seed(0)``), Xavier init.
- **PyTorch / ONNX Runtime**: the same architecture from ``torchvision.models`` where it has
  one (random init, seed 0: only the speed is compared), exported with ``torch.onnx.export``.

Importing this module needs numpy only (workers import it in every venv).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ZOO_DIR = Path(os.environ.get("AOTEXEC_ZOO_DIR",
                              Path(os.environ.get("AOTEXEC_BENCH_VENVS", ROOT / ".bench-venvs")) / "zoo"))

# model -> (image side, torchvision.models constructor or None where torchvision lacks it)
MODELS: dict[str, tuple[int, str | None]] = {
    "resnet18_v1": (224, "resnet18"),
    "resnet50_v1": (224, "resnet50"),
    "resnet18_v2": (224, None),          # torchvision has no pre-activation ResNet
    "mobilenet1.0": (224, None),         # nor MobileNet v1
    "mobilenetv2_1.0": (224, "mobilenet_v2"),
    "squeezenet1.1": (224, "squeezenet1_1"),
    "vgg11_bn": (224, "vgg11_bn"),
    "densenet121": (224, "densenet121"),
    "inceptionv3": (299, "inception_v3"),
}
CLASSES = 1000
INFER_BATCHES = (1, 16)
TRAIN_BATCH = 16
# nets above ResNet-50's size train at batch 8: a batch-16 step of VGG-11 (7.6 GFLOP per image
# forward) or Inception-v3 at 299x299 takes seconds per system on 2 CPUs
TRAIN_BATCH_OF = {"vgg11_bn": 8, "inceptionv3": 8}


def is_case(name: str) -> bool:
    return ":" in name


def parse(case: str) -> tuple[str, int]:
    model, _, batch = case.partition(":")
    if model not in MODELS:
        raise KeyError(f"unknown zoo model {model!r}; known: {', '.join(MODELS)}")
    return model, int(batch)


def cases(model: str) -> list[tuple[str, str]]:
    """(case, mode) rows of one model: inference at batch 1 and 16, a training step."""
    out = [(f"{model}:{b}", "infer") for b in INFER_BATCHES]
    return out + [(f"{model}:{TRAIN_BATCH_OF.get(model, TRAIN_BATCH)}", "train")]


def data_shape(case: str) -> tuple[int, ...]:
    model, batch = parse(case)
    side = MODELS[model][0]
    return (batch, 3, side, side)


def title(case: str) -> str:
    model, batch = parse(case)
    return f"{model} b{batch}"


def inputs(case: str) -> tuple[np.ndarray, np.ndarray]:
    """(data, label), numpy seed 0, the same for every system."""
    rng = np.random.RandomState(0)
    shape = data_shape(case)
    data = rng.uniform(-1, 1, shape).astype(np.float32)
    label = rng.randint(0, CLASSES, shape[:1]).astype(np.float32)
    return data, label


# ------------------------------------------------------------------ exported files
def paths(model: str, root: Path = ZOO_DIR) -> dict[str, Path]:
    d = root / model
    return {"symbol": d / f"{model}-symbol.json", "params": d / f"{model}-0000.params",
            "npz": d / f"{model}-params.npz", "meta": d / "meta.json"}


def exported(model: str, root: Path = ZOO_DIR) -> bool:
    return all(p.exists() for p in paths(model, root).values())


def symbol(sym_module, case: str):
    """The exported graph with a softmax head, through ``aotexec.sym`` or ``mxnet.sym``."""
    model, _ = parse(case)
    net = sym_module.load(str(paths(model)["symbol"]))
    return sym_module.SoftmaxOutput(net, name="softmax")


def params(case: str) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """({arg: array}, {aux: array}) from the export's npz (no pickle)."""
    model, _ = parse(case)
    with np.load(paths(model)["npz"], allow_pickle=False) as z:
        args = {k[4:]: z[k] for k in z.files if k.startswith("arg:")}
        aux = {k[4:]: z[k] for k in z.files if k.startswith("aux:")}
    return args, aux


def export(model: str, root: Path = ZOO_DIR) -> dict:
    """Gluon export of ``model`` (MXNet venv only): symbol json, .params, npz, meta.json."""
    import mxnet as mx
    from mxnet.gluon.model_zoo import vision

    mx.random.seed(0)
    np.random.seed(0)
    p = paths(model, root)
    p["symbol"].parent.mkdir(parents=True, exist_ok=True)
    net = vision.get_model(model, pretrained=False)
    net.initialize(mx.init.Xavier())
    net.hybridize()
    side = MODELS[model][0]
    net(mx.nd.array(np.random.uniform(-1, 1, (1, 3, side, side)))).wait_to_read()
    net.export(str(p["symbol"].parent / model))   # -> <model>-symbol.json, <model>-0000.params
    _, arg_params, aux_params = mx.model.load_checkpoint(str(p["symbol"].parent / model), 0)
    arrays = {**{f"arg:{k}": v.asnumpy() for k, v in arg_params.items()},
              **{f"aux:{k}": v.asnumpy() for k, v in aux_params.items()}}
    np.savez(p["npz"], **arrays)
    meta = {"model": model, "image": side, "mxnet": mx.__version__, "init": "Xavier, mx.random.seed(0)",
            "parameters": int(sum(v.size for v in arrays.values()))}
    p["meta"].write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def ensure_exported(models: list[str], mx_python: str, log=print) -> None:
    """Export the models missing from the cache folder, in the MXNet venv (one process)."""
    import subprocess
    missing = [m for m in models if not exported(m)]
    if not missing:
        return
    log(f"exporting {', '.join(missing)} from MXNet's model zoo into {ZOO_DIR}")
    r = subprocess.run([mx_python, __file__, "export", *missing], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"zoo export failed:\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")


# ------------------------------------------------------------------ PyTorch / ONNX
def import_torchvision_models():
    """torchvision.models under the CPU torch (see venvs.TORCHVISION_SHIM for why the shim)."""
    import types
    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))
    import torchvision.models
    return torchvision.models


def has_torch(case: str) -> bool:
    return MODELS[parse(case)[0]][1] is not None


def torch_model(case: str):
    """The torchvision architecture of ``case``'s model, seed 0 (None where torchvision lacks it)."""
    import torch
    ctor = MODELS[parse(case)[0]][1]
    if ctor is None:
        return None
    torch.manual_seed(0)
    kw = {"aux_logits": False, "init_weights": True} if ctor == "inception_v3" else {}
    return getattr(import_torchvision_models(), ctor)(**kw)


def onnx_path(case: str, root: Path = ZOO_DIR) -> Path:
    return root / "onnx" / f"{case.replace(':', '-b')}.onnx"


def export_onnx(module, example, path: Path) -> Path:
    """``module`` + softmax as ONNX at the example's (static) shape, TorchScript exporter."""
    import torch

    class WithSoftmax(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return torch.nn.functional.softmax(self.m(x), dim=1)

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    with torch.no_grad():
        torch.onnx.export(WithSoftmax(module.eval()), (example,), str(tmp), dynamo=False,
                          input_names=["data"], output_names=["softmax"], opset_version=17)
    os.replace(tmp, path)
    return path


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] != "export":
        print("usage: zoo.py export MODEL...  (in the MXNet venv)", file=sys.stderr)
        return 2
    for model in argv[1:] or list(MODELS):
        meta = export(model)
        print(f"{model}: {meta['parameters']} parameters -> {paths(model)['symbol'].parent}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
