"""Every knob of aotexec in one frozen object, built at the API edge and passed down.

``Options.from_env(**overrides)`` is the one place that reads the environment: the
functions a user calls (``bind`` / ``simple_bind``, ``ax.compile``, ``ax.load``,
``ax.cpu()``, ``compiler.compile_mlir``, the CLI) build it once from their arguments and
the environment; everything below them reads its fields. Nothing below the edge
consults ``os.environ``, so a module's cache key is a function of its arguments.

| field | environment variable | meaning |
|---|---|---|
| ``cpu_driver`` | ``AOTEXEC_CPU_DRIVER`` | IREE HAL driver for ``ax.cpu()``: local-task (default) or local-sync |
| ``layout`` | ``AOTEXEC_LAYOUT`` | ``nhwc`` (default): conv nets run channels-last on llvm-cpu; ``nchw`` turns it off |
| ``resident`` | ``AOTEXEC_RESIDENT`` | inference executors keep parameters in the module (``0`` turns it off) |
| ``mirror`` | ``MXNET_BACKWARD_DO_MIRROR`` | recomputation policy (``passes.mirror``); unset: ``auto`` |
| ``iree_flags`` | ``AOTEXEC_IREE_FLAGS`` | extra iree-compile flags (experiments; part of the cache key) |
| ``compile_mode`` | ``AOTEXEC_COMPILE_MODE`` | ``auto`` / ``inprocess`` / ``subprocess`` |
| ``cache`` | ``AOTEXEC_CACHE`` | compile cache on (default) or off (``0``) |
| ``cache_dir`` | ``AOTEXEC_CACHE_DIR``, ``XDG_CACHE_HOME`` | compile cache folder |
| ``shapes`` | ``AOTEXEC_SHAPES`` | ``auto`` (default): a structure's first two shapes compile static, its third one shape-generic module for all later ones; ``generic`` from the first; ``static``: one module per shape |
| ``kernels`` | ``AOTEXEC_KERNELS`` | llvm-cpu modules on AVX-512 CPUs call hand-written kernels (``aotexec.kernels``) where a C compiler builds them (default on, ``0`` off) |
| ``common_expr`` | ``MXNET_ELIMINATE_COMMON_EXPR`` | bind merges common subexpressions (``passes.common_expr``; default on, ``0`` off, as MXNet) |
| ``dist_timeout`` | ``AOTEXEC_DIST_TIMEOUT`` | seconds a collective (``aotexec.distributed``) may wait for the other ranks |
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from .base import AotexecError

CPU_DRIVERS = ("local-task", "local-sync")
# Compiled CPU dispatches may keep this much on the stack (BatchNorm's backward reductions on
# ResNet-sized maps need more than IREE's 32 KiB default); the runtime's task workers then need
# stacks with room for it: IREE's default 128 KiB overflowed (a segfault) on inceptionv3's training.
DISPATCH_STACK_BYTES = 262144
WORKER_STACK_BYTES = 4 * DISPATCH_STACK_BYTES
LAYOUTS = ("nhwc", "nchw")
MIRROR_POLICIES = ("auto", "none", "mxnet", "dots")
COMPILE_MODES = ("auto", "inprocess", "subprocess")
SHAPE_POLICIES = ("auto", "generic", "static")
_OFF = ("0", "false", "off", "no")


@dataclass(frozen=True)
class Options:
    cpu_driver: str = "local-task"
    layout: str = "nhwc"
    resident: bool = True
    mirror: str = "auto"
    iree_flags: tuple[str, ...] = ()
    compile_mode: str = "auto"
    cache: bool = True
    cache_dir: Path = Path.home() / ".cache" / "aotexec"
    dist_timeout: float = 60.0
    shapes: str = "auto"
    common_expr: bool = True
    kernels: bool = True

    def __post_init__(self) -> None:
        for name, allowed in (("cpu_driver", CPU_DRIVERS), ("layout", LAYOUTS), ("mirror", MIRROR_POLICIES),
                              ("compile_mode", COMPILE_MODES), ("shapes", SHAPE_POLICIES)):
            if getattr(self, name) not in allowed:
                raise AotexecError(f"option {name}={getattr(self, name)!r}; expected one of {allowed}")

    @staticmethod
    def from_env(env: Mapping[str, str] | None = None, **overrides: Any) -> "Options":
        """The options the environment asks for, with ``overrides`` (None values ignored) on top;
        ``mirror`` accepts bind's forms (a bool or a policy name)."""
        env = os.environ if env is None else env
        xdg = env.get("XDG_CACHE_HOME")
        fields: dict[str, Any] = {
            "cpu_driver": env.get("AOTEXEC_CPU_DRIVER") or "local-task",
            "layout": env.get("AOTEXEC_LAYOUT", "nhwc").lower(),
            "resident": env.get("AOTEXEC_RESIDENT", "1") != "0",
            "mirror": _mirror_from_env(env.get("MXNET_BACKWARD_DO_MIRROR")),
            "iree_flags": tuple(env.get("AOTEXEC_IREE_FLAGS", "").split()),
            "compile_mode": env.get("AOTEXEC_COMPILE_MODE", "auto").strip().lower() or "auto",
            "cache": env.get("AOTEXEC_CACHE", "1").strip().lower() not in _OFF,
            "cache_dir": Path(env["AOTEXEC_CACHE_DIR"]).expanduser() if env.get("AOTEXEC_CACHE_DIR") else
            (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "aotexec",
            "dist_timeout": _seconds(env.get("AOTEXEC_DIST_TIMEOUT", "60")),
            "shapes": env.get("AOTEXEC_SHAPES", "auto").strip().lower() or "auto",
            "common_expr": env.get("MXNET_ELIMINATE_COMMON_EXPR", "1").strip().lower() not in _OFF,
            "kernels": env.get("AOTEXEC_KERNELS", "1").strip().lower() not in _OFF,
        }
        if fields["cpu_driver"] not in CPU_DRIVERS:
            raise AotexecError(f"AOTEXEC_CPU_DRIVER={fields['cpu_driver']!r}; expected one of {CPU_DRIVERS}")
        fields.update({k: v for k, v in overrides.items() if v is not None})
        fields["mirror"] = mirror_policy(fields["mirror"])
        return Options(**fields)

    def replace(self, **changes: Any) -> "Options":
        return dataclasses.replace(self, **changes)


def mirror_policy(mirror: bool | str) -> str:
    """A policy name from bind's ``mirror`` argument: True is MXNet's mirror policy, False none."""
    if mirror is True:
        return "mxnet"
    if mirror is False:
        return "none"
    if mirror not in MIRROR_POLICIES:
        raise AotexecError(f"mirror must be a bool or one of {MIRROR_POLICIES}, got {mirror!r}")
    return mirror


def _mirror_from_env(value: str | None) -> str:
    """MXNET_BACKWARD_DO_MIRROR: unset is aotexec's ``auto``; 0 MXNet's graph; 1 MXNet's policy."""
    if value is None:
        return "auto"
    return "none" if value.strip().lower() in ("", "0", "false") else "mxnet"


def _seconds(value: str) -> float:
    try:
        t = float(value)
    except ValueError:
        t = -1.0
    if not t > 0:
        raise AotexecError(f"AOTEXEC_DIST_TIMEOUT={value!r}; expected a positive number of seconds")
    return t
