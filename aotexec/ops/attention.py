"""MXNet 1.9.1's interleaved multi-head attention products (src/operator/contrib/transformer.cc):
``_contrib_interleaved_matmul_selfatt_qk`` / ``_selfatt_valatt`` / ``_encdec_qk`` /
``_encdec_valatt``.

Projections arrive interleaved per head on the last axis, (seq, batch, heads * k * dim) with
k = 3 (queries, keys, values) or 2 (keys, values); the products are batched over
(batch * heads). Each op is a reshape / transpose into that batch and one ``dot_general``; its
gradient the transposed products, written back into the interleaved layout.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .linalg import EXPENSIVE, matmul
from .registry import define, differentiable, lowers
from .rules import known, same_dtype


@dataclass(frozen=True)
class InterleavedParam:
    heads: int = 1


def _split(b, x, heads: int, parts: int, index: int):
    """(L, B, heads * parts * D) -> projection ``index`` as (B * heads, L, D)."""
    seq, batch, width = x.shape
    d = width // (heads * parts)
    t = b.reshape(x, (seq, batch, heads, parts, d))
    t = b.slice(t, (0, 0, 0, index, 0), (seq, batch, heads, index + 1, d))
    t = b.transpose(b.reshape(t, (seq, batch, heads, d)), (1, 2, 0, 3))
    return b.reshape(t, (batch * heads, seq, d))


def _merge(b, grads, heads: int, parts: int, seq: int, batch: int):
    """The inverse of ``_split`` for every projection: ``grads[i]`` (B * heads, L, D) or None (zero)."""
    d = next(g for g in grads if g is not None).shape[-1]
    pieces = []
    for g in grads:
        if g is None:
            pieces.append(None)
            continue
        t = b.transpose(b.reshape(g, (batch, heads, seq, d)), (2, 0, 1, 3))       # (L, B, H, D)
        pieces.append(b.reshape(t, (seq, batch, heads, 1, d)))
    ref = next(p for p in pieces if p is not None)
    pieces = [p if p is not None else b.full_like(ref, 0.0) for p in pieces]
    return b.reshape(b.concatenate(pieces, 3), (seq, batch, heads * parts * d))


def _heads_out(b, y, heads: int):
    """(B * heads, L, D) -> (L, B, heads * D)."""
    bh, seq, d = y.shape
    t = b.transpose(b.reshape(y, (bh // heads, heads, seq, d)), (2, 0, 1, 3))
    return b.reshape(t, (seq, bh // heads, heads * d))


def _heads_in(b, g, heads: int):
    """(L, B, heads * D) -> (B * heads, L, D)."""
    seq, batch, width = g.shape
    t = b.transpose(b.reshape(g, (seq, batch, heads, width // heads)), (1, 2, 0, 3))
    return b.reshape(t, (batch * heads, seq, width // heads))


def _scores(b, q, k):
    """q k^T / sqrt(dim), per (batch * heads)."""
    return matmul(b, b.div(q, math.sqrt(q.shape[-1])), k, False, True)


def _scores_grads(b, g, q, k):
    """(dq, dk) of ``_scores``."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    return b.mul(matmul(b, g, k), scale), b.mul(matmul(b, g, q, True, False), scale)


def _weighted_grads(b, g, att, v, heads: int):
    """(dv, d attention) of ``_heads_out(att v)``."""
    gh = _heads_in(b, g, heads)
    return matmul(b, att, gh, True, False), matmul(b, gh, v, False, True)


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValueError(message)


# --- self-attention: queries and keys from one interleaved input --------------------------
def _selfatt_qk_shape(p: InterleavedParam, ins, outs):
    x = ins[0]
    if not known(x):
        return ins, outs
    _check(len(x) == 3, f"Input queries_keys_values should be 3D in seq_length-batch-proj_dim, currently is: {len(x)}D")
    return ins, [(p.heads * x[1], x[0], x[0])]


