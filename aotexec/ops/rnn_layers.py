"""One layer and direction of MXNet's fused RNN as loops over time (forward, and its gradient
backwards in time), and the layout of the op's flat parameter vector.

The flat vector (rnn-inl.h GetRnnParamSize, rnn_impl.h; Gluon's rnn_layer.py joins it with
_rnn_param_concat in this order) holds every weight, then every bias, layer by layer and within
a layer direction by direction: i2h (G*H, input), h2h (G*H, P) and, with a projection, h2r
(P, H); then i2h and h2h biases (G*H each).  P is the projection size, else H.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..emitter import Emitter, Value
from .loop import put_step, step, while_loop
from .rnn_cells import GATES, Cell


@dataclass(frozen=True)
class Weights:
    """One layer-direction's parameters, and how its biases enter the steps: ``xbias`` with
    the input projection (both biases, except GRU's h2h bias, which its reset gate scales and
    so rides with the recurrent product as ``hbias``)."""
    wx: Value
    wh: Value
    whr: Value | None
    bx: Value
    bh: Value
    gru: bool

    def input_projection(self, b: Emitter, x: Value) -> Value:
        """x (T, N, I) @ wx^T plus the input-side biases: (T, N, G*H), all steps at once."""
        t, n, i = x.shape
        xw = b.dot_general(b.reshape(x, (t * n, i)), self.wx, contract=([1], [1]))
        bias = self.bx if self.gru else b.add(self.bx, self.bh)
        return b.reshape(b.add(xw, b.broadcast_in_dim(bias, xw.shape, [1])), (t, n, xw.shape[1]))

    def recurrent(self, b: Emitter, h: Value) -> Value:
        hw = b.dot_general(h, self.wh, contract=([1], [1]))
        return b.add(hw, b.broadcast_in_dim(self.bh, hw.shape, [1])) if self.gru else hw


class ParamLayout:
    """Offsets of every parameter block in the flat vector of an RNN with ``input_size``."""

    def __init__(self, p, input_size: int):
        self.blocks: dict[tuple[int, int, str], tuple[int, tuple[int, ...]]] = {}
        self.size, self.gru = 0, p.mode == "gru"
        gh, h, o = GATES[p.mode] * p.state_size, p.state_size, p.out_size
        for layer in range(p.num_layers):
            ni = input_size if layer == 0 else p.dirs * o
            for d in range(p.dirs):
                self._add((layer, d, "wx"), (gh, ni))
                self._add((layer, d, "wh"), (gh, o))
                if p.projection_size is not None:
                    self._add((layer, d, "whr"), (o, h))
        for layer in range(p.num_layers):
            for d in range(p.dirs):
                self._add((layer, d, "bx"), (gh,))
                self._add((layer, d, "bh"), (gh,))

    def _add(self, key, shape: tuple[int, ...]) -> None:
        n = 1
        for s in shape:
            n *= s
        self.blocks[key] = (self.size, shape)
        self.size += n

    def _block(self, b: Emitter, flat: Value, key) -> Value | None:
        if key not in self.blocks:
            return None
        off, shape = self.blocks[key]
        n = 1
        for s in shape:
            n *= s
        return b.reshape(b.slice(flat, (off,), (off + n,)), shape)

    def weights(self, b: Emitter, flat: Value, layer: int, d: int) -> Weights:
        get = lambda name: self._block(b, flat, (layer, d, name))  # noqa: E731
        return Weights(get("wx"), get("wh"), get("whr"), get("bx"), get("bh"), self.gru)

    def flat_grad(self, b: Emitter, grads: dict[tuple[int, int], dict[str, Value]]) -> Value:
        """The gradients of every block, flattened into the vector's order.  Each behind a barrier:
        IREE 3.13's EmplaceAllocations, placing the products into the concatenation, moved ops
        of one layer's loop after their uses in another ("operand does not dominate this use")."""
        parts = []
        for layer, d, name in self.blocks:
            g = grads[(layer, d)][name]
            parts.append(b.barrier(b.reshape(g, (g.shape[0] * (g.shape[1] if g.ndim > 1 else 1),))))
        return b.concatenate(parts, 0)


