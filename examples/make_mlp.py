"""Write the bundled example: an MNIST-sized MLP symbol, seeded parameters and an input batch.

    python examples/make_mlp.py        # writes mlp-symbol.json, mlp-params.npz, mlp-input.npy
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import aotexec as ax

HERE = Path(__file__).parent


def mlp() -> ax.sym.Symbol:
    data = ax.sym.Variable("data")
    x = ax.sym.FullyConnected(data, num_hidden=128, name="fc1")
    x = ax.sym.Activation(x, act_type="relu", name="relu1")
    x = ax.sym.FullyConnected(x, num_hidden=64, name="fc2")
    x = ax.sym.Activation(x, act_type="relu", name="relu2")
    x = ax.sym.FullyConnected(x, num_hidden=10, name="fc3")
    return ax.sym.SoftmaxOutput(x, name="softmax")


def main(batch: int = 8) -> None:
    sym = mlp()
    sym.save(str(HERE / "mlp-symbol.json"))
    rng = np.random.default_rng(0)
    arg_shapes, _, _ = sym.infer_shape(data=(batch, 784))
    params = {}
    for name, shape in zip(sym.list_arguments(), arg_shapes):
        if name.endswith("_weight"):
            a = np.sqrt(3.0 / np.prod(shape[1:]))
            params["arg:" + name] = rng.uniform(-a, a, shape).astype(np.float32)
        elif name.endswith("_bias"):
            params["arg:" + name] = rng.uniform(-0.1, 0.1, shape).astype(np.float32)
    np.savez(HERE / "mlp-params.npz", **params)
    np.save(HERE / "mlp-input.npy", rng.uniform(-1, 1, (batch, 784)).astype(np.float32))
    print(f"wrote {HERE / 'mlp-symbol.json'}, mlp-params.npz ({len(params)} arrays), mlp-input.npy")


if __name__ == "__main__":
    main()
