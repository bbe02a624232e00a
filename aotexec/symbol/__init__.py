"""``ax.sym`` / ``ax.symbol``: Variable, Group, load/save and one constructor per
registered op (``FullyConnected``, ``relu``, ``_Plus``...), MXNet 1.x compatible.
"""
from __future__ import annotations

import dataclasses
import types
from numbers import Number
from typing import Any

import numpy as np

from ..attribute import HIDDEN_KEYS, AttrScope, attr_key
from ..base import AotexecError
from ..graph import Entry, Node
from ..name import NameManager
from ..ops import CONSTRUCTORS, OpDef
from ..ops.params import parse_params, to_attr_string
from ..passes.infer import DTYPE_TO_CODE
from .json_format import json_to_heads
from .symbol import CONSTRUCTORS as _REGISTERED, CREATE as _CREATE, Symbol


def Variable(name: str, attr: dict | None = None, shape=None, lr_mult=None, wd_mult=None, dtype=None,
             init=None, stype=None, profiler_scope=None, **kwargs) -> Symbol:
    """A graph input (MXNet ``mx.sym.Variable``); shape/dtype become ``__shape__`` / ``__dtype__``."""
    if not isinstance(name, str):
        raise TypeError("Expect a string for variable `name`")
    attrs = {attr_key(k): v for k, v in AttrScope.current().get(attr).items()}
    if shape is not None:
        attrs["__shape__"] = str(tuple(shape) if not isinstance(shape, int) else (shape,))
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = str(DTYPE_TO_CODE[np.dtype(dtype).name])
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    if stype is not None and stype != "default":
        raise AotexecError(f"storage type '{stype}' is not supported; aotexec arrays are dense ('default')")
    if profiler_scope is not None:
        attrs["__profiler_scope__"] = profiler_scope
    for k, v in kwargs.items():
        if k.startswith("__") and k.endswith("__"):
            attrs[k] = str(v)
        else:
            raise ValueError(f"Attribute name={k} is not supported. Additional attributes must start and end "
                             "with double underscores, e.g, __yourattr__")
    return Symbol([Entry(Node(None, name, attrs))])


var = Variable


def Group(symbols: list[Symbol]) -> Symbol:
    if not symbols or any(not isinstance(s, Symbol) for s in symbols):
        raise TypeError("Expected a list of symbols as input")
    return Symbol([e for s in symbols for e in s._outputs])


def load_json(json_str: str) -> Symbol:
    if not isinstance(json_str, str):
        raise TypeError("fname required to be string")
    return Symbol(json_to_heads(json_str))


def load(fname: str) -> Symbol:
    if not isinstance(fname, str):
        raise TypeError("fname need to be string")
    try:
        with open(fname) as f:
            text = f.read()
    except OSError as e:
        raise AotexecError(f"cannot read symbol file {fname}: {e}") from None
    try:
        return load_json(text)
    except AotexecError as e:
        raise AotexecError(f"{fname}: {e}") from None


def _param_string(v: Any) -> str:
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name
    if isinstance(v, np.dtype):
        return v.name
    return to_attr_string(v)


