"""The benchmark nets of shared/benchmark-nets.md, defined once for every system.

``symbol(sym, name)`` builds the net with any MXNet-compatible symbol module
(``aotexec.sym`` or ``mxnet.sym``), so aotexec and MXNet run the very same graph
and parameter names.  ``params(...)`` draws the inputs and parameters with
numpy seed 0 exactly as the spec says; PyTorch's modules (``torch_net``) are
loaded from the same arrays.  Needs numpy only (each worker imports it inside
its own virtualenv).
"""
from __future__ import annotations

import math

import numpy as np

# name -> (data shape, label shape)
NETS = {
    "mlp": ((64, 784), (64,)),
    "lenet": ((64, 1, 28, 28), (64,)),
    "resnet8": ((16, 3, 32, 32), (16,)),
    # not a benchmark: the smoke test's tiny net (one FullyConnected + SoftmaxOutput)
    "tiny": ((4, 8), (4,)),
}
BENCH_NETS = ("mlp", "lenet", "resnet8")
TITLES = {"mlp": "MLP b64", "lenet": "LeNet b64", "resnet8": "ResNet-8 b16", "tiny": "tiny b4"}


def symbol(sym, name: str):
    data = sym.Variable("data")
    if name == "tiny":
        net = sym.FullyConnected(data, num_hidden=10, name="fc1")
    elif name == "mlp":
        net = sym.FullyConnected(data, num_hidden=512, name="fc1")
        net = sym.Activation(net, act_type="relu", name="relu1")
        net = sym.FullyConnected(net, num_hidden=512, name="fc2")
        net = sym.Activation(net, act_type="relu", name="relu2")
        net = sym.FullyConnected(net, num_hidden=10, name="fc3")
    elif name == "lenet":
        net = sym.Convolution(data, kernel=(5, 5), num_filter=20, name="conv1")
        net = sym.Activation(net, act_type="tanh", name="tanh1")
        net = sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool1")
        net = sym.Convolution(net, kernel=(5, 5), num_filter=50, name="conv2")
        net = sym.Activation(net, act_type="tanh", name="tanh2")
        net = sym.Pooling(net, pool_type="max", kernel=(2, 2), stride=(2, 2), name="pool2")
        net = sym.Flatten(net, name="flatten")
        net = sym.FullyConnected(net, num_hidden=500, name="fc1")
        net = sym.Activation(net, act_type="tanh", name="tanh3")
        net = sym.FullyConnected(net, num_hidden=10, name="fc2")
    elif name == "resnet8":
        def conv_bn(x, nf, k, s, p, conv, bn):
            x = sym.Convolution(x, kernel=(k, k), stride=(s, s), pad=(p, p), num_filter=nf, no_bias=True, name=conv)
            return sym.BatchNorm(x, fix_gamma=False, eps=1e-5, momentum=0.9, name=bn)

        net = conv_bn(data, 16, 3, 1, 1, "conv0", "bn0")
        net = sym.Activation(net, act_type="relu", name="relu0")
        for k, (nf, stride) in enumerate(((16, 1), (32, 2), (64, 2)), start=1):
            s = f"s{k}"
            y = conv_bn(net, nf, 3, stride, 1, f"{s}_conv1", f"{s}_bn1")
            y = sym.Activation(y, act_type="relu", name=f"{s}_relu1")
            y = conv_bn(y, nf, 3, 1, 1, f"{s}_conv2", f"{s}_bn2")
            sc = net if stride == 1 else conv_bn(net, nf, 1, stride, 0, f"{s}_sc_conv", f"{s}_sc_bn")
            net = sym.elemwise_add(y, sc, name=f"{s}_add")
            net = sym.Activation(net, act_type="relu", name=f"{s}_relu2")
        net = sym.Pooling(net, global_pool=True, pool_type="avg", kernel=(1, 1), name="gpool")
        net = sym.FullyConnected(net, num_hidden=10, name="fc")
    else:
        raise KeyError(f"unknown net {name!r}; known: {', '.join(NETS)}")
    return sym.SoftmaxOutput(net, name="softmax")


def init_value(name: str, shape, rng: np.random.RandomState) -> np.ndarray:
    """The spec's initialisation for one parameter / aux state, by its MXNet name."""
    shape = tuple(int(d) for d in shape)
    if name.endswith("_weight"):
        a = math.sqrt(3.0 / max(1, int(np.prod(shape[1:]))))
        v = rng.uniform(-a, a, shape)
    elif name.endswith("_bias") or name.endswith("_beta") or name.endswith("_moving_mean"):
        v = rng.uniform(-0.1, 0.1, shape)
    elif name.endswith("_gamma") or name.endswith("_moving_var"):
        v = rng.uniform(0.5, 1.5, shape)
    else:
        raise KeyError(f"no initialisation rule for {name!r}")
    return v.astype(np.float32)


