"""``FusedRNNCell``: a whole multi-layer (bidirectional) RNN as one ``RNN`` op over a packed
parameter vector in MXNet 1.9.1's layout (``fused_rnn_layout``)."""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .. import fused_rnn_layout as layout, symbol
from ..initializer import FusedRNN
from .cells import (BaseRNNCell, BidirectionalCell, DropoutCell, GRUCell, LSTMCell, RNNCell, RNNParams,
                    SequentialRNNCell, States, as_numpy, like, normalize_sequence)

class FusedRNNCell(BaseRNNCell):
    _fused = True

    def __init__(self, num_hidden: int, num_layers: int = 1, mode: str = "lstm", bidirectional: bool = False,
                 dropout: float = 0.0, get_next_state: bool = False, forget_bias: float = 1.0,
                 prefix: str | None = None, params: RNNParams | None = None):
        if mode not in layout.GATES:
            raise ValueError(f"mode must be one of {sorted(layout.GATES)}, got {mode!r}")
        super().__init__(prefix=f"{mode}_" if prefix is None else prefix, params=params)
        self._num_hidden, self._num_layers, self._mode = num_hidden, num_layers, mode
        self._bidirectional, self._dropout, self._get_next_state = bidirectional, dropout, get_next_state
        self._directions = ["l", "r"] if bidirectional else ["l"]
        self._parameter = self.params.get(
            "parameters", init=FusedRNN(None, num_hidden, num_layers, mode, bidirectional, forget_bias))

    @property
    def state_info(self) -> list[dict]:
        b = self._bidirectional + 1
        n = (self._mode == "lstm") + 1
        return [{"shape": (b * self._num_layers, 0, self._num_hidden), "__layout__": "LNC"} for _ in range(n)]

    @property
    def _gate_names(self) -> list[str]:
        return layout.GATES[self._mode]

    def _layout(self, num_input: int) -> list[layout.Piece]:
        return layout.pieces(self._prefix, self._mode, self._num_hidden, self._num_layers, self._bidirectional,
                             num_input)

    def unpack_weights(self, args: dict) -> dict:
        args = dict(args)
        packed = args.pop(self._parameter.name)
        flat = as_numpy(packed).reshape(-1)
        n_in = layout.num_input(flat.size, self._mode, self._num_hidden, self._num_layers, self._bidirectional)
        if n_in <= 0 or layout.size(self._layout(n_in)) != flat.size:
            raise AssertionError("Invalid parameters size for FusedRNNCell")
        args.update({name: like(packed, v) for name, v in layout.unpack(flat, self._layout(n_in)).items()})
        return args

    def pack_weights(self, args: dict) -> dict:
        args = dict(args)
        first = args[f"{self._prefix}l0_i2h{self._gate_names[0]}_weight"]
        pieces = self._layout(first.shape[1])
        flat = np.zeros(layout.size(pieces), dtype=np.dtype(first.dtype))
        for name, offset, shape in pieces:
            flat[offset:offset + int(np.prod(shape))] = as_numpy(args.pop(name)).reshape(-1)
        args[self._parameter.name] = like(first, flat)
        return args

    def __call__(self, inputs: symbol.Symbol, states: States) -> tuple[symbol.Symbol, States]:
        raise NotImplementedError("FusedRNNCell cannot be stepped. Please use unroll")

    def unroll(self, length: int, inputs: Any, begin_state: States | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, States]:
        self.reset()
        inputs, axis = normalize_sequence(length, inputs, layout, True)
        if axis == 1:
            warnings.warn("NTC layout detected. Consider using TNC for FusedRNNCell for faster speed")
            inputs = symbol.swapaxes(inputs, dim1=0, dim2=1)
        elif axis != 0:
            raise AssertionError(f"Unsupported layout {layout}")
        states = self.begin_state() if begin_state is None else begin_state
        named = {"state": states[0], "state_cell": states[1]} if self._mode == "lstm" else {"state": states[0]}
        rnn = symbol.RNN(data=inputs, parameters=self._parameter, state_size=self._num_hidden,
                         num_layers=self._num_layers, bidirectional=self._bidirectional, p=self._dropout,
                         state_outputs=self._get_next_state, mode=self._mode, name=self._prefix + "rnn", **named)
        if not self._get_next_state:
            outputs, states = rnn, []
        else:
            n_states = 2 if self._mode == "lstm" else 1
            states = [rnn[i] for i in range(1, 1 + n_states)]
            for state in states:
                state._set_attr(__layout__="LNC")
            outputs = rnn[0]
        if axis == 1:
            outputs = symbol.swapaxes(outputs, dim1=0, dim2=1)
        outputs, _ = normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def unfuse(self) -> SequentialRNNCell:
        """The same network as per-step cells (stackable, steppable)."""
        make = {"rnn_relu": lambda p: RNNCell(self._num_hidden, activation="relu", prefix=p),
                "rnn_tanh": lambda p: RNNCell(self._num_hidden, activation="tanh", prefix=p),
                "lstm": lambda p: LSTMCell(self._num_hidden, prefix=p),
                "gru": lambda p: GRUCell(self._num_hidden, prefix=p)}[self._mode]
        stack = SequentialRNNCell()
        for i in range(self._num_layers):
            if self._bidirectional:
                stack.add(BidirectionalCell(make(f"{self._prefix}l{i}_"), make(f"{self._prefix}r{i}_"),
                                            output_prefix=f"{self._prefix}bi_l{i}_"))
            else:
                stack.add(make(f"{self._prefix}l{i}_"))
            if self._dropout > 0 and i != self._num_layers - 1:
                stack.add(DropoutCell(self._dropout, prefix=f"{self._prefix}_dropout{i}_"))
        return stack
