"""Device contexts, MXNet style: ``cpu(0)``, ``gpu(1)``, ``vulkan(0)``."""
from __future__ import annotations

import threading

from ..base import AotexecError
from ..options import Options

# MXNet's device type ids for cpu/gpu; vulkan has no MXNet id, 7 is ours.
_TYPE_IDS = {"cpu": 1, "gpu": 2, "vulkan": 7}
_TYPE_NAMES = {v: k for k, v in _TYPE_IDS.items()}
# IREE compiler target backend and runtime HAL driver per device type.
_TARGETS = {"cpu": "llvm-cpu", "gpu": "cuda", "vulkan": "vulkan-spirv"}
_DRIVERS = {"cpu": "local-task", "gpu": "cuda", "vulkan": "vulkan"}


class Context:
    """A device: type in {'cpu', 'gpu', 'vulkan'} plus an id. Hashable, immutable.

    ``driver``: the IREE HAL driver; for cpu ``Options.cpu_driver`` (AOTEXEC_CPU_DRIVER) picks
    local-task or local-sync when the context is made. Contexts equal by type and id alone:
    buffers of both CPU drivers are host memory and interoperate."""

    __slots__ = ("_device_type", "_device_id", "_driver")

    def __init__(self, device_type: "str | int | Context", device_id: int = 0, driver: str | None = None):
        if isinstance(device_type, Context):
            driver = driver or device_type.driver
            device_type, device_id = device_type.device_type, device_type.device_id
        elif isinstance(device_type, int):
            if device_type not in _TYPE_NAMES:
                raise AotexecError(f"unknown device type id {device_type}; known: {_TYPE_NAMES}")
            device_type = _TYPE_NAMES[device_type]
        if device_type not in _TYPE_IDS:
            raise AotexecError(
                f"unknown device type {device_type!r}; expected one of {sorted(_TYPE_IDS)}")
        device_id = int(device_id)
        if device_id < 0:
            raise AotexecError(f"device_id must be >= 0, got {device_id}")
        self._device_type = device_type
        self._device_id = device_id
        if driver is None:
            driver = Options.from_env().cpu_driver if device_type == "cpu" else _DRIVERS[device_type]
        self._driver = driver

    device_type = property(lambda self: self._device_type)
    device_id = property(lambda self: self._device_id)

    @property
    def device_typeid(self) -> int:
        return _TYPE_IDS[self._device_type]

    @property
    def target(self) -> str:
        """IREE compiler target backend for this device type."""
        return _TARGETS[self._device_type]

    @property
    def driver(self) -> str:
        """IREE runtime HAL driver of this context."""
        return self._driver

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Context) and self._device_type == other._device_type
                and self._device_id == other._device_id)

    def __hash__(self) -> int:
        return hash((self._device_type, self._device_id))

    def __str__(self) -> str:
        return f"{self._device_type}({self._device_id})"

    __repr__ = __str__

    # `with ctx:` makes ctx the default for array creation, as in MXNet.
    def __enter__(self) -> "Context":
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _stack().pop()


_local = threading.local()


def _stack() -> list[Context]:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


def cpu(device_id: int = 0) -> Context:
    return Context("cpu", device_id)


def gpu(device_id: int = 0) -> Context:
    return Context("gpu", device_id)


def vulkan(device_id: int = 0) -> Context:
    return Context("vulkan", device_id)


def current_context() -> Context:
    """Innermost `with ctx:` context of this thread, else cpu(0)."""
    s = _stack()
    return s[-1] if s else Context("cpu", 0)
