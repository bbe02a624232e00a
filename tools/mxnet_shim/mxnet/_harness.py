"""What the conformance runner needs from inside a test: an executor budget, and a way
to say "this test needs something aotexec does not have"."""
from __future__ import annotations

import aotexec as ax
from aotexec.symbol.symbol import Symbol
from aotexec.runtime.executor import Executor


class Unsupported(Exception):
    """The test uses a part of MXNet aotexec does not provide (autograd, gluon, sparse...)."""

    def __init__(self, feature: str):
        super().__init__(f"not supported by aotexec: {feature}")
        self.feature = feature


class UnsupportedAttr(Unsupported, AttributeError):
    """A missing module attribute (``hasattr`` answers False)."""


class MissingOp(AttributeError):
    """``mx.sym.X`` / ``mx.nd.X`` where aotexec registers no operator X."""

    def __init__(self, namespace: str, op: str):
        super().__init__(f"module '{namespace}' has no attribute '{op}' (no such aotexec operator)")
        self.op = op


class BudgetExceeded(BaseException):
    """More compiles than --max-compiles (a new shape of a structure without a shape-generic
    program costs a compile).  A BaseException so the test's own ``except Exception`` does not
    swallow it."""


STATE = {"executors": 0, "max": None, "over": False, "base": 0}


def _compiles() -> int:
    from aotexec.pipeline import generic, program
    return program.stats["misses"] + generic.stats["compiles"]


def reset(max_compiles: int | None) -> None:
    STATE.update(executors=0, max=max_compiles, over=False, base=_compiles())


def count_executor() -> None:
    """At each bind: the compiles the test has caused so far (they happen at first forward)."""
    STATE["executors"] += 1
    if STATE["max"] is not None and _compiles() - STATE["base"] > STATE["max"]:
        STATE["over"] = True
        raise BudgetExceeded(f"more than {STATE['max']} compiles ({STATE['executors']} executors)")


def _counted(method):
    def wrapper(self, ctx=None, *args, **kwargs):
        if ctx is not None and getattr(ctx, "device_type", "cpu") != "cpu":
            raise Unsupported(f"context {ctx}")
        count_executor()
        return method(self, ctx, *args, **kwargs)
    wrapper.__name__ = method.__name__
    wrapper.__wrapped__ = method
    return wrapper


def install() -> None:
    """Count every bind / simple_bind / reshape (each may compile)."""
    if getattr(Symbol.bind, "__wrapped__", None) is None:
        Symbol.bind = _counted(Symbol.bind)
        Symbol.simple_bind = _counted(Symbol.simple_bind)
        reshape = Executor.reshape

        def counted_reshape(self, *args, **kwargs):
            count_executor()
            return reshape(self, *args, **kwargs)
        counted_reshape.__wrapped__ = reshape
        Executor.reshape = counted_reshape


class UnsupportedModule:
    """A namespace whose every attribute is unsupported (mx.autograd, mx.gluon...)."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise Unsupported(f"{self._name}.{attr}")

    def __call__(self, *args, **kwargs):
        raise Unsupported(self._name)


class ContribModule(UnsupportedModule):
    """mx.sym.contrib / mx.nd.contrib (mx.*.linalg: ``prefix`` "_linalg_"): aotexec's
    ``_contrib_*`` operators by their short name (through ``wrap``: a symbol constructor, or an
    imperative run), the rest unsupported."""

    def __init__(self, name: str, wrap, prefix: str = "_contrib_"):
        super().__init__(name)
        self._wrap = wrap
        self._prefix = prefix

    def __getattr__(self, attr: str):
        if not attr.startswith("__") and hasattr(ax.sym, f"{self._prefix}{attr}"):
            return self._wrap(f"{self._prefix}{attr}")
        return super().__getattr__(attr)


class PartialModule(UnsupportedModule):
    """An MXNet namespace aotexec answers in part (mx.rnn, mx.mod, mx.io, mx.init): the names
    ``source`` (an aotexec module) has, the rest unsupported."""

    def __init__(self, name: str, source):
        super().__init__(name)
        self._source = source

    def __getattr__(self, attr: str):
        if not attr.startswith("_") and hasattr(self._source, attr):
            return getattr(self._source, attr)
        return super().__getattr__(attr)


def cpu_default() -> ax.Context:
    return ax.cpu()
