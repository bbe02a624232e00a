"""Where each gate's weight and bias sits in the packed parameter vector of MXNet's ``RNN`` op,
as ``FusedRNNCell`` names them (the op's layout, cut per gate).  Shared by
``rnn.FusedRNNCell`` and ``init.FusedRNN``."""
from __future__ import annotations

import math

from .ops.rnn import RNNParam
from .ops.rnn_layers import ParamLayout

GATES = {"rnn_relu": [""], "rnn_tanh": [""], "lstm": ["_i", "_f", "_c", "_o"], "gru": ["_r", "_z", "_o"]}

Piece = tuple[str, int, tuple[int, ...]]     # name, offset, shape


def pieces(prefix: str, mode: str, num_hidden: int, num_layers: int, bidirectional: bool,
           num_input: int) -> list[Piece]:
    """Each block of the ``RNN`` op's own layout (``ops.rnn_layers.ParamLayout``: a layer and
    direction's i2h / h2h weights or biases, gates stacked) cut into its gates, named as MXNet's
    FusedRNNCell names them."""
    layout = ParamLayout(RNNParam(num_hidden, num_layers, mode, bidirectional), num_input)
    out = []
    for (layer, d, block), (offset, shape) in layout.blocks.items():
        group, kind = ("i2h" if block[1] == "x" else "h2h"), ("weight" if block[0] == "w" else "bias")
        part = (num_hidden,) + tuple(shape[1:])
        for j, gate in enumerate(GATES[mode]):
            out.append((f"{prefix}{'lr'[d]}{layer}_{group}{gate}_{kind}", offset + j * math.prod(part), part))
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
