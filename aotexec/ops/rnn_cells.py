"""One time step of MXNet's fused RNN cells, forward and backward (MXNet 1.9.1
src/operator/rnn_impl.h, the CPU kernels; cuDNN computes the same functions).

A step sees ``xt``, the input projection of its time step with the biases folded in (N, G*H),
and ``hw``, the recurrent projection ``h_prev @ Wh^T`` (N, G*H; GRU's also holds ``bh``, which
its reset gate scales).  Gates are blocks of H columns in MXNet's order:

- rnn_relu / rnn_tanh: h = act(xt + hw)
- lstm [i, f, g, o]: c = f * c_prev + i * g (clipped to [clip_min, clip_max] when asked, as
  cuDNN's ``cudnnRNNSetClip``), h = o * tanh(c)
- gru [r, z, n]: n = tanh(xt_n + r * hw_n), h = (1 - z) * n + z * h_prev

The backward step recomputes the gates from ``xt`` and ``hw`` rather than keeping them from
forward (one (N, H) x (H, G*H) product per step instead of T*N*G*H saved values).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..emitter import Emitter, Value
from . import libm

GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def gate(b: Emitter, v: Value, k: int, h: int) -> Value:
    """Columns [k*h, (k+1)*h) of an (N, G*H) value."""
    return b.slice(v, (0, k * h), (v.shape[0], (k + 1) * h))


def join_gates(b: Emitter, parts: list[Value]) -> Value:
    """(N, H) blocks side by side as (N, G*H): one select over broadcasts, which IREE fuses into
    its producers, where a concatenate costs a copy dispatch per block (per time step here)."""
    n, h = parts[0].shape
    shape = (n, len(parts), h)
    k = b.iota(shape, 1, "int32")
    out = b.broadcast_in_dim(parts[-1], shape, [0, 2])
    for j in reversed(range(len(parts) - 1)):
        out = b.select(b.compare(k, b.full_like(k, j), "EQ"), b.broadcast_in_dim(parts[j], shape, [0, 2]), out)
    return b.reshape(out, (n, len(parts) * h))


def _one_minus(b: Emitter, x: Value) -> Value:
    return b.sub(b.full_like(x, 1.0), x)


def _dsigmoid(b: Emitter, s: Value) -> Value:
    return b.mul(s, _one_minus(b, s))


def _dtanh(b: Emitter, t: Value) -> Value:
    return _one_minus(b, b.mul(t, t))


@dataclass(frozen=True)
class StepGrad:
    """What one backward step gives: the gradients of the step's input projection ``dx`` and
    recurrent projection ``dhw`` (both (N, G*H)), of h_prev other than through ``hw`` (GRU's
    z * h_prev term, else None) and of c_prev (LSTM, else None)."""
    dx: Value
    dhw: Value
    dh_direct: Value | None
    dc_prev: Value | None


@dataclass(frozen=True)
class Cell:
    mode: str
    h: int
    clip: tuple[float, float] | None = None   # LSTM cell-state clipping (min, max)
    clip_nan: bool = False                    # NaN cell states become clip_min (cuDNN's NOT_PROPAGATE)

    @property
    def gates(self) -> int:
        return GATES[self.mode]

    # ---- forward
    def step(self, b: Emitter, xt: Value, hw: Value, h_prev: Value, c_prev: Value | None):
        """(h, c) after one step; c is None except for LSTM."""
        if self.mode == "lstm":
            i, f, g, o, c_raw = self._lstm_gates(b, xt, hw, c_prev)
            c = self._clip(b, c_raw)
            return b.mul(o, libm.tanh(b, c)), c
        if self.mode == "gru":
            r, z, n = self._gru_gates(b, xt, hw)
            return b.add(b.mul(_one_minus(b, z), n), b.mul(z, h_prev)), None
        pre = b.add(xt, hw)
        return (libm.tanh(b, pre) if self.mode == "rnn_tanh" else b.max(pre, 0.0)), None

    def _lstm_gates(self, b: Emitter, xt: Value, hw: Value, c_prev: Value):
        pre = b.add(xt, hw)
        i, f, o = (b.logistic(gate(b, pre, k, self.h)) for k in (0, 1, 3))
        g = libm.tanh(b, gate(b, pre, 2, self.h))
        return i, f, g, o, b.add(b.mul(f, c_prev), b.mul(i, g))

    def _gru_gates(self, b: Emitter, xt: Value, hw: Value):
        h = self.h
        r = b.logistic(b.add(gate(b, xt, 0, h), gate(b, hw, 0, h)))
        z = b.logistic(b.add(gate(b, xt, 1, h), gate(b, hw, 1, h)))
        n = libm.tanh(b, b.add(gate(b, xt, 2, h), b.mul(r, gate(b, hw, 2, h))))
        return r, z, n

    def _clip(self, b: Emitter, c: Value) -> Value:
        if self.clip is None:
            return c
        lo, hi = self.clip
        out = b.min(b.max(c, lo), hi)
        if self.clip_nan:
            out = b.select(b.compare(c, c, "NE"), b.full_like(c, lo), out)
        return out

    def _clip_pass(self, b: Emitter, c_raw: Value, dc: Value) -> Value:
        """dc through the clip: zero where it held c at a bound."""
        if self.clip is None:
            return dc
        lo, hi = self.clip
        inside = b.op("stablehlo.and", [b.compare(c_raw, lo, "GE"), b.compare(c_raw, hi, "LE")], c_raw.shape, "bool")
        return b.select(inside, dc, b.full_like(dc, 0.0))

    # ---- backward
    def step_grad(self, b: Emitter, xt: Value, hw: Value, h_prev: Value, c_prev: Value | None,
                  dh: Value, dc: Value | None) -> StepGrad:
        """Gradients of one step from ``dh`` (of its h) and ``dc`` (of its c, LSTM)."""
        if self.mode == "lstm":
            return self._lstm_grad(b, xt, hw, c_prev, dh, dc)
        if self.mode == "gru":
            return self._gru_grad(b, xt, hw, h_prev, dh)
        pre = b.add(xt, hw)
        if self.mode == "rnn_tanh":
            d = b.mul(dh, _dtanh(b, libm.tanh(b, pre)))
        else:
            d = b.select(b.compare(pre, 0.0, "GT"), dh, b.full_like(dh, 0.0))
        return StepGrad(d, d, None, None)

    def _lstm_grad(self, b: Emitter, xt, hw, c_prev, dh, dc) -> StepGrad:
        i, f, g, o, c_raw = self._lstm_gates(b, xt, hw, c_prev)
        tc = libm.tanh(b, self._clip(b, c_raw))
        do = b.mul(dh, tc)
        dc = self._clip_pass(b, c_raw, b.add(dc, b.mul(b.mul(dh, o), _dtanh(b, tc))))
        d = join_gates(b, [b.mul(b.mul(dc, g), _dsigmoid(b, i)), b.mul(b.mul(dc, c_prev), _dsigmoid(b, f)),
                           b.mul(b.mul(dc, i), _dtanh(b, g)), b.mul(do, _dsigmoid(b, o))])
        return StepGrad(d, d, None, b.mul(dc, f))

    def _gru_grad(self, b: Emitter, xt, hw, h_prev, dh) -> StepGrad:
        r, z, n = self._gru_gates(b, xt, hw)
        dn = b.mul(b.mul(dh, _one_minus(b, z)), _dtanh(b, n))                 # d pre-activation of n
        dz = b.mul(b.mul(dh, b.sub(h_prev, n)), _dsigmoid(b, z))
        dr = b.mul(b.mul(dn, gate(b, hw, 2, self.h)), _dsigmoid(b, r))
        dx = join_gates(b, [dr, dz, dn])
        dhw = join_gates(b, [dr, dz, b.mul(dn, r)])
        return StepGrad(dx, dhw, b.mul(dh, z), None)