def inputs_and_params(name: str, arg_shapes: dict, aux_shapes: dict):
    """(data, label, {param: array}, {aux: array}) for net ``name``, seed 0, in name order."""
    rng = np.random.RandomState(0)
    dshape, lshape = NETS[name]
    data = rng.uniform(-1, 1, dshape).astype(np.float32)
    label = rng.randint(0, 10, lshape).astype(np.float32)
    params = {n: init_value(n, s, rng) for n, s in arg_shapes.items() if n not in ("data", "softmax_label")}
    aux = {n: init_value(n, s, rng) for n, s in aux_shapes.items()}
    return data, label, params, aux


def shapes_of(sym_obj, name: str):
    """({arg: shape}, {aux: shape}) through the symbol's own shape inference."""
    dshape, _ = NETS[name]
    arg_shapes, _, aux_shapes = sym_obj.infer_shape(data=dshape)
    return (dict(zip(sym_obj.list_arguments(), map(tuple, arg_shapes))),
            dict(zip(sym_obj.list_auxiliary_states(), map(tuple, aux_shapes))))


# ------------------------------------------------------------------ PyTorch
def torch_net(name: str, params: dict, aux: dict):
    """A torch.nn.Module computing the same logits, loaded with the same arrays."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def t(a):
        return torch.from_numpy(np.ascontiguousarray(a))

    def load(mod, prefix, bn=False):
        with torch.no_grad():
            if bn:
                mod.weight.copy_(t(params[prefix + "_gamma"]))
                mod.bias.copy_(t(params[prefix + "_beta"]))
                mod.running_mean.copy_(t(aux[prefix + "_moving_mean"]))
                mod.running_var.copy_(t(aux[prefix + "_moving_var"]))
            else:
                mod.weight.copy_(t(params[prefix + "_weight"]))
                if mod.bias is not None:
                    mod.bias.copy_(t(params[prefix + "_bias"]))
        return mod

    if name == "tiny":
        return load(nn.Linear(8, 10), "fc1")
    if name == "mlp":
        return nn.Sequential(load(nn.Linear(784, 512), "fc1"), nn.ReLU(),
                             load(nn.Linear(512, 512), "fc2"), nn.ReLU(),
                             load(nn.Linear(512, 10), "fc3"))
    if name == "lenet":
        return nn.Sequential(load(nn.Conv2d(1, 20, 5), "conv1"), nn.Tanh(), nn.MaxPool2d(2, 2),
                             load(nn.Conv2d(20, 50, 5), "conv2"), nn.Tanh(), nn.MaxPool2d(2, 2),
                             nn.Flatten(), load(nn.Linear(800, 500), "fc1"), nn.Tanh(),
                             load(nn.Linear(500, 10), "fc2"))
    if name != "resnet8":
        raise KeyError(name)

    def cb(cin, cout, k, s, p, conv, bn):
        return nn.Sequential(load(nn.Conv2d(cin, cout, k, s, p, bias=False), conv),
                             load(nn.BatchNorm2d(cout, eps=1e-5, momentum=0.1), bn, bn=True))

    class Block(nn.Module):
        def __init__(self, k, cin, cout, stride):
            super().__init__()
            s = f"s{k}"
            self.c1 = cb(cin, cout, 3, stride, 1, f"{s}_conv1", f"{s}_bn1")
            self.c2 = cb(cout, cout, 3, 1, 1, f"{s}_conv2", f"{s}_bn2")
            self.sc = None if stride == 1 else cb(cin, cout, 1, stride, 0, f"{s}_sc_conv", f"{s}_sc_bn")

        def forward(self, x):
            y = self.c2(F.relu(self.c1(x)))
            return F.relu(y + (x if self.sc is None else self.sc(x)))

    class ResNet8(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = cb(3, 16, 3, 1, 1, "conv0", "bn0")
            self.blocks = nn.Sequential(Block(1, 16, 16, 1), Block(2, 16, 32, 2), Block(3, 32, 64, 2))
            self.fc = load(nn.Linear(64, 10), "fc")

        def forward(self, x):
            x = self.blocks(F.relu(self.stem(x)))
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    return ResNet8()
