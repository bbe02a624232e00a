"""Train the bundled MLP (or LeNet) on a small synthetic dataset with plain SGD
written against the executor's ``arg_arrays`` / ``grad_arrays`` (MXNet style).

    python examples/train.py --net mlp --epochs 5
    python examples/train.py --net lenet --epochs 3
"""
from __future__ import annotations

import argparse

import numpy as np

import aotexec as ax


def mlp() -> ax.sym.Symbol:
    x = ax.sym.Variable("data")
    x = ax.sym.Activation(ax.sym.FullyConnected(x, num_hidden=128, name="fc1"), act_type="relu", name="relu1")
    x = ax.sym.Activation(ax.sym.FullyConnected(x, num_hidden=64, name="fc2"), act_type="relu", name="relu2")
    return ax.sym.SoftmaxOutput(ax.sym.FullyConnected(x, num_hidden=10, name="fc3"), name="softmax")


def lenet(filters: tuple[int, int] = (20, 50), hidden: int = 500) -> ax.sym.Symbol:
    x = ax.sym.Variable("data")
    x = ax.sym.Convolution(x, kernel=(5, 5), num_filter=filters[0], name="conv1")
    x = ax.sym.Pooling(ax.sym.Activation(x, act_type="tanh", name="tanh1"), pool_type="max", kernel=(2, 2),
                       stride=(2, 2), name="pool1")
    x = ax.sym.Convolution(x, kernel=(5, 5), num_filter=filters[1], name="conv2")
    x = ax.sym.Pooling(ax.sym.Activation(x, act_type="tanh", name="tanh2"), pool_type="max", kernel=(2, 2),
                       stride=(2, 2), name="pool2")
    x = ax.sym.FullyConnected(ax.sym.Flatten(x, name="flatten"), num_hidden=hidden, name="fc1")
    x = ax.sym.FullyConnected(ax.sym.Activation(x, act_type="tanh", name="tanh3"), num_hidden=10, name="fc2")
    return ax.sym.SoftmaxOutput(x, name="softmax")


def synthetic(n: int, shape: tuple[int, ...], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Ten classes: each a fixed random template plus noise."""
    rng = np.random.default_rng(seed)
    templates = rng.normal(0, 1, (10,) + shape).astype(np.float32)
    labels = rng.integers(0, 10, n)
    data = templates[labels] + rng.normal(0, 1.5, (n,) + shape).astype(np.float32)
    return data.astype(np.float32), labels.astype(np.float32)


def init_params(ex, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    for name, arr in ex.arg_dict.items():
        if name.endswith("_weight"):
            a = np.sqrt(3.0 / np.prod(arr.shape[1:]))
            arr[:] = rng.uniform(-a, a, arr.shape).astype(np.float32)
        elif name.endswith("_bias"):
            arr[:] = 0


def train(net: str = "mlp", epochs: int = 5, batch: int = 32, samples: int = 640, lr: float = 0.05,
          ctx=None, log=print) -> list[tuple[float, float]]:
    ctx = ctx or ax.cpu()
    sym, shape = (mlp(), (784,)) if net == "mlp" else (lenet(), (1, 28, 28))
    x, y = synthetic(samples, shape)
    params = [n for n in sym.list_arguments() if n not in ("data", "softmax_label")]
    req = {n: ("write" if n in params else "null") for n in sym.list_arguments()}
    ex = sym.simple_bind(ctx, grad_req=req, data=(batch,) + shape)
    init_params(ex)
    history = []
    for epoch in range(epochs):
        loss, correct = 0.0, 0
        for i in range(0, samples - batch + 1, batch):
            xb, yb = x[i:i + batch], y[i:i + batch]
            probs = ex.forward(is_train=True, data=xb, softmax_label=yb)[0].asnumpy()
            ex.backward()
            for name in params:   # plain SGD on the executor's own arrays
                w, g = ex.arg_dict[name], ex.grad_dict[name]
                w[:] = w.asnumpy() - (lr / batch) * g.asnumpy()
            loss -= float(np.log(probs[np.arange(batch), yb.astype(int)] + 1e-12).sum())
            correct += int((probs.argmax(1) == yb).sum())
        n = samples - samples % batch
        history.append((loss / n, correct / n))
        log(f"epoch {epoch}: loss {loss / n:.4f}  accuracy {correct / n:.3f}")
    return history


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--net", choices=["mlp", "lenet"], default="mlp")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--device", choices=["cpu", "vulkan"], default="cpu")
    a = ap.parse_args()
    train(a.net, a.epochs, ctx=ax.cpu() if a.device == "cpu" else ax.vulkan())
