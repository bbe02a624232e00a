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
    data = ins[0]
    ins = list(ins)
    out = outs[0]
    feature_dims = (data[1:] if p.flatten else data[-1:]) if data is not None else None
    if feature_dims is not None and known(feature_dims) and len(data) >= 1:
        # the weight needs only the feature dims (MXNet infers it from a (0, k) data shape)
        ins[1] = (p.num_hidden, prod(feature_dims))
        if not p.no_bias:
            ins[2] = (p.num_hidden,)
    if data is not None and known(data):
        k = prod(data[1:]) if p.flatten else data[-1]
        ins[1] = (p.num_hidden, k)
        if not p.no_bias:
            ins[2] = (p.num_hidden,)
        out = (data[0], p.num_hidden) if p.flatten else tuple(data[:-1]) + (p.num_hidden,)
    elif data is not None and p.flatten:
        out = merge(out, (data[0], p.num_hidden))
    if out is not None and data is not None and p.flatten and out[0] >= 0 and data[0] < 0:
        ins[0] = (out[0],) + tuple(data[1:])
    return ins, [out]


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
        grads.append(b.reduce(g2, [0], "add"))
    return grads


# --- Embedding (src/operator/tensor/indexing_op.cc) ---
@dataclass(frozen=True)
class EmbeddingParam:
    input_dim: int
    output_dim: int
    dtype: str = "float32"
    sparse_grad: bool = False


def _embedding_shape(p: EmbeddingParam, ins, outs):
    ins = list(ins)
    ins[1] = (p.input_dim, p.output_dim)
    if known(ins[0]):
        return ins, [tuple(ins[0]) + (p.output_dim,)]
    return ins, outs


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
