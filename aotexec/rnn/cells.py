"""Symbolic recurrent cells (MXNet 1.9.1 python/mxnet/rnn/rnn_cell.py): a cell builds one time
step as ordinary symbols (FullyConnected, SliceChannel, Activation...), ``unroll`` repeats it
over a sequence with shared weight variables, and ``pack_weights`` / ``unpack_weights``
convert between a cell's per-gate and fused parameter layouts.  Names of nodes and weights
are MXNet's, so checkpoints trained with ``mx.rnn`` cells load."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import symbol
from ..runtime.ndarray import NDArray
from ..runtime.ndarray import array as _nd_array

Symbol = symbol.Symbol
States = list  # nested lists of Symbols, as begin_state returns them


def as_numpy(value: Any) -> np.ndarray:
    return value.asnumpy() if isinstance(value, NDArray) else np.asarray(value)


def like(template: Any, values: np.ndarray) -> Any:
    """``values`` as the kind of array ``template`` is (an NDArray on its context, or numpy)."""
    if isinstance(template, NDArray):
        return _nd_array(values, ctx=template.context, dtype=template.dtype)
    return values


def normalize_sequence(length: int | None, inputs: Any, layout: str, merge: bool | None,
                       in_layout: str | None = None) -> tuple[Any, int]:
    """MXNet's _normalize_sequence: a sequence as one symbol (merge) or a list of steps."""
    if inputs is None:
        raise ValueError("unroll(inputs=None) has been deprecated. Please create input variables outside unroll.")
    axis = layout.find("T")
    in_axis = in_layout.find("T") if in_layout is not None else axis
    if isinstance(inputs, Symbol):
        if merge is False:
            if len(inputs.list_outputs()) != 1:
                raise ValueError("unroll doesn't allow grouped symbol as input. Please convert to list with "
                                 "list(inputs) first or let unroll handle splitting.")
            inputs = list(symbol.split(inputs, axis=in_axis, num_outputs=length, squeeze_axis=1))
    else:
        if length is not None and len(inputs) != length:
            raise ValueError(f"unroll of length {length} got {len(inputs)} inputs")
        if merge is True:
            inputs = symbol.Concat(*[symbol.expand_dims(i, axis=axis) for i in inputs], dim=axis)
            in_axis = axis
    if isinstance(inputs, Symbol) and axis != in_axis:
        inputs = symbol.swapaxes(inputs, dim1=axis, dim2=in_axis)
    return inputs, axis


class RNNParams:
    """Weight variables by name, shared by the cells that hold the same container."""

    def __init__(self, prefix: str = ""):
        self._prefix = prefix
        self._params: dict[str, Symbol] = {}

    def get(self, name: str, **kwargs: Any) -> Symbol:
        name = self._prefix + name
        if name not in self._params:
            self._params[name] = symbol.Variable(name, **kwargs)
        return self._params[name]


