"""Writes the symbol JSON + params .npz the device check compiles (run here, with the compiler venv)."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import aotexec as ax  # noqa: E402
from benchmarks import nets  # noqa: E402

SRC = ROOT / ".devcheck" / "src"
SRC.mkdir(exist_ok=True)

# convbn: a small conv net with BatchNorm, batch 8, 3x16x16 (ResNet-8 was dropped: its CUDA training compile
# with the default mirror policy grew iree-compile past 16 GB RSS in 7.5 min here and was stopped)
s = ax.sym
x = s.Variable("data")
x = s.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=8, no_bias=True, name="conv1")
x = s.BatchNorm(x, fix_gamma=False, eps=1e-5, momentum=0.9, name="bn1")
x = s.Activation(x, act_type="relu", name="relu1")
x = s.Pooling(x, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool1")
x = s.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=16, no_bias=True, name="conv2")
x = s.BatchNorm(x, fix_gamma=False, eps=1e-5, momentum=0.9, name="bn2")
x = s.Activation(x, act_type="relu", name="relu2")
x = s.Pooling(x, global_pool=True, pool_type="avg", kernel=(1, 1), name="gpool")
x = s.FullyConnected(x, num_hidden=10, name="fc")
sym = s.SoftmaxOutput(x, name="softmax")
(SRC / "convbn-symbol.json").write_text(sym.tojson())
args, _, auxs = sym.infer_shape(data=(8, 3, 16, 16))
rng = np.random.RandomState(0)
p = {n: nets.init_value(n, sh, rng) for n, sh in zip(sym.list_arguments(), args) if n not in ("data", "softmax_label")}
p.update({n: nets.init_value(n, sh, rng) for n, sh in zip(sym.list_auxiliary_states(), auxs)})
np.savez(SRC / "convbn-params.npz", **p)
print("convbn:", {k: v.shape for k, v in p.items()})
