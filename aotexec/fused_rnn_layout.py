"""Where each gate's weight and bias sits in the packed parameter vector of MXNet's ``RNN`` op
(as ``FusedRNNCell`` names them): all weights by layer, direction, i2h then h2h, gate; then
all biases in the same order.  Shared by ``rnn.FusedRNNCell`` and ``init.FusedRNN``."""
from __future__ import annotations

import math

GATES = {"rnn_relu": [""], "rnn_tanh": [""], "lstm": ["_i", "_f", "_c", "_o"], "gru": ["_r", "_z", "_o"]}

Piece = tuple[str, int, tuple[int, ...]]     # name, offset, shape


def pieces(prefix: str, mode: str, num_hidden: int, num_layers: int, bidirectional: bool,
           num_input: int) -> list[Piece]:
    h, directions = num_hidden, ["l", "r"] if bidirectional else ["l"]
    out, p = [], 0
    for kind in ("weight", "bias"):
        for layer in range(num_layers):
            for direction in directions:
                for group in ("i2h", "h2h"):
                    for gate in GATES[mode]:
                        if kind == "bias":
                            shape: tuple[int, ...] = (h,)
                        elif group == "h2h":
                            shape = (h, h)
                        else:
                            shape = (h, num_input if layer == 0 else len(directions) * h)
                        out.append((f"{prefix}{direction}{layer}_{group}{gate}_{kind}", p, shape))
                        p += math.prod(shape)
    return out


def size(layout: list[Piece]) -> int:
    _, offset, shape = layout[-1]
    return offset + math.prod(shape)


def num_input(total: int, mode: str, num_hidden: int, num_layers: int, bidirectional: bool) -> int:
    """The input size a packed vector of ``total`` values implies (MXNet's formula)."""
    b, m, h = 1 + bidirectional, len(GATES[mode]), num_hidden
    return total // b // h // m - (num_layers - 1) * (h + b * h + 2) - h - 2


def unpack(flat, layout: list[Piece]) -> dict:
    """name -> a copy of its piece of the flat numpy vector."""
    return {name: flat[o:o + math.prod(s)].reshape(s).copy() for name, o, s in layout}