def create(op: OpDef, hint: str, args: tuple, kwargs: dict, *, unnamed: bool = False) -> Symbol:
    """Build an op node the way MXNet's ``_symbol_creator`` + ``Compose`` do (``unnamed``: an
    atomic symbol composed without a name keeps its empty name, its new inputs named ``weight``...)."""
    name = kwargs.pop("name", None)
    attr = kwargs.pop("attr", None)
    kwargs.pop("out", None)
    sym_args = [a for a in args if isinstance(a, Symbol)]
    if op.variadic and len(args) == 1 and isinstance(args[0], (list, tuple)):
        sym_args = list(args[0])
    # a positional None is an input left out (MXNet's generated signatures put inputs first:
    # BilinearResize2D(data, None, scale_height=...) gives no ``like``)
    raw_pos = [a for a in args if not isinstance(a, (Symbol, list, tuple)) and a is not None] if op.variadic else \
        [a for a in args if not isinstance(a, Symbol) and a is not None]
    sym_kwargs = {k: v for k, v in kwargs.items() if isinstance(v, Symbol)}
    # None for an input means "create its variable"; for a parameter it is the value None
    fields = {f.name for f in dataclasses.fields(op.params)} if op.params else set()
    params = {k: _param_string(v) for k, v in kwargs.items()
              if not isinstance(v, Symbol) and (v is not None or k in fields)}
    if raw_pos:
        fields = [f.name for f in dataclasses.fields(op.params or object) if f.name != op.variadic] \
            if op.params else []
        if len(raw_pos) > len(fields):
            raise TypeError(f"{op.name}() got too many positional arguments")
        for f, v in zip(fields, raw_pos):
            params.setdefault(f, _param_string(v))
    if op.variadic and op.variadic not in params:
        params[op.variadic] = str(len(sym_args))
    name = "" if unnamed and not name else NameManager.current().get(name, hint)
    attrs = {attr_key(k): v for k, v in AttrScope.current().get(attr).items()}
    attrs.update(params)
    p = parse_params(op.params, {k: v for k, v in attrs.items()}, op.name, name)
    node = Node(op, name, attrs, [], p)
    input_names = node.input_names()
    if len(sym_args) > len(input_names):
        raise AotexecError(f"{op.name}({name}) takes {len(input_names)} inputs ({', '.join(input_names)}), "
                           f"got {len(sym_args)} positional symbols")
    given: dict[str, Symbol] = dict(zip(input_names, sym_args))
    for k, v in sym_kwargs.items():
        if k not in input_names:
            raise TypeError(f"{op.name}() got an unexpected keyword argument '{k}'; its inputs are "
                            f"{', '.join(input_names) or 'none'}")
        given[k] = v
    for iname in input_names:
        if iname in given:
            s = given[iname]
            if len(s._outputs) != 1:
                raise AotexecError(f"{op.name}({name}): input '{iname}' is a symbol with "
                                   f"{len(s._outputs)} outputs; pass one output (sym[i])")
            node.inputs.append(s._outputs[0])
        else:
            vattrs = dict(attrs)
            if iname in op.aux_init:   # MXNet's FSetInputVarAttrOnCompose (BatchNorm aux, prelu gamma)
                vattrs["__init__"] = op.aux_init[iname]
            node.inputs.append(Entry(Node(None, f"{name}_{iname}" if name else iname, vattrs)))
    return Symbol([Entry(node, i) for i in range(node.num_visible_outputs)])


def _make_constructor(fname: str, op: OpDef, hint: str):
    def constructor(*args, **kwargs) -> Symbol:
        return create(op, hint, args, dict(kwargs))
    constructor.__name__ = fname
    fields = ", ".join(f.name for f in dataclasses.fields(op.params)) if op.params else ""
    constructor.__doc__ = f"MXNet operator {op.name}. Parameters: {fields or 'none'}."
    return constructor


for _fname, (_op, _hint) in CONSTRUCTORS.items():
    globals()[_fname] = _make_constructor(_fname, _op, _hint)


def zeros(shape, dtype="float32", **kwargs) -> Symbol:
    return globals()["_zeros"](shape=shape, dtype=dtype, **kwargs)


def ones(shape, dtype="float32", **kwargs) -> Symbol:
    return globals()["_ones"](shape=shape, dtype=dtype, **kwargs)


def _ufunc(left, right, sym_op: str, scalar_op: str, rscalar_op: str, numbers):
    """MXNet's symbol.pow / maximum / hypot...: two symbols, a symbol and a number (either side;
    ``rscalar_op`` when the number comes first), or two numbers (computed in Python)."""
    if isinstance(left, Symbol) and isinstance(right, Symbol):
        return globals()[sym_op](left, right)
    if isinstance(left, Symbol) and isinstance(right, Number):
        return globals()[scalar_op](left, scalar=right)
    if isinstance(left, Number) and isinstance(right, Symbol):
        return globals()[rscalar_op](right, scalar=left)
    if isinstance(left, Number) and isinstance(right, Number):
        return numbers(left, right)
    raise TypeError(f"types ({type(left)}, {type(right)}) not supported")


def full(shape, val, dtype=None, **kwargs) -> Symbol:
    """MXNet's wrapper of ``_full``."""
    return globals()["_full"](shape=shape, dtype=dtype or "float32", value=float(val), **kwargs)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=False, name=None, dtype=None) -> Symbol:
    """MXNet's wrapper of ``_arange`` (one bound: the stop, from 0)."""
    return globals()["_arange"](start=start, stop=stop, step=step, repeat=repeat, infer_range=infer_range,
                                name=name, dtype=dtype or "float32")


def histogram(a, bins=10, range=None, **kwargs) -> Symbol:  # noqa: A002  (MXNet's names)
    """MXNet's wrapper of ``_histogram``: ``bins`` a number of bins over ``range``, or a Symbol
    of bin edges."""
    if isinstance(bins, Symbol):
        return globals()["_histogram"](data=a, bins=bins, **kwargs)
    if isinstance(bins, (int, np.integer)):
        if range is None:
            raise ValueError("null range is not supported in symbol mode")
        return globals()["_histogram"](data=a, bin_cnt=int(bins), range=tuple(range), **kwargs)
    raise ValueError("bins argument should be either an integer or an NDArray")


