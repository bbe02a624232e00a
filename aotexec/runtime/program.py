"""A compiled program as the runtime sees it: a vmfb plus the signature of each
entry point (which arrays go in, which come out).  Needs only iree.runtime, so
artifacts run on edge installs without the compiler.
"""
from __future__ import annotations

import hashlib
import threading
from typing import Any

import numpy as np

from ..base import AotexecError
from ..signature import RESIDENT_SCOPE, EntryPoint, ProgramSpec
from .context import Context
from .device import Device, LoadedModule


def resident_wanted(modes, reqs: dict | None, target: str, allowed: bool = True) -> bool:
    """Whether a program for ``modes`` gets resident parameters: an inference executor (no
    gradients, so its parameters change only when written; a training executor's would
    change every step) on llvm-cpu, where it was measured; ``allowed``: ``Options.resident``."""
    return (allowed and target == "llvm-cpu" and list(modes) == ["forward_infer"]
            and all(r == "null" for r in (reqs or {}).values()))


_modules: dict[tuple[Device, str], LoadedModule] = {}   # per device (driver), by vmfb digest
_modules_lock = threading.Lock()


class Program:
    """A loaded vmfb with its entry-point signatures, on one device."""

    def __init__(self, ctx: Context, vmfb: bytes, spec: ProgramSpec, traced: bool = False):
        """``traced``: a monitor build; its trace ops call ``self.on_trace(key, ndarray)``."""
        self.ctx = ctx
        self.spec = spec
        self.device = Device.get(ctx)
        self.on_trace = None
        self._traced: list | None = None
        # resident parameters: each executor loads the module with its own values (bind_parameters)
        self.resident = any(e.resident for e in spec.entries.values())
        if self.resident:
            self._vm_module = self.device.read_module(vmfb)
            self.module = None
            return
        if traced:
            import iree.runtime as rt
            sink = rt.HalModuleDebugSink(self._trace)
            self.module = self.device.load_module(vmfb, debug_sink=sink)
            return
        digest = hashlib.sha256(vmfb).hexdigest()
        with _modules_lock:
            mod = _modules.get((self.device, digest))
            if mod is None:
                mod = self.device.load_module(vmfb)
                _modules[(self.device, digest)] = mod
        self.module = mod

    def _trace(self, key: str, views: list) -> None:
        """Collect during the call; ``run`` delivers in program order afterwards."""
        if self.on_trace is None or self._traced is None:
            return
        seq, _, name = key.partition("|")
        for view in views:
            self._traced.append((int(seq), name, self.device.download(view)))

    def entry(self, name: str) -> EntryPoint:
        try:
            return self.spec.entries[name]
        except KeyError:
            raise AotexecError(f"this program has no entry point '{name}'; it has "
                               f"{', '.join(self.spec.entries)}") from None

    def bind_parameters(self, values: dict[str, np.ndarray]) -> LoadedModule:
        """The module in a context of its own whose resident parameters hold ``values``
        (by variable name); its initializers (weight packing) run now."""
        keys = {n: values[n] for e in self.spec.entries.values() for n in e.resident}
        return self.device.load_module(self._vm_module, parameters=(RESIDENT_SCOPE, keys))

    def transients_size(self, name: str) -> int:
        """Bytes the function needs in its ``iree.abi.transients`` arena."""
        refl = dict(self._vm_module.lookup_function(name).reflection) if self.resident else \
            self.module.reflection(name)
        size = refl.get("iree.abi.transients.size.constant")
        if size is None and "iree.abi.transients.size" not in refl:
            return 0        # no arena declared (lowering.module: functions with loops)
        if size is None:
            raise AotexecError(f"{name} needs a transient arena of dynamic size, which aotexec does not plan yet")
        return int(size)

    def run(self, name: str, views: list, module: LoadedModule | None = None) -> list:
        """``module``: the executor's own context of a resident program (``bind_parameters``)."""
        if self.on_trace is None:
            return (module or self.module).invoke(name, views)
        from .ndarray import array
        self._traced = []
        try:
            results = self.module.invoke(name, views)
        finally:
            traced, self._traced = self._traced, None
        for _, key, host in sorted(traced, key=lambda t: t[0]):
            self.on_trace(key, array(host, ctx=self.ctx))
        return results


def dtype_name(d: Any) -> str:
    return np.dtype(d).name
