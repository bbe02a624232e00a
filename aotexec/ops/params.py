"""Typed operator parameters parsed once from MXNet's string attributes.

An op declares its parameters as a frozen dataclass (nnvm's ``ParamParser``):
fields without defaults are required, annotations give the type.  Strings come
back only in ``tojson()``; rules read typed fields.
"""
from __future__ import annotations

import ast
import dataclasses
import typing
from typing import Any

import numpy as np

from ..base import AotexecError

Shape = tuple[int, ...]

_TYPE_NAMES = {int: "int", float: "float", bool: "boolean", str: "string", Shape: "Shape(tuple)"}


def _parse_bool(s: str) -> bool:
    low = s.strip().lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0"):
        return False
    raise ValueError(f"Invalid boolean value {s!r}")


def _parse_shape(s: str, allow_none: bool = False) -> tuple:
    v = ast.literal_eval(s.strip()) if s.strip() else ()
    if isinstance(v, (int, float)):
        return (int(v),)
    if v is None:
        raise ValueError("None is not a shape")
    return tuple(None if (x is None and allow_none) else int(x) for x in v)


def _parse_value(tp: Any, s: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if s.strip() in ("None", ""):
            return None
        errors = []
        for m in members:
            try:
                return _parse_value(m, s)
            except (ValueError, SyntaxError, TypeError) as e:
                errors.append(e)
        raise ValueError(f"Invalid value {s!r}")
    if tp is bool:
        return _parse_bool(s)
    if tp is int:
        f = float(s)
        if f != int(f):
            raise ValueError(f"Invalid integer {s!r}")
        return int(f)
    if tp is float:
        return float(s)
    if tp is str:
        return s
    if origin is tuple and typing.get_args(tp) and all(a in (float, Ellipsis) for a in typing.get_args(tp)):
        v = ast.literal_eval(s.strip())
        return tuple(float(x) for x in (v if isinstance(v, (tuple, list)) else (v,)))
    if tp == Shape or origin is tuple:
        return _parse_shape(s, allow_none=any(type(None) in typing.get_args(a) for a in typing.get_args(tp)))
    if typing.get_origin(tp) is typing.Literal:
        if s not in typing.get_args(tp):
            raise ValueError(f"Invalid Input: '{s}', valid values are: {type_name(tp)}")
        return s
    raise TypeError(f"unsupported parameter type {tp}")


def type_name(tp: Any) -> str:
    if typing.get_origin(tp) is typing.Literal:
        # dmlc lists an enum's names sorted (a std::map)
        return "{" + ", ".join(repr(a) for a in sorted(typing.get_args(tp), key=str)) + "}"
    return _TYPE_NAMES.get(tp, str(tp).replace("typing.", ""))


def to_attr_string(value: Any) -> str:
    """How MXNet's Python frontend turns a keyword value into an attr string (``str(value)``;
    numpy scalars print as numbers, as numpy 1.x's repr did: ``(1, 0)``, not
    ``(np.int64(1), np.int64(0))``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        items = [_scalar_string(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return _scalar_string(value)


def _scalar_string(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return to_attr_string(value)
    if isinstance(value, np.bool_):
        return str(bool(value))
    if isinstance(value, np.integer):
        return str(int(value))
    return str(value)


def parse_params(cls: type | None, attrs: dict[str, str], op_name: str, node_name: str) -> Any:
    """Parse the non-hidden ``attrs`` into ``cls``; MXNet's messages for missing/unknown keys."""
    if cls is None:
        return None
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    shown = "".join(f', {k}="{v}"' for k, v in attrs.items() if not (k.startswith("__") and k.endswith("__")))
    where = f'in operator {op_name}(name="{node_name}"{shown})'
    for key, raw in attrs.items():
        if key.startswith("__") and key.endswith("__"):
            continue
        if key not in fields:
            if key in getattr(cls, "_ignored", ()):
                continue
            raise AotexecError(
                f"Cannot find argument '{key}', Possible Arguments:\n----------------\n"
                + "\n".join(f"{n} : {type_name(hints[n])}" for n in fields)
                + f"\n, {where}")
        try:
            values[key] = _parse_value(hints[key], raw)
        except (ValueError, SyntaxError, TypeError) as e:
            if str(e).startswith("Invalid Input:"):     # an enum's own message, as dmlc's
                raise AotexecError(f"{e}, {where}") from None
            detail = f": {e}" if str(e) and not isinstance(e, ValueError) else ""    # dmlc's has none for numbers
            raise AotexecError(
                f"Invalid Parameter format for {key} expect {type_name(hints[key])} but value='{raw}', {where}"
                + detail) from None
    for name, f in fields.items():
        if name not in values and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise AotexecError(f"Required parameter {name} of {type_name(hints[name])} is not presented, {where}")
    params = cls(**values)
    check = getattr(params, "check", None)
    if check is not None:
        try:
            check()
        except ValueError as e:
            raise AotexecError(f"{e}, {where}") from None
    return params
