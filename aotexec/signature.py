"""The calling convention of compiled programs, shared by the compile side (which writes
it) and the runtime (which reads it); imports nothing else of aotexec's but its error type.

Each entry point (a function of the vmfb) takes and returns *ports*: typed slots with a
role saying what array the caller binds there (a variable, a saved activation, a head
gradient...), so the executor never parses names.  Parameter order of the function:
``inputs`` (by role, in the order below), then, for planned entry points
(``output_args``), one caller-owned buffer per output and the transient arena.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .base import AotexecError

RESIDENT_SCOPE = "aotexec"      # the IREE parameter scope of resident inputs (lowering.module)


class Role(str, enum.Enum):
    VARIABLE = "variable"        # an argument or aux state, by name
    RESIDUAL = "residual"        # a forward value backward reads (forward_train -> backward), by entry name
    HEAD_GRAD = "head_grad"      # the gradient flowing into output ``index``
    OLD_GRAD = "old_grad"        # grad_req 'add': the gradient array's value, added to (by argument name)
    RNG = "rng"                  # (seed, counter) of the random ops
    VALUE = "value"              # an intermediate entry (partial_forward steps, group2ctx segments)
    OUTPUT = "output"            # a graph output, by name
    GRAD = "grad"                # the gradient of an argument, by name
    AUX = "aux"                  # the new value of an aux state (BatchNorm's moving statistics), by name


@dataclass(frozen=True)
class Port:
    role: Role
    name: str
    shape: tuple[int, ...]
    dtype: str
    index: int = -1              # HEAD_GRAD: the output's position

    def to_json(self) -> dict[str, Any]:
        d = {"role": self.role.value, "name": self.name, "shape": list(self.shape), "dtype": self.dtype}
        return d | ({"index": self.index} if self.index >= 0 else {})

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Port":
        return Port(Role(d["role"]), str(d["name"]), tuple(int(x) for x in d["shape"]), str(d["dtype"]),
                    int(d.get("index", -1)))


@dataclass(frozen=True)
class EntryPoint:
    """One compiled function: its parameters and results, as ports."""
    name: str
    params: tuple[Port, ...]
    results: tuple[Port, ...]
    output_args: bool = False     # results go into caller buffers (+ a transients arena)
    resident: list[str] = field(default_factory=list)   # variables read from IREE parameters, keyed by name
    transients: int | None = None  # bytes of the transient arena: a property of one compiled module (its abi)

    def of(self, role: Role) -> list[Port]:
        """Parameters with ``role``, in order."""
        return [p for p in self.params if p.role is role]

    def results_of(self, role: Role) -> list[Port]:
        return [p for p in self.results if p.role is role]

    @property
    def inputs(self) -> list[str]:
        return [p.name for p in self.params]

    @property
    def outputs(self) -> list[str]:
        return [p.name for p in self.results]

    @property
    def takes_rng(self) -> bool:
        return bool(self.params) and self.params[-1].role is Role.RNG

    def abi(self) -> list[dict[str, Any]]:
        """The function's arguments in call order: every input port; for planned entry points
        one storage buffer per result (``iree.abi.output``, any contents) and the transient
        arena (a plain buffer of ``transients`` bytes, ``iree.abi.transients``).  Resident
        variables are not arguments: they come from the IREE parameter scope RESIDENT_SCOPE."""
        args: list[dict[str, Any]] = [{"kind": "input"} | p.to_json() for p in self.params]
        if self.output_args:
            args += [{"kind": "output_storage", "result": i, "shape": list(p.shape), "dtype": p.dtype}
                     for i, p in enumerate(self.results)]
            args.append({"kind": "transients", "bytes": self.transients})
        return args

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "inputs": [p.to_json() for p in self.params],
                "outputs": [p.to_json() for p in self.results], "output_args": self.output_args,
                "resident": list(self.resident)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "EntryPoint":
        try:
            return EntryPoint(str(d["name"]), tuple(Port.from_json(p) for p in d["inputs"]),
                              tuple(Port.from_json(p) for p in d["outputs"]), bool(d.get("output_args", False)),
                              [str(n) for n in d.get("resident", [])])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise AotexecError(f"malformed entry point description: {type(e).__name__}: {e}") from None


@dataclass
class ProgramSpec:
    """The entry points of one vmfb (keyed by function name)."""
    entries: dict[str, EntryPoint] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {k: v.to_json() for k, v in self.entries.items()}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "ProgramSpec":
        if not isinstance(d, dict):
            raise AotexecError(f"malformed entry points: expected an object, got {type(d).__name__}")
        return ProgramSpec({k: EntryPoint.from_json(v) for k, v in d.items()})
