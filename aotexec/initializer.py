"""``ax.init``: MXNet 1.9.1's weight initializers (python/mxnet/initializer.py), for
``Module.init_params`` and ``Variable(init=...)``.

An initializer is called with an ``InitDesc`` (the array's name and its variable's attributes)
and the array: a variable's own ``__init__`` attribute wins, otherwise the name's suffix picks
the pattern (``*weight`` random, ``*bias`` / ``*beta`` / ``*moving_mean`` zero, ``*gamma`` /
``*moving_var`` one), as MXNet does.  Random values come from numpy, seeded from
``ax.random.seed`` (the values are MXNet's distributions, not its bit streams).
"""
from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np

from . import fused_rnn_layout, random as _random
from .base import AotexecError

_REGISTRY: dict[str, type["Initializer"]] = {}


def register(cls: type["Initializer"]) -> type["Initializer"]:
    _REGISTRY[cls.__name__.lower()] = cls
    return cls


def create(init: "str | Initializer", **kwargs: Any) -> "Initializer":
    """An initializer from a name (``'xavier'``), a ``dumps()`` string, or itself."""
    if isinstance(init, Initializer):
        return init
    text = str(init)
    if text.startswith("["):
        name, kwargs = json.loads(text)
    else:
        name = text
    cls = _REGISTRY.get(name.lower())
    if cls is None:
        raise AotexecError(f"Cannot find initializer {name!r}; aotexec has {sorted(_REGISTRY)}")
    return cls(**kwargs)


class InitDesc(str):
    """A parameter's name with its variable's attributes (``attrs``) and the initializer to fall
    back to (``global_init``)."""

    def __new__(cls, name: str, attrs: dict[str, str] | None = None, global_init: "Initializer | None" = None):
        desc = super().__new__(cls, name)
        desc.attrs = dict(attrs or {})
        desc.global_init = global_init
        return desc


def _fill(arr, values) -> None:
    arr[:] = np.asarray(values, dtype=np.dtype(arr.dtype)).reshape(arr.shape)


class Initializer:
    def __init__(self, **kwargs: Any):
        self._kwargs = kwargs

    def dumps(self) -> str:
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._kwargs == other._kwargs   # type: ignore[attr-defined]

    def __call__(self, desc: str, arr) -> None:
        if not isinstance(desc, InitDesc):
            desc = InitDesc(desc)
        if desc.global_init is None:
            desc.global_init = self
        own = desc.attrs.get("__init__", "")
        if own:
            create(own)._init_weight(desc, arr)
            return
        for suffix, method in (("weight", self._init_weight), ("bias", self._init_zero),
                               ("gamma", self._init_one), ("beta", self._init_zero),
                               ("moving_mean", self._init_zero), ("moving_var", self._init_one),
                               ("moving_inv_var", self._init_zero), ("moving_avg", self._init_zero),
                               ("min", self._init_zero), ("max", self._init_one)):
            if desc.endswith(suffix):
                method(desc, arr)
                return
        raise ValueError(f"Unknown initialization pattern for {desc}. Default initialization is now limited to "
                         '"weight", "bias", "gamma" (1.0), and "beta" (0.0).Please use '
                         "mx.sym.Variable(init=mx.init.*) to set initialization pattern")

    def _init_zero(self, _: str, arr) -> None:
        arr[:] = 0.0

    def _init_one(self, _: str, arr) -> None:
        arr[:] = 1.0

    def _init_weight(self, name: str, arr) -> None:
        raise NotImplementedError("Must override it")


@register
class Zero(Initializer):
    def _init_weight(self, _: str, arr) -> None:
        arr[:] = 0.0


@register
class One(Initializer):
    def _init_weight(self, _: str, arr) -> None:
        arr[:] = 1.0


@register
class Constant(Initializer):
    def __init__(self, value: Any):
        super().__init__(value=np.asarray(value).tolist())
        self.value = value

    def _init_weight(self, _: str, arr) -> None:
        _fill(arr, np.broadcast_to(np.asarray(self.value), arr.shape))


@register
class Uniform(Initializer):
    """Uniform on [-scale, scale]."""

    def __init__(self, scale: float = 0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _: str, arr) -> None:
        _fill(arr, _random.host_rng().uniform(-self.scale, self.scale, arr.shape))


@register
class Normal(Initializer):
    def __init__(self, sigma: float = 0.01):
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _: str, arr) -> None:
        _fill(arr, _random.host_rng().normal(0.0, self.sigma, arr.shape))


