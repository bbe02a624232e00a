"""Symbolic dimensions: one graph structure traced once for every shape it is bound with.

A ``Dim`` stands for a dimension that varies between bindings (``x:0``, the first axis of
variable ``x``) and carries the value of the binding being traced (its *hint*).  Shape rules
and lowering rules run unchanged on Dims: arithmetic builds a canonical polynomial (sums of
products of symbols and floor-divisions by constants), so equal expressions compare equal
however they were computed.  Whatever Python decides from a Dim's value (a comparison, a
branch, ``int()``, formatting it into MLIR text) is answered from the hint and recorded as a
*guard*; the module traced is valid exactly for bindings that satisfy all its guards
(``Trace.holds``), torch.fx's symbolic shapes / dynamo guards in miniature.  The emitter
types a dynamic dimension ``?`` and computes its runtime value from the function arguments'
shapes (``Emitter.dim_value``).

Dimensions of 0 are never symbolic (empty arrays are special everywhere), so every symbol is
at least 1; comparisons that bound decides record no guard.  A rule that asks whether a
dimension is 1 (broadcasting) records that as a guard: a size of 1 then takes a program of
its own only where it matters.
"""
from __future__ import annotations

import contextlib
import contextvars
import operator
from typing import Any, Iterable, Sequence

# a polynomial: sorted ((monomial, coefficient), ...); a monomial is a sorted tuple of atoms;
# an atom is a symbol name (str) or ("//", polynomial, divisor)
Poly = tuple
SYMBOL_MIN = 1

_OPS = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
        ">": operator.gt, ">=": operator.ge}


class Unsupported(Exception):
    """A structure whose module cannot be made shape-generic (the caller compiles it static)."""


class Trace:
    """The guards recorded while tracing one structure (active through ``tracing``)."""

    def __init__(self, pins: dict[str, "int | str"] | None = None) -> None:
        """``pins``: what an earlier trace of the same binding fixed (``symbolic_shape`` starts
        from them); they are guards of this one."""
        self.guards: dict[tuple, bool] = {}
        self.pinned: dict[str, int | str] = dict(pins or {})    # symbol -> a value or another symbol
        for s, v in self.pinned.items():
            self.guards[(_add((((s,), 1),), _const(v) if isinstance(v, int) else (((v,), 1),), -1), "==")] = True

    def record(self, poly: Poly, op: str, outcome: bool) -> None:
        self.guards[(poly, op)] = outcome
        if op in ("==", "!=") and outcome == (op == "==") and len(poly) <= 2:
            # s - c == 0: later expressions of s are the constant; s - t == 0: they are t
            terms = dict(poly)
            syms = sorted((m[0] for m in terms if len(m) == 1 and isinstance(m[0], str)), key=_key)
            if len(syms) == 1 and terms[(syms[0],)] in (1, -1) and set(terms) <= {(syms[0],), ()}:
                self.pinned[syms[0]] = -terms.get((), 0) * terms[(syms[0],)]
            elif len(syms) == 2 and len(terms) == 2 and terms[(syms[0],)] == -terms[(syms[1],)] in (1, -1):
                self.pinned[syms[1]] = syms[0]

    def holds(self, env: dict[str, int]) -> bool:
        """Whether a binding (symbol -> value) satisfies every guard."""
        try:
            return all(_OPS[op](evaluate_poly(p, env), 0) == outcome for (p, op), outcome in self.guards.items())
        except KeyError:
            return False


_trace: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("aotexec_symbolic_trace", default=None)


@contextlib.contextmanager
def tracing(trace: Trace):
    token = _trace.set(trace)
    try:
        yield trace
    finally:
        _trace.reset(token)


def _key(x: Any) -> str:
    return repr(x)


def _norm(terms: dict) -> Poly:
    return tuple(sorted(((m, c) for m, c in terms.items() if c), key=_key))


def _const(c: int) -> Poly:
    return _norm({(): c})


def _add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    terms = dict(a)
    for m, c in b:
        terms[m] = terms.get(m, 0) + sign * c
    return _norm(terms)


def _mul(a: Poly, b: Poly) -> Poly:
    terms: dict = {}
    for ma, ca in a:
        for mb, cb in b:
            m = tuple(sorted(ma + mb, key=_key))
            terms[m] = terms.get(m, 0) + ca * cb
    return _norm(terms)


def _constant_of(p: Poly) -> int | None:
    if not p:
        return 0
    if len(p) == 1 and p[0][0] == ():
        return p[0][1]
    return None


def evaluate_atom(a: Any, env: dict[str, int]) -> int:
    if isinstance(a, str):
        return env[a]
    _, inner, k = a
    return evaluate_poly(inner, env) // k