class BaseRNNCell:
    _fused = False          # one op over the whole sequence (FusedRNNCell): cannot be stepped

    def __init__(self, prefix: str = "", params: RNNParams | None = None):
        self._own_params = params is None
        self._prefix = prefix
        self._params = RNNParams(prefix) if params is None else params
        self._modified = False
        self.reset()

    def reset(self) -> None:
        """Restart step and state numbering before building another graph."""
        self._init_counter = -1
        self._counter = -1
        for cell in getattr(self, "_cells", ()):
            cell.reset()

    def __call__(self, inputs: Symbol, states: States) -> tuple[Symbol, States]:
        raise NotImplementedError()

    @property
    def params(self) -> RNNParams:
        self._own_params = False
        return self._params

    @property
    def state_info(self) -> list[dict | None]:
        raise NotImplementedError()

    @property
    def state_shape(self) -> list:
        return [info["shape"] for info in self.state_info]

    @property
    def _gate_names(self) -> tuple | list:
        return ()

    def begin_state(self, func: Callable = symbol.zeros, **kwargs: Any) -> States:
        """One symbol per state (``func(name=prefix + 'begin_state_<i>', **info)``); zeros of
        (0, num_hidden) by default, the batch dimension inferred at bind."""
        if self._modified:
            raise AssertionError("After applying modifier cells (e.g. DropoutCell) the base cell cannot be called "
                                 "directly. Call the modifier cell instead.")
        states = []
        for info in self.state_info:
            self._init_counter += 1
            if info is not None:
                kwargs.update(info)
            states.append(func(name=f"{self._prefix}begin_state_{self._init_counter}", **kwargs))
        return states

    def unpack_weights(self, args: dict) -> dict:
        """Per-gate weights (``<prefix>i2h_f_weight``...) from the stacked ones."""
        args = dict(args)
        if not self._gate_names:
            return args
        h = self._num_hidden
        for group in ("i2h", "h2h"):
            for kind in ("weight", "bias"):
                stacked = args.pop(f"{self._prefix}{group}_{kind}")
                values = as_numpy(stacked)
                for j, gate in enumerate(self._gate_names):
                    args[f"{self._prefix}{group}{gate}_{kind}"] = like(stacked, values[j * h:(j + 1) * h].copy())
        return args

    def pack_weights(self, args: dict) -> dict:
        """The inverse of ``unpack_weights``."""
        args = dict(args)
        if not self._gate_names:
            return args
        for group in ("i2h", "h2h"):
            for kind in ("weight", "bias"):
                parts = [args.pop(f"{self._prefix}{group}{gate}_{kind}") for gate in self._gate_names]
                args[f"{self._prefix}{group}_{kind}"] = like(parts[0], np.concatenate([as_numpy(p) for p in parts]))
        return args

    def unroll(self, length: int, inputs: Any, begin_state: States | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, States]:
        """``length`` steps over ``inputs`` (one symbol laid out by ``layout``, or a list of
        steps): the outputs (one symbol when ``merge_outputs``, else a list) and last states."""
        self.reset()
        inputs, _ = normalize_sequence(length, inputs, layout, False)
        states = self.begin_state() if begin_state is None else begin_state
        outputs = []
        for i in range(length):
            output, states = self(inputs[i], states)
            outputs.append(output)
        outputs, _ = normalize_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, inputs: Symbol, activation: Any, **kwargs: Any) -> Symbol:
        if isinstance(activation, str):
            return symbol.Activation(inputs, act_type=activation, **kwargs)
        return activation(inputs, **kwargs)

    def _step_name(self) -> str:
        self._counter += 1
        return f"{self._prefix}t{self._counter}_"


def _nc_state(num_hidden: int) -> dict:
    return {"shape": (0, num_hidden), "__layout__": "NC"}


class _DenseCell(BaseRNNCell):
    """A cell stepping by one FullyConnected of the input (``i2h``) and one of the state
    (``h2h``), ``len(GATES)`` blocks of ``num_hidden`` each."""
    GATES: tuple[str, ...] = ("",)
    STATES = 1

    def __init__(self, num_hidden: int, prefix: str, params: RNNParams | None, **i2h_bias: Any):
        super().__init__(prefix=prefix, params=params)
        self._num_hidden = num_hidden
        self._iW, self._iB = self.params.get("i2h_weight"), self.params.get("i2h_bias", **i2h_bias)
        self._hW, self._hB = self.params.get("h2h_weight"), self.params.get("h2h_bias")

    @property
    def state_info(self) -> list[dict]:
        return [_nc_state(self._num_hidden) for _ in range(self.STATES)]

    @property
    def _gate_names(self) -> tuple[str, ...]:
        return self.GATES

    def _products(self, inputs: Symbol, state: Symbol, name: str) -> tuple[Symbol, Symbol]:
        width = self._num_hidden * len(self.GATES)
        return (symbol.FullyConnected(data=inputs, weight=self._iW, bias=self._iB, num_hidden=width, name=f"{name}i2h"),
                symbol.FullyConnected(data=state, weight=self._hW, bias=self._hB, num_hidden=width, name=f"{name}h2h"))


class RNNCell(_DenseCell):
    """h' = activation(W_i x + b_i + W_h h + b_h)."""

    def __init__(self, num_hidden: int, activation: Any = "tanh", prefix: str = "rnn_",
                 params: RNNParams | None = None):
        super().__init__(num_hidden, prefix, params)
        self._activation = activation

    def __call__(self, inputs: Symbol, states: States) -> tuple[Symbol, States]:
        name = self._step_name()
        i2h, h2h = self._products(inputs, states[0], name)
        output = self._get_activation(i2h + h2h, self._activation, name=f"{name}out")
        return output, [output]


