"""CTCLoss / ctc_loss (MXNet 1.9.1 src/operator/nn/ctc_loss.cc, Graves et al. 2006, as
warp-ctc computes it): the negative log-likelihood of each label sequence under the
softmax of the activations ``data`` (T, N, A), summed over its alignments.

Labels are padded with 0 (``blank_label='first'``: blank is class 0) or -1 ('last': blank is
class A - 1); a sequence ends at its first padding value unless ``label_lengths`` gives the
lengths, and ``data_lengths`` the time steps each sequence uses. The forward variables
(alpha) and the backward ones (beta) are log-space recursions over time, one
``stablehlo.while`` each (the module does not grow with T); training computes the gradient
with respect to the activations in the forward pass, a hidden output (MXNet's
too), and backward scales it by the head gradient. Outputs are named output0 / output1, as
MXNet 1.9.1 names them (its FListOutputNames is registered misspelled)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .loop import put_step, step, while_loop
from .loss import softmax_values
from .registry import define, differentiable, lowers
from .rules import known

NEG = float("-inf")


@dataclass(frozen=True)
class CTCLossParam:
    use_data_lengths: bool = False
    use_label_lengths: bool = False
    blank_label: Literal["first", "last"] = "first"


def _inputs(p: CTCLossParam) -> list[str]:
    return ["data", "label"] + (["data_lengths"] if p.use_data_lengths else []) + \
        (["label_lengths"] if p.use_label_lengths else [])


def _ctc_shape(p: CTCLossParam, ins, outs):
    """MXNet's CTCLossOpShape checks."""
    data, label = ins[0], ins[1]
    if not known(data) or not known(label):
        return ins, outs
    if len(data) != 3:
        raise ValueError("The number of dimensions of data array must be 3.")
    if len(label) != 2:
        raise ValueError("The number of dimensions of labels array must be 2.")
    if data[1] != label[0]:
        raise ValueError("The batch size for the labels and data arrays must be the same.")
    if data[0] < label[1]:
        raise ValueError("The max number of labels cannot exceed the maximum sequence length of the data.")
    ins = list(ins)
    for k in range(2, len(ins)):
        if ins[k] is not None and len(ins[k]) != 1:
            raise ValueError("Data length array must be a vector." if _inputs(p)[k] == "data_lengths"
                             else "Label length array must be a vector.")
        ins[k] = (data[1],)
    return ins, [(data[1],), tuple(data)]


def _ctc_type(p: CTCLossParam, ins, outs):
    t = ins[0]
    return ins, (outs if t is None else [t, t])


CTCLoss = define("CTCLoss", "ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss", hint="ctcloss",
                 params=CTCLossParam, inputs=_inputs, outputs=["output0", "output1"], num_visible=lambda p: 1,
                 no_grad_inputs=("label", "data_lengths", "label_lengths"),
                 infer_shape=_ctc_shape, infer_type=_ctc_type)


def _lse(b, *xs):
    """Elementwise log(sum(exp(x))) that stays -inf where every term is -inf."""
    m = xs[0]
    for x in xs[1:]:
        m = b.max(m, x)
    safe = b.select(b.compare(m, NEG, "EQ"), b.full_like(m, 0.0), m)
    total = b.exp(b.sub(xs[0], safe))
    for x in xs[1:]:
        total = b.add(total, b.exp(b.sub(x, safe)))
    return b.add(safe, b.log(total))


def _shift(b, x, k: int, fill=NEG):
    """x[:, s - k] along the last axis (``fill`` shifted in); a negative k shifts the other way."""
    n, s = x.shape
    y = b.pad(x, fill, (0, max(k, 0)), (0, max(-k, 0)))
    return b.slice(y, (0, 0), (n, s)) if k > 0 else b.slice(y, (0, -k), (n, s - k))


@dataclass
class _Lattice:
    """The extended label sequence (blanks between and around the labels) of each example."""
    ext: object          # (N, S) int32 class of each position
    skip: object         # (N, S) bool: position s may be reached from s - 2
    valid: object        # (N, S) bool: s < 2 * length + 1
    ends: object         # (N, S) bool: the two positions a full alignment ends in
    onehot: object       # (N, S, A) ext as one-hot rows


def _lattice(b, p: CTCLossParam, label, label_len, classes: int) -> _Lattice:
    n, length = label.shape
    s = 2 * length + 1
    blank = 0 if p.blank_label == "first" else classes - 1
    lab = b.convert(label, "int32")
    blanks = b.full_like(lab, blank)
    pairs = b.concatenate([b.reshape(blanks, (n, length, 1)), b.reshape(lab, (n, length, 1))], 2)
    ext = b.concatenate([b.reshape(pairs, (n, 2 * length)), b.full_like(b.slice(lab, (0, 0), (n, 1)), blank)], 1)
    prev2 = b.concatenate([b.full_like(b.slice(ext, (0, 0), (n, 2)), blank), b.slice(ext, (0, 0), (n, s - 2))], 1)
    skip = b.op("stablehlo.and", [b.compare(ext, b.full_like(ext, blank), "NE"), b.compare(ext, prev2, "NE")],
                (n, s), "bool")
    pos = b.iota((n, s), 1, "int32")
    last = b.broadcast_in_dim(b.mul(label_len, 2), (n, s), (0,))
    valid = b.compare(pos, last, "LE")
    ends = b.op("stablehlo.and", [valid, b.compare(pos, b.sub(last, 1), "GE")], (n, s), "bool")
    cls = b.iota((n, s, classes), 2, "int32")
    onehot = b.compare(b.broadcast_in_dim(ext, (n, s, classes), (0, 1)), cls, "EQ")
    return _Lattice(ext, skip, valid, ends, onehot)