def _time(b: Emitter, i: Value, steps: int, reverse: bool) -> Value:
    return b.sub(b.constant(steps - 1, (), "int32"), i) if reverse else i


def _valid(b: Emitter, t: Value, lengths: Value | None, width: int) -> Value | None:
    """(N, width) i1: step ``t`` is before each sequence's length."""
    if lengths is None:
        return None
    ok = b.compare(b.broadcast_in_dim(t, lengths.shape, ()), lengths, "LT")
    return b.broadcast_in_dim(ok, (lengths.shape[0], width), [0])


def _keep(b: Emitter, valid: Value | None, new: Value, old: Value) -> Value:
    """``new`` at valid rows, ``old`` at padding (a padded step changes nothing)."""
    if valid is None:
        return new
    if valid.shape[1] != new.shape[1]:
        valid = b.broadcast_in_dim(b.slice(valid, (0, 0), (valid.shape[0], 1)), new.shape, [0, 1])
    return b.select(valid, new, old)


@dataclass(frozen=True)
class Run:
    y: Value              # (T, N, P): outputs, zero at padding
    h: Value              # (N, P): the last state
    c: Value | None       # (N, H): LSTM's last cell state
    cells: Value | None   # (T, N, H): LSTM's cell state after each step (for backward)


def _zeros(b: Emitter, like: Value, shape) -> Value:
    return b.full_like(like, 0.0, shape)


def run_direction(b: Emitter, cell: Cell, w: Weights, x: Value, h0: Value, c0: Value | None,
                  lengths: Value | None, reverse: bool, keep_cells: bool) -> Run:
    """One layer-direction over x (T, N, I) from (h0, c0): one loop over time."""
    steps = x.shape[0]
    xw = w.input_projection(b, x)
    lstm = c0 is not None
    init = [h0] + ([c0] if lstm else []) + [_zeros(b, h0, (steps,) + h0.shape)]
    init += [_zeros(b, c0, (steps,) + c0.shape)] if keep_cells else []

    def body(i: Value, st: list[Value]) -> list[Value]:
        t = _time(b, i, steps, reverse)
        h, st = st[0], st[1:]
        c, st = (st[0], st[1:]) if lstm else (None, st)
        y, st = st[0], st[1:]
        hn, cn = cell.step(b, step(b, xw, t), w.recurrent(b, h), h, c)
        if w.whr is not None:
            hn = b.dot_general(hn, w.whr, contract=([1], [1]))
        valid = _valid(b, t, lengths, hn.shape[1])
        out = _keep(b, valid, hn, b.full_like(hn, 0.0))
        hn = _keep(b, valid, hn, h)
        res = [hn]
        if lstm:
            cn = _keep(b, valid, cn, c)
            res.append(cn)
        res.append(put_step(b, y, t, out))
        if keep_cells:
            res.append(put_step(b, st[0], t, cn))
        return res

    res = while_loop(b, steps, init, body)
    h, res = res[0], res[1:]
    c, res = (res[0], res[1:]) if lstm else (None, res)
    return Run(res[0], h, c, res[1] if keep_cells else None)


def shifted_prev(b: Emitter, seq: Value, init: Value, lengths: Value | None, reverse: bool) -> Value:
    """The state each step of one direction started from: ``seq`` (T, N, K, the states after
    each step) moved one step along the direction, ``init`` at its first step.  Backward
    outputs are zero at padding, so with lengths the reverse direction's first valid step
    (each sequence's last) reads ``init`` too."""
    steps = seq.shape[0]
    first = b.reshape(init, (1,) + init.shape)
    if steps == 1:
        return first
    if not reverse:
        return b.concatenate([first, b.slice(seq, (0, 0, 0), (steps - 1,) + seq.shape[1:])], 0)
    out = b.concatenate([b.slice(seq, (1, 0, 0), seq.shape), first], 0)
    if lengths is None:
        return out
    nxt = b.add(b.iota(seq.shape, 0, "int32"), b.full_like(b.iota(seq.shape, 0, "int32"), 1))
    inside = b.compare(nxt, b.broadcast_in_dim(lengths, seq.shape, [1]), "LT")
    return b.select(inside, out, b.broadcast_in_dim(init, seq.shape, [1, 2]))


