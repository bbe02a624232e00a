"""Writes tests/data/optimizer_reference.npz: MXNet 1.9.1's SGD / momentum / Adam updates on fixed
weights and gradients (several steps, weight decay, clipping, rescale_grad, a bias without wd),
which tests/test_optimizer.py checks aotexec.optimizer against.

Run with MXNet 1.9.1's interpreter (benchmarks/venvs.py builds .bench-venvs/mxnet):
    .bench-venvs/mxnet/bin/python tools/make_optimizer_reference.py
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

# name -> (optimizer, kwargs); the test builds aotexec's with the same
CASES = {
    "sgd": ("sgd", dict(learning_rate=0.1, wd=0.01, rescale_grad=0.25)),
    "sgd_momentum": ("sgd", dict(learning_rate=0.05, momentum=0.9, wd=0.001, rescale_grad=0.5)),
    "sgd_clip": ("sgd", dict(learning_rate=0.1, momentum=0.5, clip_gradient=0.3)),
    "adam": ("adam", dict(learning_rate=0.01, wd=0.01, rescale_grad=0.5)),
    "adam_clip": ("adam", dict(learning_rate=0.02, beta1=0.8, beta2=0.99, epsilon=1e-6, clip_gradient=0.4)),
}
NAMES = {0: "fc_weight", 1: "fc_bias"}   # MXNet gives fc_bias no weight decay
STEPS = 5


def inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    out = {f"w{i}": rng.normal(size=(3, 4)).astype(np.float32) for i in NAMES}
    out.update({f"g{i}_{s}": rng.normal(size=(3, 4)).astype(np.float32) for i in NAMES for s in range(STEPS)})
    return out


def main() -> None:
    import mxnet as mx     # imported here: the test reads CASES without MXNet
    data = inputs()
    res = dict(data)
    for case, (name, kw) in CASES.items():
        opt = mx.optimizer.create(name, param_idx2name=NAMES, **kw)
        upd = mx.optimizer.get_updater(opt)
        ws = {i: mx.nd.array(data[f"w{i}"]) for i in NAMES}
        for s in range(STEPS):
            for i in NAMES:
                upd(i, mx.nd.array(data[f"g{i}_{s}"]), ws[i])
        res.update({f"{case}_w{i}": ws[i].asnumpy() for i in NAMES})
    out = Path(__file__).resolve().parents[1] / "tests" / "data" / "optimizer_reference.npz"
    np.savez(out, **res)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
