"""MXNet's fused recurrent layers: RNN (modes rnn_relu, rnn_tanh, lstm, gru; stacked,
bidirectional, LSTM projection and state clipping, variable lengths) and _rnn_param_concat,
how Gluon's rnn layers join their parameters (MXNet 1.9.1 src/operator/rnn.cc, rnn-inl.h,
rnn_impl.h, nn/concat.cc; python/mxnet/gluon/rnn/rnn_layer.py): parameters, shape rule,
lowering and gradient.

Each layer and direction is one ``stablehlo.while`` over the time steps (``ops.loop``), so the
module does not grow with the sequence length: the input projection of all steps is one matrix
product before the loop, the recurrent product one per step inside.  The gradient is a second
loop, backwards in time, that recomputes each step's gates from the layer outputs (and LSTM cell
states) forward kept; those are hidden outputs of the op (MXNet's reserve space), computed only
when a backward node reads them.  The weight gradients are then one product over all steps.

Dropout between stacked layers (``p``, training only, as MXNet) multiplies each layer's output
but the last by a Bernoulli(1 - p) / (1 - p) mask drawn once for all layers; the masks are a
third hidden output, so the gradient passes through the same ones.

``use_sequence_length`` follows cuDNN's padded layout (MXNet runs it only on cuDNN): a step at or
past a sequence's length keeps the state and outputs zeros, so the backward direction starts at
each sequence's last valid step and ``state_output`` holds the state at its length.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal, Optional

from ..emitter import Emitter, Value
from .activation import dropout_mask
from .join_split import ConcatParam, _concat_grad, _concat_lower
from .registry import define, differentiable, lowers
from .rnn_cells import Cell
from .rnn_layers import ParamLayout, grad_direction, run_direction, shifted_prev
from .rules import known, norm_axis, same_dtype


@dataclass(frozen=True)
class RNNParam:
    state_size: int
    num_layers: int
    mode: Literal["rnn_relu", "rnn_tanh", "lstm", "gru"]
    bidirectional: bool = False
    p: float = 0.0
    state_outputs: bool = False
    projection_size: Optional[int] = None
    lstm_state_clip_min: Optional[float] = None
    lstm_state_clip_max: Optional[float] = None
    lstm_state_clip_nan: bool = False
    use_sequence_length: bool = False

    def check(self):
        if not 0.0 <= self.p < 1.0:
            raise ValueError(f"p must be in [0, 1), got {self.p}")
        if self.projection_size is not None:
            if self.mode != "lstm":
                raise ValueError("Projection is only supported for LSTM.")
            if self.state_size < self.projection_size:
                raise ValueError("State size must be larger than projection size.")
        clips = (self.lstm_state_clip_min, self.lstm_state_clip_max)
        if clips != (None, None):
            if self.mode != "lstm":
                raise ValueError("State clipping is only supported for LSTM.")
            if None in clips:
                raise ValueError("lstm_state_clip_min and lstm_state_clip_max must be specified together.")
            if clips[1] < clips[0]:
                raise ValueError("lstm_state_clip_max must be greater or equal to lstm_state_clip_min")

    @property
    def dirs(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def lstm(self) -> bool:
        return self.mode == "lstm"

    @property
    def out_size(self) -> int:
        """Per direction: what a layer outputs and carries as h (the projection, if any)."""
        return self.projection_size or self.state_size

    def cell(self) -> Cell:
        clip = None if self.lstm_state_clip_min is None else (self.lstm_state_clip_min, self.lstm_state_clip_max)
        return Cell(self.mode, self.state_size, clip, self.lstm_state_clip_nan)


def _inputs(p: RNNParam) -> list[str]:
    return (["data", "parameters", "state"] + (["state_cell"] if p.lstm else [])
            + (["sequence_length"] if p.use_sequence_length else []))


def _visible(p: RNNParam) -> list[str]:
    if not p.state_outputs:
        return ["output"]
    return ["output", "state_output"] + (["statecell_output"] if p.lstm else [])


def _outputs(p: RNNParam) -> list[str]:
    # hidden: every layer's outputs (and LSTM cell states), what backward recomputes steps from,
    # and the dropout masks between stacked layers (a value only where training draws them)
    return (_visible(p) + ["layer_outputs"] + (["layer_cells"] if p.lstm else [])
            + (["layer_masks"] if p.num_layers > 1 else []))


def _drops(p: RNNParam) -> bool:
    """Whether training draws dropout masks between layers."""
    return p.p > 0 and p.num_layers > 1


def _rnn_shape(p: RNNParam, ins, outs):
    data = ins[0]
    if not known(data):
        return ins, outs
    if len(data) != 3:
        raise ValueError("Input data should be rank-3 tensor of dim [sequence length, batch size, input size]")
    t, n, i = data
    ld, h, o, dirs = p.num_layers * p.dirs, p.state_size, p.out_size, p.dirs
    ins = list(ins)
    ins[1] = (ParamLayout(p, i).size,)
    ins[2] = (ld, n, o)
    if p.lstm:
        ins[3] = (ld, n, h)
    if p.use_sequence_length:
        ins[-1] = (n,)
    res = [(t, n, dirs * o)]
    if p.state_outputs:
        res += [(ld, n, o)] + ([(ld, n, h)] if p.lstm else [])
    res += [(p.num_layers, t, n, dirs * o)] + ([(p.num_layers, t, n, dirs * h)] if p.lstm else [])
    if p.num_layers > 1:
        res.append((p.num_layers - 1, t, n, dirs * o))
    return ins, res


def _rnn_type(p: RNNParam, ins, outs):
    """One float dtype throughout; sequence_length keeps its own (ids may be integers)."""
    t = ins[0] if ins[0] is not None else next((x for x in outs if x is not None), None)
    if t is None:
        return ins, outs
    k = len(ins) - 1 if p.use_sequence_length else len(ins)
    return [t] * k + ([ins[-1] if ins[-1] is not None else t] if p.use_sequence_length else []), [t] * len(outs)


def _grad_reads(p: RNNParam) -> list[str]:
    nvis, nin = len(_visible(p)), len(_inputs(p))
    hidden = [f"out{nvis}"] + ([f"out{nvis + 1}"] if p.lstm else [])
    if _drops(p):
        hidden.append(f"out{nvis + 1 + p.lstm}")
    return [f"ograd{k}" for k in range(nvis)] + [f"in{k}" for k in range(nin)] + hidden


RNN = define("RNN", stateful=True, params=RNNParam, inputs=_inputs, outputs=_outputs, num_visible=lambda p: len(_visible(p)),
             no_grad_inputs=("sequence_length",), infer_shape=_rnn_shape, infer_type=_rnn_type,
             mirror_kept=True, matmul_like=True, train_mode=_drops, random=True,
             random_when=lambda p, is_train: is_train and _drops(p),
             inference_params=lambda p: dataclasses.replace(p, p=0.0))


@dataclass
class _Inputs:
    """The op's inputs by name (the positional layout depends on mode and use_sequence_length)."""
    data: Value
    params: Value
    state: Value
    state_cell: Value | None
    lengths: Value | None

    @classmethod
    def of(cls, p: RNNParam, values) -> "_Inputs":
        values = list(values)
        data, params, state = values[:3]
        cell = values[3] if p.lstm else None
        lengths = values[-1] if p.use_sequence_length else None
        return cls(data, params, state, cell, lengths)