@dataclass(frozen=True)
class Grad:
    weights: dict[str, Value]   # wx, wh, (whr), bx, bh
    dx: Value                   # (T, N, I)
    dh0: Value
    dc0: Value | None


def grad_direction(b: Emitter, cell: Cell, w: Weights, x: Value, prev_h: Value, prev_c: Value | None,
                   dy: Value, dh_end: Value, dc_end: Value | None, lengths: Value | None, reverse: bool) -> Grad:
    """The gradient of ``run_direction``: one loop visiting the steps in the opposite order,
    carrying the state gradients and writing each step's gate gradients; the weight gradients
    are then products over all steps."""
    steps, n, ni = x.shape
    xw = w.input_projection(b, x)
    lstm, gru, proj = prev_c is not None, cell.mode == "gru", w.whr is not None
    gh, h = xw.shape[2], cell.h
    init = [dh_end] + ([dc_end] if lstm else []) + [_zeros(b, xw, xw.shape)]
    init += [_zeros(b, xw, xw.shape)] if gru else []
    init += [_zeros(b, dy, dy.shape), _zeros(b, dy, (steps, n, h))] if proj else []

    def body(i: Value, st: list[Value]) -> list[Value]:
        t = _time(b, i, steps, not reverse)
        dh, st = st[0], st[1:]
        dc, st = (st[0], st[1:]) if lstm else (None, st)
        xt, hp = step(b, xw, t), step(b, prev_h, t)
        cp = step(b, prev_c, t) if lstm else None
        hw = w.recurrent(b, hp)
        valid = _valid(b, t, lengths, gh)
        dr = b.add(dh, step(b, dy, t))
        dpre = dr
        if proj:
            hpre, _ = cell.step(b, xt, hw, hp, cp)
            dpre = b.dot_general(dr, w.whr, contract=([1], [0]))
        sg = cell.step_grad(b, xt, hw, hp, cp, dpre, dc)
        dhp = b.dot_general(sg.dhw, w.wh, contract=([1], [0]))
        if sg.dh_direct is not None:
            dhp = b.add(dhp, sg.dh_direct)
        zero = b.full_like(xt, 0.0)
        res = [_keep(b, valid, dhp, dh)] + ([_keep(b, valid, sg.dc_prev, dc)] if lstm else [])
        res.append(put_step(b, st[0], t, _keep(b, valid, sg.dx, zero)))
        k = 1
        if gru:
            res.append(put_step(b, st[k], t, _keep(b, valid, sg.dhw, zero)))
            k += 1
        if proj:
            res.append(put_step(b, st[k], t, _keep(b, valid, dr, b.full_like(dr, 0.0))))
            res.append(put_step(b, st[k + 1], t, hpre))
        return res

    res = while_loop(b, steps, init, body)
    dh0, res = res[0], res[1:]
    dc0, res = (res[0], res[1:]) if lstm else (None, res)
    flat = lambda v: b.reshape(v, (steps * n, v.shape[2]))  # noqa: E731
    dxs = flat(res[0])
    dhws = flat(res[1]) if gru else dxs
    weights = {"wx": b.dot_general(dxs, flat(x), contract=([0], [0])),
               "wh": b.dot_general(dhws, flat(prev_h), contract=([0], [0])),
               "bx": b.reduce(dxs, [0]), "bh": b.reduce(dhws, [0]) if gru else None}
    if weights["bh"] is None:
        weights["bh"] = weights["bx"]
    if proj:
        drs, hs = res[-2], res[-1]
        weights["whr"] = b.dot_general(flat(drs), flat(hs), contract=([0], [0]))
    dx = b.reshape(b.dot_general(dxs, w.wx, contract=([1], [0])), (steps, n, ni))
    return Grad(weights, dx, dh0, dc0)