@register
class Xavier(Initializer):
    """Scale sqrt(magnitude / fan), fan by ``factor_type`` ('avg', 'in', 'out'), over the
    weight's (out, in, *kernel) shape."""

    def __init__(self, rnd_type: str = "uniform", factor_type: str = "avg", magnitude: float = 3):
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type, self.factor_type, self.magnitude = rnd_type, factor_type, float(magnitude)

    def _init_weight(self, name: str, arr) -> None:
        shape = arr.shape
        if len(shape) < 2:
            raise ValueError(f"Xavier initializer cannot be applied to vector {name}. It requires at least 2D.")
        hw = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in, fan_out = shape[1] * hw, shape[0] * hw
        factors = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}
        if self.factor_type not in factors:
            raise ValueError("Incorrect factor type")
        scale = np.sqrt(self.magnitude / factors[self.factor_type])
        rng = _random.host_rng()
        if self.rnd_type == "uniform":
            _fill(arr, rng.uniform(-scale, scale, shape))
        elif self.rnd_type == "gaussian":
            _fill(arr, rng.normal(0.0, scale, shape))
        else:
            raise ValueError("Unknown random type")


@register
class MSRAPrelu(Xavier):
    def __init__(self, factor_type: str = "avg", slope: float = 0.25):
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope ** 2))
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class LSTMBias(Initializer):
    """Zero, with the forget gate's quarter (gate order i, f, c, o) at ``forget_bias``."""

    def __init__(self, forget_bias: float = 1.0):
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, _: str, arr) -> None:
        h = arr.shape[0] // 4
        values = np.zeros(arr.shape)
        values[h:2 * h] = self.forget_bias
        _fill(arr, values)


@register
class FusedRNN(Initializer):
    """The packed parameter vector of an ``RNN`` op: each gate's weight and bias initialized
    alone (by ``init``, or the global initializer) and packed, as ``FusedRNNCell`` lays them out."""

    def __init__(self, init: "str | Initializer | None", num_hidden: int, num_layers: int, mode: str,
                 bidirectional: bool = False, forget_bias: float = 1.0):
        if isinstance(init, str):
            init = create(init)
        super().__init__(init=init.dumps() if init is not None else None, num_hidden=num_hidden,
                         num_layers=num_layers, mode=mode, bidirectional=bidirectional, forget_bias=forget_bias)
        self._init, self._num_hidden, self._num_layers = init, num_hidden, num_layers
        self._mode, self._bidirectional, self._forget_bias = mode, bidirectional, forget_bias

    def _init_weight(self, desc: str, arr) -> None:
        fallback = getattr(desc, "global_init", None) or Uniform()
        flat = np.asarray(arr).reshape(-1)
        n_in = fused_rnn_layout.num_input(flat.size, self._mode, self._num_hidden, self._num_layers,
                                          self._bidirectional)
        pieces = fused_rnn_layout.pieces("", self._mode, self._num_hidden, self._num_layers, self._bidirectional,
                                         n_in)
        if n_in <= 0 or fused_rnn_layout.size(pieces) != flat.size:
            raise AssertionError("Invalid parameters size for FusedRNNCell")
        values = np.zeros(flat.size, np.dtype(arr.dtype))
        for name, offset, shape in pieces:
            target = np.zeros(shape, values.dtype)
            if self._mode == "lstm" and name.endswith("_f_bias"):
                target[:] = self._forget_bias
            else:
                (self._init or fallback)(InitDesc(name, global_init=fallback), _NumpyTarget(target))
            values[offset:offset + target.size] = target.reshape(-1)
        _fill(arr, values)


class _NumpyTarget:
    """A numpy array seen through the ``arr[:] = ...`` / ``.shape`` / ``.dtype`` surface
    initializers write to."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.shape, self.dtype = array.shape, array.dtype

    def __setitem__(self, key: Any, value: Any) -> None:
        self.array[key] = np.asarray(value)


class Mixed:
    """The first initializer whose regular expression matches the name."""

    def __init__(self, patterns: list[str], initializers: list[Initializer]):
        import re
        if len(patterns) != len(initializers):
            raise ValueError("patterns and initializers must have the same length")
        self.map: list[tuple[Any, Callable]] = [(re.compile(p), i) for p, i in zip(patterns, initializers)]

    def __call__(self, name: str, arr) -> None:
        for pattern, init in self.map:
            if pattern.match(name):
                init(name, arr)
                return
        raise ValueError(f"Parameter name {name} did not match any pattern. Consider adding a \".*\" pattern "
                         "at the end with default Initializer.")