def evaluate_poly(p: Poly, env: dict[str, int]) -> int:
    total = 0
    for m, c in p:
        v = c
        for a in m:
            v *= evaluate_atom(a, env)
        total += v
    return total


def _atom_min(a: Any) -> int | None:
    if isinstance(a, str):
        return SYMBOL_MIN
    lo = lower_bound(a[1])
    return None if lo is None else lo // a[2]


def lower_bound(p: Poly) -> int | None:
    """A lower bound of ``p`` over every binding (symbols >= 1), or None when unknown."""
    total = 0
    for m, c in p:
        if m == ():
            total += c
            continue
        if c < 0:
            return None
        v = c
        for a in m:
            lo = _atom_min(a)
            if lo is None or lo < 0:
                return None
            v *= lo
        total += v
    return total


def _decide(p: Poly, op: str) -> bool | None:
    """The comparison ``p op 0`` where the lower bound settles it."""
    lo = lower_bound(p)
    if lo is None:
        return None
    if lo > 0:
        return {"==": False, "!=": True, "<": False, "<=": False, ">": True, ">=": True}[op]
    if lo == 0 and op in (">=", "<"):
        return op == ">="
    return None


class Dim:
    """A dimension that varies between bindings (see the module docstring)."""
    __slots__ = ("poly", "hint")

    def __init__(self, poly: Poly, hint: int):
        self.poly, self.hint = poly, hint

    @staticmethod
    def symbol(name: str, hint: int) -> "Dim":
        return Dim(((((name,), 1),)), hint)

    def expr(self) -> str:
        """The expression, for messages and debugging (records no guard)."""
        return render(self.poly)

    # ---- arithmetic: canonical polynomials ------------------------------------------
    def _combine(self, other: Any, fn, hint_fn):
        if isinstance(other, Dim):
            return make(fn(self.poly, other.poly), hint_fn(self.hint, other.hint))
        if isinstance(other, int) and not isinstance(other, bool):
            return make(fn(self.poly, _const(other)), hint_fn(self.hint, other))
        return NotImplemented

    def __add__(self, o): return self._combine(o, _add, operator.add)
    def __radd__(self, o): return self._combine(o, _add, operator.add)
    def __sub__(self, o): return self._combine(o, lambda a, b: _add(a, b, -1), operator.sub)
    def __rsub__(self, o): return self._combine(o, lambda a, b: _add(b, a, -1), lambda a, b: b - a)
    def __mul__(self, o): return self._combine(o, _mul, operator.mul)
    def __rmul__(self, o): return self._combine(o, _mul, operator.mul)
    def __neg__(self): return make(_mul(self.poly, _const(-1)), -self.hint)
    def __pos__(self): return self

    def __floordiv__(self, o):
        if isinstance(o, Dim):
            o = int(o)
        if not isinstance(o, int) or o == 0:
            return NotImplemented if not isinstance(o, int) else self.hint // o
        if o < 0:
            return (-self) // (-o)
        if all(c % o == 0 for _, c in self.poly):
            return make(tuple((m, c // o) for m, c in self.poly), self.hint // o)
        return make(((((("//", self.poly, o),), 1),)), self.hint // o)

    def __rfloordiv__(self, o):
        return o // int(self)

    def __mod__(self, o):
        if isinstance(o, Dim):
            o = int(o)
        return self - (self // o) * o

    def __rmod__(self, o):
        return o % int(self)

    def __truediv__(self, o):
        return int(self) / (int(o) if isinstance(o, Dim) else o)

    def __rtruediv__(self, o):
        return o / int(self)

    def __pow__(self, o):
        return int(self) ** o

    def __abs__(self):
        return self if self >= 0 else -self

    # ---- what Python decides from the value: answered by the hint, recorded -------------
    def _compare(self, other: Any, op: str) -> bool:
        if isinstance(other, Dim):
            diff = _add(self.poly, other.poly, -1)
            hint = self.hint - other.hint
        elif isinstance(other, (int, float)) and not isinstance(other, bool):
            if isinstance(other, float) and not other.is_integer():
                return _OPS[op](float(int(self)), other)
            diff = _add(self.poly, _const(int(other)), -1)
            hint = self.hint - int(other)
        else:
            return NotImplemented
        c = _constant_of(diff)
        if c is not None:
            return _OPS[op](c, 0)
        decided = _decide(diff, op)
        if decided is not None:
            return decided
        outcome = _OPS[op](hint, 0)
        trace = _trace.get()
        if trace is None:
            raise Unsupported(f"a symbolic dimension ({render(diff)} {op} 0) was compared outside a trace")
        trace.record(diff, op, outcome)
        return outcome

    def __eq__(self, o): return self._compare(o, "==")
    def __ne__(self, o): return self._compare(o, "!=")
    def __lt__(self, o): return self._compare(o, "<")
    def __le__(self, o): return self._compare(o, "<=")
    def __gt__(self, o): return self._compare(o, ">")
    def __ge__(self, o): return self._compare(o, ">=")
    def __bool__(self): return self._compare(0, "!=")

    def __hash__(self):
        return hash(self.poly)

    def __int__(self) -> int:
        """The binding's value, pinned: the module is then valid only where it is the same."""
        self._compare(self.hint, "==")
        return self.hint

    __index__ = __int__

    def __float__(self) -> float:
        return float(int(self))

    def __format__(self, spec: str) -> str:
        return format(int(self), spec)

    def __str__(self) -> str:
        return str(int(self))

    __repr__ = __str__

    def __round__(self, n=None):
        return int(self)


def make(poly: Poly, hint: int) -> "Dim | int":
    trace = _trace.get()
    if trace is not None and trace.pinned and _symbols(poly) & trace.pinned.keys():
        poly = _substitute(poly, trace.pinned)
    c = _constant_of(poly)
    return c if c is not None else Dim(poly, hint)


def simplify(d: Any) -> Any:
    """``d`` with the symbols pinned so far replaced by their values (an int when all are)."""
    return make(d.poly, d.hint) if isinstance(d, Dim) else d


def _symbols(p: Poly) -> set[str]:
    out: set[str] = set()
    for m, _ in p:
        for a in m:
            if isinstance(a, str):
                out.add(a)
            else:
                out |= _symbols(a[1])
    return out


def _substitute(p: Poly, values: dict[str, int]) -> Poly:
    total: Poly = ()
    for m, c in p:
        term = _const(c)
        for a in m:
            if isinstance(a, str):
                while isinstance(values.get(a), str):
                    a = values[a]
                term = _mul(term, _const(values[a]) if a in values else ((((a,), 1),)))
            else:
                inner = _substitute(a[1], values)
                k = _constant_of(inner)
                term = _mul(term, _const(k // a[2]) if k is not None else (((("//", inner, a[2]),), 1),))
        total = _add(total, term)
    return total


def render(p: Poly) -> str:
    def atom(a):
        return a if isinstance(a, str) else f"({render(a[1])})//{a[2]}"
    parts = []
    for m, c in p:
        body = "*".join(atom(a) for a in m)
        parts.append(str(c) if not m else (body if c == 1 else f"{c}*{body}"))
    return " + ".join(parts) or "0"


def same(a: Any, b: Any) -> bool:
    """Structurally equal dimensions: no guard; dims that might be equal in some binding differ
    (for shortcuts whose other path is right either way)."""
    a, b = simplify(a), simplify(b)
    if isinstance(a, Dim) or isinstance(b, Dim):
        return isinstance(a, Dim) and isinstance(b, Dim) and a.poly == b.poly
    return int(a) == int(b)


def same_shape(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))


def is_dynamic(d: Any) -> bool:
    return isinstance(d, Dim)


def any_dynamic(shape: Iterable[Any]) -> bool:
    return any(isinstance(d, Dim) for d in shape)


def concrete(d: Any, env: dict[str, int]) -> int:
    """A dimension's value in a binding."""
    return evaluate_poly(d.poly, env) if isinstance(d, Dim) else int(d)


def symbolic_shape(name: str, shape: Sequence[int], pins: dict[str, "int | str"] | None = None) -> tuple:
    """A variable's shape with its dimensions symbolic (``<name>:<axis>``), 0 kept, and
    ``pins`` (``Trace.pinned``) applied: a pinned dim is its value, an aliased one the other symbol."""
    pins = pins or {}
    out = []
    for i, d in enumerate(shape):
        key = f"{name}:{i}"
        while isinstance(pins.get(key), str):
            key = pins[key]
        out.append(int(d) if int(d) < SYMBOL_MIN else int(pins[key]) if key in pins else Dim.symbol(key, int(d)))
    return tuple(out)


def binding_env(shapes: dict[str, Sequence[int]]) -> dict[str, int]:
    """symbol -> value for variables' concrete shapes (the names ``symbolic_shape`` gives)."""
    return {f"{n}:{i}": int(d) for n, s in shapes.items() for i, d in enumerate(s)}


def shape_pattern(shapes: dict[str, Sequence[int]]) -> list:
    """What a shape-generic module is specialized on: each variable's rank and its empty dims."""
    return sorted((n, [int(d) if int(d) < SYMBOL_MIN else -1 for d in s]) for n, s in shapes.items())