class LSTMCell(_DenseCell):
    """Gates i, f, c, o; ``forget_bias`` initializes the forget gate's i2h bias
    (``init.LSTMBias``)."""
    GATES = ("_i", "_f", "_c", "_o")
    STATES = 2

    def __init__(self, num_hidden: int, prefix: str = "lstm_", params: RNNParams | None = None,
                 forget_bias: float = 1.0):
        from ..initializer import LSTMBias
        super().__init__(num_hidden, prefix, params, init=LSTMBias(forget_bias=forget_bias))

    def __call__(self, inputs: Symbol, states: States) -> tuple[Symbol, States]:
        name = self._step_name()
        i2h, h2h = self._products(inputs, states[0], name)
        gates = symbol.SliceChannel(i2h + h2h, num_outputs=4, name=f"{name}slice")
        in_gate = symbol.Activation(gates[0], act_type="sigmoid", name=f"{name}i")
        forget_gate = symbol.Activation(gates[1], act_type="sigmoid", name=f"{name}f")
        in_transform = symbol.Activation(gates[2], act_type="tanh", name=f"{name}c")
        out_gate = symbol.Activation(gates[3], act_type="sigmoid", name=f"{name}o")
        next_c = symbol._internal._plus(forget_gate * states[1], in_gate * in_transform, name=f"{name}state")
        next_h = symbol._internal._mul(out_gate, symbol.Activation(next_c, act_type="tanh"), name=f"{name}out")
        return next_h, [next_h, next_c]


class GRUCell(_DenseCell):
    """cuDNN's GRU: the reset gate multiplies h2h's candidate part after its bias."""
    GATES = ("_r", "_z", "_o")

    def __init__(self, num_hidden: int, prefix: str = "gru_", params: RNNParams | None = None):
        super().__init__(num_hidden, prefix, params)

    def __call__(self, inputs: Symbol, states: States) -> tuple[Symbol, States]:
        name = self._step_name()
        prev = states[0]
        i2h, h2h = self._products(inputs, prev, f"{name}_")       # MXNet's GRU names: t0__i2h
        i2h_r, i2h_z, i2h = symbol.SliceChannel(i2h, num_outputs=3, name=f"{name}_i2h_slice")
        h2h_r, h2h_z, h2h = symbol.SliceChannel(h2h, num_outputs=3, name=f"{name}_h2h_slice")
        reset_gate = symbol.Activation(i2h_r + h2h_r, act_type="sigmoid", name=f"{name}_r_act")
        update_gate = symbol.Activation(i2h_z + h2h_z, act_type="sigmoid", name=f"{name}_z_act")
        next_h_tmp = symbol.Activation(i2h + reset_gate * h2h, act_type="tanh", name=f"{name}_h_act")
        next_h = symbol._internal._plus((1.0 - update_gate) * next_h_tmp, update_gate * prev, name=f"{name}out")
        return next_h, [next_h]


def _cells_state_info(cells: list[BaseRNNCell]) -> list:
    return sum((c.state_info for c in cells), [])


def _cells_begin_state(cells: list[BaseRNNCell], **kwargs: Any) -> States:
    return sum((c.begin_state(**kwargs) for c in cells), [])


def _adopt_params(owner: BaseRNNCell, cells: list[BaseRNNCell], override: bool, what: str) -> None:
    """Share weight variables between a container cell and its children."""
    for cell in cells:
        if override:
            if not cell._own_params:
                raise AssertionError(f"Either specify params for {what} or child cells, not both.")
            cell.params._params.update(owner.params._params)
        owner.params._params.update(cell.params._params)


class _ContainerCell(BaseRNNCell):
    _cells: list[BaseRNNCell]

    @property
    def state_info(self) -> list:
        return _cells_state_info(self._cells)

    def begin_state(self, **kwargs: Any) -> States:   # type: ignore[override]
        if self._modified:
            raise AssertionError("After applying modifier cells (e.g. ZoneoutCell) the base cell cannot be called "
                                 "directly. Call the modifier cell instead.")
        return _cells_begin_state(self._cells, **kwargs)

    def unpack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.unpack_weights(args)
        return args

    def pack_weights(self, args: dict) -> dict:
        for cell in self._cells:
            args = cell.pack_weights(args)
        return args


