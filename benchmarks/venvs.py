"""Virtualenvs for the foreign systems, created by the harness itself.

Each peer gets its own venv under ``.bench-venvs/`` (git-ignored) so its pinned
numpy never meets aotexec's:

- ``mxnet``: ``mxnet==1.9.1`` with ``numpy==1.23.5`` (MXNet 1.9.1 breaks on numpy >= 1.24);
- ``torch``: ``torch==2.13.0`` (exact pin: pip takes the CPU wheel from local disk;
  an unpinned torch would pull a multi-GB CUDA build), ``torchvision==0.28.0`` (the release
  made for torch 2.13.0: the model zoo's architectures), ``onnx`` + ``onnxruntime`` (the zoo's
  ONNX Runtime row: ``torch.onnx.export`` needs onnx) and numpy.
"""
from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_DIR = Path(os.environ.get("AOTEXEC_BENCH_VENVS", ROOT / ".bench-venvs"))

REQUIREMENTS = {
    "mxnet": ["mxnet==1.9.1", "numpy==1.23.5"],
    "torch": ["torch==2.13.0", "torchvision==0.28.0", "onnx", "onnxruntime", "numpy"],
}
# PyPI's torchvision 0.28.0 is a CUDA build: its C++ ops (_C.so) need libtorch_cuda, which the CPU
# torch lacks, and `import torchvision` then fails registering fake kernels for them. The model
# definitions are pure Python, so the zoo skips that one module (no detection ops are used).
TORCHVISION_SHIM = ("sys.modules.setdefault('torchvision._meta_registrations', "
                    "types.ModuleType('torchvision._meta_registrations'))")
# a probe that must succeed for the venv to count as ready
PROBES = {
    "mxnet": "import mxnet, numpy; assert mxnet.__version__ == '1.9.1', mxnet.__version__",
    "torch": "import sys, types, torch, onnx, onnxruntime, numpy; "
             f"{TORCHVISION_SHIM}; import torchvision.models; "
             "assert torch.__version__.startswith('2.13.0'), torch.__version__; "
             "assert torchvision.__version__.startswith('0.28.0'), torchvision.__version__",
}


def python_of(system: str) -> Path:
    return VENV_DIR / system / "bin" / "python"


def ready(system: str, python: Path | None = None) -> bool:
    py = python or python_of(system)
    if not Path(py).exists():
        return False
    r = subprocess.run([str(py), "-c", PROBES[system]], capture_output=True, text=True)
    return r.returncode == 0


def ensure(system: str, log=print) -> Path:
    """The python of ``system``'s venv, creating and installing it when missing or broken."""
    py = python_of(system)
    if ready(system):
        return py
    d = VENV_DIR / system
    log(f"creating {d} ({' '.join(REQUIREMENTS[system])}); this takes a few minutes once")
    venv.EnvBuilder(with_pip=True, clear=d.exists()).create(d)
    cmd = [str(py), "-m", "pip", "install", "--quiet", *REQUIREMENTS[system]]
    r = subprocess.run(cmd, text=True, capture_output=True)
    if r.returncode != 0 or not ready(system):
        raise RuntimeError(f"installing {system} into {d} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return py


if __name__ == "__main__":
    for s in sys.argv[1:] or list(REQUIREMENTS):
        print(s, ensure(s))


def native_mxnet(script: str, argv: list[str]):
    """For the tools that write MXNet reference data: ``(mxnet, None)`` imported with its native
    kernels (no MKL-DNN, no subgraph fusion: MKL-DNN failed densenet's narrow concat backward),
    or ``(None, exit code)`` of ``script`` re-run with ``argv`` in the MXNet virtualenv when
    this Python has no MXNet."""
    os.environ.setdefault("MXNET_SUBGRAPH_BACKEND", "NONE")
    os.environ.setdefault("MXNET_MKLDNN_ENABLED", "0")
    os.environ.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")   # one warning per op otherwise
    try:
        import mxnet
    except ImportError:
        return None, subprocess.call([str(ensure("mxnet")), script, *argv])
    return mxnet, None