def pow(base, exp):  # noqa: A001  (MXNet's name)
    return _ufunc(base, exp, "_Power", "_PowerScalar", "_RPowerScalar", lambda a, b: a ** b)


def power(base, exp):
    return pow(base, exp)


def hypot(left, right):
    return _ufunc(left, right, "_Hypot", "_HypotScalar", "_HypotScalar", np.hypot)


def maximum(left, right):
    return _ufunc(left, right, "_Maximum", "_MaximumScalar", "_MaximumScalar", max)


def minimum(left, right):
    return _ufunc(left, right, "_Minimum", "_MinimumScalar", "_MinimumScalar", min)


def split_v2(ary: Symbol, indices_or_sections, axis: int = 0, squeeze_axis: bool = False, **kwargs) -> Symbol:
    """MXNet's wrapper: an int is a number of sections; a tuple lists split points (0 is prepended)."""
    if isinstance(indices_or_sections, int):
        return globals()["_split_v2"](ary, axis=axis, squeeze_axis=squeeze_axis, sections=indices_or_sections,
                                       **kwargs)
    if isinstance(indices_or_sections, (tuple, list)):
        return globals()["_split_v2"](ary, indices=(0,) + tuple(indices_or_sections), axis=axis,
                                       squeeze_axis=squeeze_axis, **kwargs)
    raise ValueError("indices_or_sections must either int or tuple of ints")


# mx.sym.contrib: the _contrib_ ops without the prefix (contrib.BilinearResize2D)
contrib = types.SimpleNamespace(**{k[len("_contrib_"):]: v for k, v in list(globals().items())
                                   if k.startswith("_contrib_")})
# mx.sym.linalg / mx.sym.image: the _linalg_ / _image_ ops without the prefix (linalg.gemm2)
linalg = types.SimpleNamespace(**{k[len("_linalg_"):]: v for k, v in list(globals().items())
                                  if k.startswith("_linalg_")})
image = types.SimpleNamespace(**{k[len("_image_"):]: v for k, v in list(globals().items())
                                 if k.startswith("_image_")})


def _random_helper(attr_op: str, array_op: str, a, b, shape, dtype, kwargs, names=("low", "high")):
    """MXNet's mx.sym.random wrappers: Symbol parameters draw per element (``_sample_*``), numbers
    are attributes (``_random_*``)."""
    if isinstance(a, Symbol) and isinstance(b, Symbol):
        return globals()[array_op](a, b, shape=shape or (), dtype=dtype or "None", **kwargs)
    if isinstance(a, Symbol) or isinstance(b, Symbol):
        raise ValueError(f"{names[0]} and {names[1]} must both be Symbols or both numbers")
    return globals()[attr_op](**{names[0]: a, names[1]: b}, shape=shape or (), dtype=dtype or "None", **kwargs)


# mx.sym.random: uniform / normal by parameter kind
random = types.SimpleNamespace(
    uniform=lambda low=0.0, high=1.0, shape=None, dtype=None, **kw: _random_helper(
        "_random_uniform", "_sample_uniform", low, high, shape, dtype, kw),
    normal=lambda loc=0.0, scale=1.0, shape=None, dtype=None, **kw: _random_helper(
        "_random_normal", "_sample_normal", loc, scale, shape, dtype, kw, ("loc", "scale")),
    uniform_like=lambda data, low=0.0, high=1.0, **kw: globals()["_random_uniform_like"](data, low=low, high=high, **kw),
    normal_like=lambda data, loc=0.0, scale=1.0, **kw: globals()["_random_normal_like"](data, loc=loc, scale=scale,
                                                                                        **kw))


class _Operators:
    """``ax.sym._internal`` / ``ax.sym.op``: every constructor by its MXNet name, as MXNet's
    ``mx.sym._internal._plus`` and ``mx.sym.op.FullyConnected``."""

    def __getattr__(self, name: str):
        value = globals().get(name)
        if name.startswith("__") or not callable(value):
            raise AttributeError(f"aotexec.symbol has no operator '{name}'")
        return value


_internal = op = _Operators()

_CREATE.append(create)
_REGISTERED.update((k, v) for k, v in list(globals().items()) if callable(v) and not isinstance(v, type)
                   and not k.startswith("_") or k in CONSTRUCTORS)