class SequentialRNNCell(_ContainerCell):
    """Cells stacked: each one's output is the next one's input."""

    def __init__(self, params: RNNParams | None = None):
        super().__init__(prefix="", params=params)
        self._override_cell_params = params is not None
        self._cells = []

    def add(self, cell: BaseRNNCell) -> None:
        self._cells.append(cell)
        _adopt_params(self, [cell], self._override_cell_params, "SequentialRNNCell")

    def __call__(self, inputs: Symbol, states: States) -> tuple[Symbol, States]:
        self._counter += 1
        next_states, p = [], 0
        for cell in self._cells:
            if isinstance(cell, BidirectionalCell):
                raise AssertionError("BidirectionalCell cannot be stepped. Please use unroll")
            n = len(cell.state_info)
            inputs, state = cell(inputs, states[p:p + n])
            p += n
            next_states.extend(state)
        return inputs, next_states

    def unroll(self, length: int, inputs: Any, begin_state: States | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, States]:
        self.reset()
        begin_state = self.begin_state() if begin_state is None else begin_state
        p, next_states, last = 0, [], len(self._cells) - 1
        for i, cell in enumerate(self._cells):
            n = len(cell.state_info)
            inputs, states = cell.unroll(length, inputs=inputs, begin_state=begin_state[p:p + n], layout=layout,
                                         merge_outputs=None if i < last else merge_outputs)
            p += n
            next_states.extend(states)
        return inputs, next_states


class DropoutCell(BaseRNNCell):
    """Dropout on the input; no state."""

    def __init__(self, dropout: float, prefix: str = "dropout_", params: RNNParams | None = None):
        super().__init__(prefix, params)
        if not isinstance(dropout, (int, float)):
            raise AssertionError("dropout probability must be a number")
        self.dropout = dropout

    @property
    def state_info(self) -> list:
        return []

    def __call__(self, inputs: Symbol, states: States) -> tuple[Symbol, States]:
        if self.dropout > 0:
            inputs = symbol.Dropout(data=inputs, p=self.dropout)
        return inputs, states

    def unroll(self, length: int, inputs: Any, begin_state: States | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, States]:
        self.reset()
        inputs, _ = normalize_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, Symbol):
            return self(inputs, [])
        return super().unroll(length, inputs, begin_state=begin_state, layout=layout, merge_outputs=merge_outputs)


class ModifierCell(BaseRNNCell):
    """Wraps a base cell, which must then be used through the wrapper only."""

    def __init__(self, base_cell: BaseRNNCell):
        super().__init__()
        base_cell._modified = True
        self.base_cell = base_cell

    @property
    def params(self) -> RNNParams:
        self._own_params = False
        return self.base_cell.params

    @property
    def state_info(self) -> list:
        return self.base_cell.state_info

    def begin_state(self, init_sym: Callable = symbol.zeros, **kwargs: Any) -> States:  # type: ignore[override]
        if self._modified:
            raise AssertionError("After applying modifier cells (e.g. DropoutCell) the base cell cannot be called "
                                 "directly. Call the modifier cell instead.")
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(init_sym, **kwargs)
        finally:
            self.base_cell._modified = True

    def unpack_weights(self, args: dict) -> dict:
        return self.base_cell.unpack_weights(args)

    def pack_weights(self, args: dict) -> dict:
        return self.base_cell.pack_weights(args)


class ZoneoutCell(ModifierCell):
    """Keeps each output / state element from the previous step with probability
    ``zoneout_outputs`` / ``zoneout_states`` in training."""

    def __init__(self, base_cell: BaseRNNCell, zoneout_outputs: float = 0.0, zoneout_states: float = 0.0):
        if base_cell._fused:
            raise AssertionError("FusedRNNCell doesn't support zoneout. Please unfuse first.")
        if isinstance(base_cell, BidirectionalCell):
            raise AssertionError("BidirectionalCell doesn't support zoneout since it doesn't support step. "
                                 "Please add ZoneoutCell to the cells underneath instead.")
        super().__init__(base_cell)
        self.zoneout_outputs, self.zoneout_states = zoneout_outputs, zoneout_states
        self.prev_output: Symbol | None = None

    def reset(self) -> None:
        super().reset()
        self.prev_output = None

    def __call__(self, inputs: Symbol, states: States) -> tuple[Symbol, States]:
        next_output, next_states = self.base_cell(inputs, states)
        mask = lambda p, like_: symbol.Dropout(symbol.ones_like(like_), p=p)  # noqa: E731
        prev = self.prev_output if self.prev_output is not None else symbol.zeros((0, 0))
        output = (symbol.where(mask(self.zoneout_outputs, next_output), next_output, prev)
                  if self.zoneout_outputs != 0.0 else next_output)
        if self.zoneout_states != 0.0:
            next_states = [symbol.where(mask(self.zoneout_states, new), new, old)
                           for new, old in zip(next_states, states)]
        self.prev_output = output
        return output, next_states