def _stack(b: Emitter, xs: list[Value]) -> Value:
    return b.concatenate([b.reshape(x, (1,) + x.shape) for x in xs], 0)


@lowers(RNN)
def _rnn_lower(ctx, p: RNNParam, *values):
    b, v = ctx.b, _Inputs.of(p, values)
    layout = ParamLayout(p, v.data.shape[2])
    keep = ctx.wants(len(_visible(p)))        # backward reads the hidden outputs
    lengths = b.convert(v.lengths, "int32") if v.lengths is not None else None
    x, hs, cs, ys, cseqs = v.data, [], [], [], []
    masks = None
    if ctx.is_train and _drops(p):
        t, n = v.data.shape[:2]
        masks = dropout_mask(b, ctx.rng_state, ctx.node_index, (p.num_layers - 1, t, n, p.dirs * p.out_size),
                             p.p, v.data.dtype)
    for layer in range(p.num_layers):
        runs = []
        for d in range(p.dirs):
            k = layer * p.dirs + d
            w = layout.weights(b, v.params, layer, d)
            c0 = _row(b, v.state_cell, k) if p.lstm else None
            runs.append(run_direction(b, p.cell(), w, x, _row(b, v.state, k), c0, lengths, reverse=d == 1,
                                      keep_cells=keep and p.lstm))
        x = b.concatenate([r.y for r in runs], 2)
        hs += [r.h for r in runs]
        cs += [r.c for r in runs]
        ys.append(x)
        if keep and p.lstm:
            cseqs.append(b.concatenate([r.cells for r in runs], 2))
        if masks is not None and layer < p.num_layers - 1:
            x = b.mul(x, _row(b, masks, layer))
    out = [x]
    if p.state_outputs:
        out += [_stack(b, hs)] + ([_stack(b, cs)] if p.lstm else [])
    if keep:
        out += [_stack(b, ys)] + ([_stack(b, cseqs)] if p.lstm else []) + ([masks] if p.num_layers > 1 else [])
    return out