def _label_lengths(b, p: CTCLossParam, label, given):
    """(N,) int32: the given lengths, or the position of the first padding value."""
    if given is not None:
        return b.convert(given, "int32")
    n, length = label.shape
    pad = 0.0 if p.blank_label == "first" else -1.0
    at_pad = b.compare(b.convert(label, "float32"), b.full_like(b.convert(label, "float32"), pad), "EQ")
    pos = b.iota((n, length), 1, "int32")
    return b.reduce(b.select(at_pad, pos, b.full_like(pos, length)), [1], "min")


def ctc(b, p: CTCLossParam, data, label, data_len, label_len, want_grad: bool):
    """[(N,) losses, (T, N, A) gradient with respect to ``data`` or None]."""
    t_max, n, classes = data.shape
    logp = softmax_values(b, data, 2, log=True)
    lat = _lattice(b, p, label, label_len, classes)
    s = lat.ext.shape[1]
    hot = b.convert(lat.onehot, data.dtype)
    # emissions: log p of each lattice position's class, (T, N, S)
    emit = b.transpose(b.dot_general(logp, hot, contract=([2], [2]), batch=([1], [0])), (1, 0, 2))
    steps = b.convert(data_len, "int32") if data_len is not None else b.full_like(label_len, t_max)
    neg = b.full_like(b.convert(lat.ext, data.dtype), NEG)
    start = b.select(b.compare(b.iota((n, s), 1, "int32"), b.full_like(lat.ext, 0), "EQ"),
                     b.full_like(neg, 0.0), neg)

    def live(t, shape):
        """(N, ...) bool: time step ``t`` is inside each sequence."""
        return b.broadcast_in_dim(b.compare(b.broadcast_in_dim(t, (n,), ()), steps, "LT"), shape, (0,))

    def forward(t, state):
        alpha, alphas = state
        new = b.add(_lse(b, alpha, _shift(b, alpha, 1), b.select(lat.skip, _shift(b, alpha, 2), neg)),
                    step(b, emit, t))
        new = b.select(lat.valid, new, neg)
        new = b.select(live(t, (n, s)), new, alpha)
        return [new, put_step(b, alphas, t, new) if want_grad else alphas]

    seq = b.full_like(emit, NEG) if want_grad else b.full_like(b.slice(emit, (0, 0, 0), (1, n, s)), NEG)
    alpha, alphas = while_loop(b, t_max, [start, seq], forward)
    loss = b.neg(_reduce_lse(b, b.select(lat.ends, alpha, neg)))
    if not want_grad:
        return [loss, None]
    finish = b.select(lat.ends, b.full_like(neg, 0.0), neg)

    def backward(i, state):
        beta, gammas = state
        t = b.sub(b.constant(t_max - 1, (), "int32"), i)
        nxt = b.min(b.add(t, b.constant(1, (), "int32")), b.constant(t_max - 1, (), "int32"))
        e = b.add(beta, step(b, emit, nxt))
        new = _lse(b, e, _shift(b, e, -1), b.select(_shift(b, lat.skip, -2, False), _shift(b, e, -2), neg))
        at_end = b.compare(b.broadcast_in_dim(t, (n,), ()), b.sub(steps, 1), "GE")
        new = b.select(b.broadcast_in_dim(at_end, (n, s), (0,)), finish, b.select(lat.valid, new, neg))
        return [new, put_step(b, gammas, t, b.add(step(b, alphas, t), new))]

    _, gammas = while_loop(b, t_max, [finish, b.full_like(emit, NEG)], backward)
    # occupancy of each lattice position, summed per class: (N, T, A)
    occ = b.exp(b.add(gammas, b.broadcast_in_dim(loss, gammas.shape, (1,))))
    per_class = b.transpose(b.dot_general(occ, hot, contract=([2], [1]), batch=([1], [0])), (1, 0, 2))
    grad = b.sub(b.exp(logp), per_class)
    inside = b.compare(b.iota((t_max, n), 0, "int32"), b.broadcast_in_dim(steps, (t_max, n), (1,)), "LT")
    grad = b.select(b.broadcast_in_dim(inside, grad.shape, (0, 1)), grad, b.full_like(grad, 0.0))
    return [loss, grad]


def _reduce_lse(b, v):
    """log(sum(exp(v))) over the last axis of (N, S), -inf when every entry is."""
    m = b.reduce(v, [1], "max")
    safe = b.select(b.compare(m, NEG, "EQ"), b.full_like(m, 0.0), m)
    total = b.reduce(b.exp(b.sub(v, b.broadcast_in_dim(safe, v.shape, (0,)))), [1], "add")
    return b.add(safe, b.log(total))


@lowers(CTCLoss)
def _ctc_lower(ctx, p: CTCLossParam, data, label, *lengths):
    lengths = list(lengths)
    data_len = lengths.pop(0) if p.use_data_lengths else None
    label_len = _label_lengths(ctx.b, p, label, lengths.pop(0) if p.use_label_lengths else None)
    return ctc(ctx.b, p, data, label, data_len, label_len, want_grad=ctx.is_train and ctx.wants(1))


@differentiable(CTCLoss, ("ograd0", "out1"))
def _ctc_grad(ctx, p: CTCLossParam, g, grad):
    b = ctx.b
    return [b.mul(b.broadcast_in_dim(g, grad.shape, (1,)), grad), None] + [None] * (p.use_data_lengths +
                                                                                   p.use_label_lengths)