class ResidualCell(ModifierCell):
    """The base cell's output plus its input."""

    def __call__(self, inputs: Symbol, states: States) -> tuple[Symbol, States]:
        output, states = self.base_cell(inputs, states)
        return symbol.elemwise_add(output, inputs, name=f"{output.name}_plus_residual"), states

    def unroll(self, length: int, inputs: Any, begin_state: States | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, States]:
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs=inputs, begin_state=begin_state, layout=layout,
                                                    merge_outputs=merge_outputs)
        finally:
            self.base_cell._modified = True
        merge = isinstance(outputs, Symbol) if merge_outputs is None else merge_outputs
        inputs, _ = normalize_sequence(length, inputs, layout, merge)
        if merge:
            return symbol.elemwise_add(outputs, inputs, name=f"{outputs.name}_plus_residual"), states
        return [symbol.elemwise_add(o, i, name=f"{o.name}_plus_residual") for o, i in zip(outputs, inputs)], states


class BidirectionalCell(_ContainerCell):
    """``l_cell`` over the sequence and ``r_cell`` over it reversed, outputs concatenated."""

    def __init__(self, l_cell: BaseRNNCell, r_cell: BaseRNNCell, params: RNNParams | None = None,
                 output_prefix: str = "bi_"):
        super().__init__("", params=params)
        self._output_prefix = output_prefix
        _adopt_params(self, [l_cell, r_cell], params is not None, "BidirectionalCell")
        self._cells = [l_cell, r_cell]

    def __call__(self, inputs: Symbol, states: States) -> tuple[Symbol, States]:
        raise NotImplementedError("Bidirectional cannot be stepped. Please use unroll")

    def unroll(self, length: int, inputs: Any, begin_state: States | None = None, layout: str = "NTC",
               merge_outputs: bool | None = None) -> tuple[Any, States]:
        self.reset()
        inputs, axis = normalize_sequence(length, inputs, layout, False)
        states = self.begin_state() if begin_state is None else begin_state
        l_cell, r_cell = self._cells
        n_left = len(l_cell.state_info)
        l_outputs, l_states = l_cell.unroll(length, inputs=inputs, begin_state=states[:n_left], layout=layout,
                                            merge_outputs=merge_outputs)
        r_outputs, r_states = r_cell.unroll(length, inputs=list(reversed(inputs)), begin_state=states[n_left:],
                                            layout=layout, merge_outputs=merge_outputs)
        if merge_outputs is None:
            merge_outputs = isinstance(l_outputs, Symbol) and isinstance(r_outputs, Symbol)
            if not merge_outputs:
                if isinstance(l_outputs, Symbol):
                    l_outputs = list(symbol.SliceChannel(l_outputs, axis=axis, num_outputs=length, squeeze_axis=1))
                if isinstance(r_outputs, Symbol):
                    r_outputs = list(symbol.SliceChannel(r_outputs, axis=axis, num_outputs=length, squeeze_axis=1))
        if merge_outputs:
            l_outputs, r_outputs = [l_outputs], [symbol.reverse(r_outputs, axis=axis)]
        else:
            r_outputs = list(reversed(r_outputs))
        outputs = [symbol.Concat(lo, ro, dim=1 + merge_outputs,
                                 name=f"{self._output_prefix}out" if merge_outputs else f"{self._output_prefix}t{i}")
                   for i, (lo, ro) in enumerate(zip(l_outputs, r_outputs))]
        return (outputs[0] if merge_outputs else outputs), [l_states, r_states]