def _row(b: Emitter, x: Value, k: int) -> Value:
    return b.reshape(b.slice(x, (k,) + (0,) * (x.ndim - 1), (k + 1,) + x.shape[1:]), x.shape[1:])


@differentiable(RNN, _grad_reads)
def _rnn_grad(ctx, p: RNNParam, *reads):
    b = ctx.b
    nvis, nin = len(_visible(p)), len(_inputs(p))
    heads, v = reads[:nvis], _Inputs.of(p, reads[nvis:nvis + nin])
    layer_y = reads[nvis + nin]
    layer_c = reads[nvis + nin + 1] if p.lstm else None
    masks = reads[nvis + nin + 1 + p.lstm] if _drops(p) else None
    dhy = heads[1] if p.state_outputs else None
    dcy = heads[2] if p.state_outputs and p.lstm else None
    layout = ParamLayout(p, v.data.shape[2])
    lengths = b.convert(v.lengths, "int32") if v.lengths is not None else None
    o, h = p.out_size, p.state_size
    grads: dict[tuple[int, int], dict[str, Value]] = {}
    dh0, dc0 = {}, {}
    dy = heads[0]
    for layer in reversed(range(p.num_layers)):
        x = v.data if layer == 0 else _row(b, layer_y, layer - 1)
        if layer > 0 and masks is not None:
            x = b.mul(x, _row(b, masks, layer - 1))
        y = _row(b, layer_y, layer)
        cells = _row(b, layer_c, layer) if p.lstm else None
        dx = None
        for d in range(p.dirs):
            k = layer * p.dirs + d
            w = layout.weights(b, v.params, layer, d)
            h0 = _row(b, v.state, k)
            c0 = _row(b, v.state_cell, k) if p.lstm else None
            prev_h = shifted_prev(b, _cols(b, y, d, o), h0, lengths, reverse=d == 1)
            prev_c = shifted_prev(b, _cols(b, cells, d, h), c0, None, reverse=d == 1) if p.lstm else None
            dh_end = _row(b, dhy, k) if dhy is not None else b.full_like(h0, 0.0)
            dc_end = (_row(b, dcy, k) if dcy is not None else b.full_like(c0, 0.0)) if p.lstm else None
            g = grad_direction(b, p.cell(), w, x, prev_h, prev_c, _cols(b, dy, d, o), dh_end, dc_end, lengths,
                               reverse=d == 1)
            grads[(layer, d)] = g.weights
            dh0[k], dc0[k] = g.dh0, g.dc0
            dx = g.dx if dx is None else b.add(dx, g.dx)
        dy = dx if layer == 0 or masks is None else b.mul(dx, _row(b, masks, layer - 1))
    out = [dy, layout.flat_grad(b, grads), _stack(b, [dh0[k] for k in sorted(dh0)])]
    if p.lstm:
        out.append(_stack(b, [dc0[k] for k in sorted(dc0)]))
    if p.use_sequence_length:
        out.append(None)
    return out


def _cols(b: Emitter, x: Value, d: int, size: int) -> Value:
    """Direction ``d``'s features of a (T, N, dirs * size) value."""
    if x.shape[2] == size:
        return x
    return b.slice(x, (0, 0, d * size), (x.shape[0], x.shape[1], (d + 1) * size))


# --- _rnn_param_concat (nn/concat.cc): Concat whose shape rule infers up to two inputs' sizes
# along ``dim`` from the output (Gluon's i2h weights before the input size is known)
def _rnn_param_concat_shape(p: ConcatParam, ins, outs):
    base = next((s for s in list(ins) + list(outs) if s is not None), None)
    if base is None:
        return ins, outs
    ax = norm_axis(p.dim, len(base))
    ins = list(ins)
    unknown = [k for k, s in enumerate(ins) if s is None or s[ax] < 0]
    size = sum(s[ax] for k, s in enumerate(ins) if k not in unknown)
    out = outs[0]
    if not unknown:
        return ins, [tuple(size if j == ax else d for j, d in enumerate(ins[0]))]
    if out is not None and out[ax] >= 0:
        rest = out[ax] - size
        if rest < 0:
            raise ValueError(f"Input size already exceeds output size. Residual: {rest}")
        if len(unknown) > 2:
            raise ValueError(f"Expecting 1 or 2 inputs that need shape inference. Got: {len(unknown)}")
        for k in unknown:
            ins[k] = tuple(rest // len(unknown) if j == ax else d for j, d in enumerate(out))
    return ins, outs


rnn_param_concat = define("_rnn_param_concat", "_npi_rnn_param_concat", params=ConcatParam, variadic="num_args",
                          infer_shape=_rnn_param_concat_shape, infer_type=same_dtype)
lowers(rnn_param_concat)(_concat_lower)
differentiable(rnn_param_concat, ("ograd0",))(_concat_grad)
