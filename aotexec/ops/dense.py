"""Dense layers: FullyConnected and Embedding (MXNet 1.9.1 src/operator/nn/fully_connected.cc,
src/operator/tensor/indexing_op.cc): parameters, shape rule, lowering and gradient per op."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..emitter import scatter_add_rows
from .registry import define, differentiable, lowers
from .rules import known, merge, prod, same_dtype, weighted_inputs


# --- FullyConnected (src/operator/nn/fully_connected.cc, FullyConnectedShape) ---
@dataclass(frozen=True)
class FullyConnectedParam:
    num_hidden: int
    no_bias: bool = False
    flatten: bool = True

    def check(self):
        if self.num_hidden < 1:
            raise ValueError(f"num_hidden must be >= 1, got {self.num_hidden}")


def _fc_shape(p: FullyConnectedParam, ins, outs):
    """MXNet's FullyConnectedShape: nothing before the data's rank is known; then the weight
    (once the features are known), the bias, the output, and the batch back from the output."""
    data, out = ins[0], outs[0]
    if data is None:
        return ins, outs
    features = data[-1:] if not p.flatten else tuple(data[1:])
    weight = (p.num_hidden, prod(features) if known(features) else -1)
    if p.flatten and not known(features):
        weight = None                    # MXNet cannot size the weight (and fails); unknown here
    new_out = tuple(data[:-1]) + (p.num_hidden,) if not p.flatten else (data[0], p.num_hidden)
    out = merge(out, new_out)
    data = (out[0],) + tuple(data[1:])
    bias = [] if p.no_bias else [(p.num_hidden,)]
    return [data, weight] + bias, [out]


FullyConnected = define("FullyConnected", params=FullyConnectedParam, inputs=weighted_inputs,
                        infer_shape=_fc_shape, infer_type=same_dtype, mirror_kept=True, matmul_like=True)


@lowers(FullyConnected)
def _fc_lower(ctx, p: FullyConnectedParam, x, w, bias=None):
    b = ctx.b
    if p.flatten:
        x = b.reshape(x, (x.shape[0], prod(x.shape[1:])))
    y = b.dot_general(x, w, contract=([x.ndim - 1], [1]))
    if bias is not None:
        y = b.add(y, b.broadcast_in_dim(bias, y.shape, [y.ndim - 1]))
    return y


@differentiable(FullyConnected, ("ograd0", "in0", "in1"))
def _fc_grad(ctx, p: FullyConnectedParam, g, x, w):
    """MXNet's _backward_FullyConnected: [d data, d weight, d bias]."""
    b = ctx.b
    x2 = b.reshape(x, (x.shape[0], prod(x.shape[1:]))) if p.flatten else \
        b.reshape(x, (prod(x.shape[:-1]), x.shape[-1]))
    g2 = b.reshape(g, (x2.shape[0], p.num_hidden))
    dx = b.reshape(b.dot_general(g2, w, contract=([1], [0])), x.shape)
    dw = b.dot_general(g2, x2, contract=([0], [0]))
    grads = [dx, dw]
    if not p.no_bias:
        grads.append(b.channel_sums(g, 1) if g.ndim == 2 else b.reduce(g2, [0], "add"))
    return grads


# --- Embedding (src/operator/tensor/indexing_op.cc) ---
@dataclass(frozen=True)
class EmbeddingParam:
    input_dim: int
    output_dim: int
    dtype: str = "float32"
    sparse_grad: bool = False


def _embedding_shape(p: EmbeddingParam, ins, outs):
    """MXNet's EmbeddingOpShape: nothing before the data's rank is known; then the weight, and
    the output from the (partial) data shape."""
    if ins[0] is None:
        return ins, outs
    return [ins[0], (p.input_dim, p.output_dim)], [tuple(ins[0]) + (p.output_dim,)]


def _embedding_type(p: EmbeddingParam, ins, outs):
    t = np.dtype(p.dtype)
    return [ins[0] if ins[0] is not None else t, t], [t]


Embedding = define("Embedding", params=EmbeddingParam, inputs=["data", "weight"],
                   no_grad_inputs=("data",), infer_shape=_embedding_shape, infer_type=_embedding_type)


@lowers(Embedding)
def _embedding_lower(ctx, p: EmbeddingParam, ids, w):
    """Ids arrive as float: clip to [0, input_dim-1] (MXNet's take clip mode), then gather rows."""
    b = ctx.b
    if ids.dtype.kind == "f":
        ids = b.clamp(0.0, ids, float(p.input_dim - 1))
        idx = b.convert(ids, "int32")
    else:
        idx = b.clamp(0, b.convert(ids, "int32"), p.input_dim - 1)
    return b.gather_rows(w, idx, 0)


@differentiable(Embedding, ("ograd0", "in0"))
def _embedding_grad(ctx, p: EmbeddingParam, g, ids):
    """The weight gets the head-gradient rows added at the (clipped) ids; ids get none."""
    b = ctx.b
    if ids.dtype.kind == "f":
        idx = b.convert(b.clamp(0.0, ids, float(p.input_dim - 1)), "int32")
    else:
        idx = b.clamp(0, b.convert(ids, "int32"), p.input_dim - 1)
    return [None, scatter_add_rows(b, (p.input_dim, p.output_dim), idx, g, 0)]