def _selfatt_valatt_shape(p: InterleavedParam, ins, outs):
    x, att = ins
    if not (known(x) and known(att)):
        return ins, outs
    _check(len(x) == 3, f"Input queries_keys_values should be 3D in seq_length-batch-3*proj_dim, currently is: {len(x)}D")
    _check(len(att) == 3, f"Input attention should be 3D in batch-seq_length-seq_length, currently is: {len(att)}D")
    _check(x[0] == att[1] and x[0] == att[2], "queries_keys_values.shape[0] and attention.shape[1] should be the same, "
           f"currently are {x[0]} and {att[1]}")
    _check(x[2] % 3 == 0, f"queries_keys_values.shape[2] should be a multiple of 3, currently is {x[2]}")
    return ins, [(x[0], x[1], x[2] // 3)]


selfatt_qk = define("_contrib_interleaved_matmul_selfatt_qk", **EXPENSIVE, hint="interleaved_matmul_selfatt_qk",
                    params=InterleavedParam, inputs=["queries_keys_values"], infer_shape=_selfatt_qk_shape,
                    infer_type=same_dtype)
selfatt_valatt = define("_contrib_interleaved_matmul_selfatt_valatt", **EXPENSIVE, hint="interleaved_matmul_selfatt_valatt",
                        params=InterleavedParam, inputs=["queries_keys_values", "attention"],
                        infer_shape=_selfatt_valatt_shape, infer_type=same_dtype)


@lowers(selfatt_qk)
def _selfatt_qk_lower(ctx, p: InterleavedParam, x):
    return _scores(ctx.b, _split(ctx.b, x, p.heads, 3, 0), _split(ctx.b, x, p.heads, 3, 1))


@differentiable(selfatt_qk, ("ograd0", "in0"))
def _selfatt_qk_grad(ctx, p: InterleavedParam, g, x):
    b = ctx.b
    dq, dk = _scores_grads(b, g, _split(b, x, p.heads, 3, 0), _split(b, x, p.heads, 3, 1))
    return [_merge(b, [dq, dk, None], p.heads, 3, x.shape[0], x.shape[1])]


@lowers(selfatt_valatt)
def _selfatt_valatt_lower(ctx, p: InterleavedParam, x, att):
    b = ctx.b
    return _heads_out(b, matmul(b, att, _split(b, x, p.heads, 3, 2)), p.heads)


@differentiable(selfatt_valatt, ("ograd0", "in0", "in1"))
def _selfatt_valatt_grad(ctx, p: InterleavedParam, g, x, att):
    b = ctx.b
    dv, datt = _weighted_grads(b, g, att, _split(b, x, p.heads, 3, 2), p.heads)
    return [_merge(b, [None, None, dv], p.heads, 3, x.shape[0], x.shape[1]), datt]


# --- encoder-decoder: queries separate, keys and values interleaved ------------------------
def _encdec_qk_shape(p: InterleavedParam, ins, outs):
    q, kv = ins
    if not (known(q) and known(kv)):
        return ins, outs
    _check(len(q) == 3, f"Input queries should be 3D in seq_length-batch-proj_dim, currently is {len(q)}D")
    _check(len(kv) == 3, f"Input queries should be 3D in seq_length-batch-2*proj_dim, currently is {len(kv)}D")
    _check(q[2] * 2 == kv[2], "keys_values.shape[2] should be equal to queries.shape[2] * 2, "
           f"currently are: {kv[2]} and {q[2]}")
    _check(q[1] == kv[1], f"queries.shape[1] should be equal to keys_values.shape[1], currently are: {q[1]} and {kv[1]}")
    return ins, [(q[1] * p.heads, q[0], kv[0])]


def _encdec_valatt_shape(p: InterleavedParam, ins, outs):
    kv, att = ins
    if not (known(kv) and known(att)):
        return ins, outs
    _check(len(kv) == 3, f"Input keys_values should be 3D in seq_length-batch-2*proj_dim, currently is {len(kv)}D")
    _check(len(att) == 3, f"Input attention should be 3D in batch-seq_length-seq_length, currently is {len(att)}D")
    _check(kv[0] == att[2], f"keys_values.shape[0] should be equal to attention.shape[2], currently are {kv[0]} and {att[2]}")
    _check(kv[1] * p.heads == att[0], "attention.shape[0] should be equal to keys_values.shape[1] * heads, "
           f"currently are: {att[0]} and {kv[1]}")
    return ins, [(att[1], kv[1], kv[2] // 2)]


encdec_qk = define("_contrib_interleaved_matmul_encdec_qk", **EXPENSIVE, hint="interleaved_matmul_encdec_qk",
                   params=InterleavedParam, inputs=["queries", "keys_values"], infer_shape=_encdec_qk_shape,
                   infer_type=same_dtype)
encdec_valatt = define("_contrib_interleaved_matmul_encdec_valatt", **EXPENSIVE, hint="interleaved_matmul_encdec_valatt",
                       params=InterleavedParam, inputs=["keys_values", "attention"],
                       infer_shape=_encdec_valatt_shape, infer_type=same_dtype)


@lowers(encdec_qk)
def _encdec_qk_lower(ctx, p: InterleavedParam, q, kv):
    return _scores(ctx.b, _split(ctx.b, q, p.heads, 1, 0), _split(ctx.b, kv, p.heads, 2, 0))


@differentiable(encdec_qk, ("ograd0", "in0", "in1"))
def _encdec_qk_grad(ctx, p: InterleavedParam, g, q, kv):
    b = ctx.b
    dq, dk = _scores_grads(b, g, _split(b, q, p.heads, 1, 0), _split(b, kv, p.heads, 2, 0))
    return [_merge(b, [dq], p.heads, 1, q.shape[0], q.shape[1]),
            _merge(b, [dk, None], p.heads, 2, kv.shape[0], kv.shape[1])]


@lowers(encdec_valatt)
def _encdec_valatt_lower(ctx, p: InterleavedParam, kv, att):
    b = ctx.b
    return _heads_out(b, matmul(b, att, _split(b, kv, p.heads, 2, 1)), p.heads)


@differentiable(encdec_valatt, ("ograd0", "in0", "in1"))
def _encdec_valatt_grad(ctx, p: InterleavedParam, g, kv, att):
    b = ctx.b
    dv, datt = _weighted_grads(b, g, att, _split(b, kv, p.heads, 2, 1), p.heads)
    return [_merge(b, [None, dv], p.heads, 2, kv.shape[0], kv.shape[1]), datt]
