"""One IREE HAL device per Context: buffers in and out, and compiled modules.

Every transfer here is synchronous: queue work is submitted on the device's timeline
semaphore and waited for before returning. Compiled functions use IREE's default
`sync` ABI (reflection: "sync func ..."), which waits for its own device work before
returning, so results are ready to read as soon as `invoke` returns.
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import math
import os
import threading
from typing import Sequence

import numpy as np
import iree.runtime as rt

from ..base import AotexecError
from ..options import WORKER_STACK_BYTES
from .context import Context, current_context
from .dtypes import from_hal, normalize_dtype, to_hal
from .waiting import no_wakeup_preemption

_MT = rt.MemoryType
_BU = rt.BufferUsage
# Staging memory the host can map and the device can DMA into (works on Vulkan,
# unlike importing an unaligned numpy buffer).
_STAGING_TYPE = int(_MT.HOST_LOCAL | _MT.DEVICE_VISIBLE)
_STAGING_USAGE = int(_BU.TRANSFER_TARGET | _BU.MAPPING_SCOPED)
_STAGING_USAGE_BOTH = int(_BU.TRANSFER | _BU.MAPPING_SCOPED)
_HOST_VISIBLE = int(_MT.HOST_VISIBLE)
_MAPPING = int(_BU.MAPPING_SCOPED)
_U8 = np.dtype(np.uint8)
# IREE CPU codegen may assume aligned bindings; only alias at this granularity.
_ALIAS_ALIGNMENT = 64

_instance: rt.VmInstance | None = None
_instance_lock = threading.Lock()


def vm_instance() -> rt.VmInstance:
    """The process-wide VM instance (one is enough; modules and contexts share it)."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = rt.VmInstance()
        return _instance


def _unavailable(ctx: Context, driver: str, reason: str) -> AotexecError:
    if ctx.device_type == "vulkan":
        hint = ("Install a Vulkan driver (on Linux without a GPU: apt-get install "
                "mesa-vulkan-drivers libvulkan1 for the lavapipe CPU device) or use ax.cpu().")
    elif ctx.device_type == "gpu":
        hint = "CUDA needs an NVIDIA GPU and its driver; or use ax.cpu()."
    else:
        hint = "The iree-base-runtime installation looks broken."
    name = {"vulkan": "Vulkan", "gpu": "CUDA", "cpu": "CPU"}[ctx.device_type]
    return AotexecError(f"{name} device {ctx.device_id} ({ctx}, IREE driver {driver!r}) "
                        f"is not available: {reason}. {hint}")



# IREE 3.13's bindings print pages of nanobind "leaked function" lines at every exit
# (cosmetic, see shared IREE notes); keep users' terminals readable.
try:
    from iree.runtime import _binding as _iree_binding
    _iree_binding.disable_leak_checker()
except (ImportError, AttributeError):
    pass

# A Vulkan semaphore destroyed after its device during interpreter teardown
# segfaults (IREE 3.13, lavapipe); release every semaphore first, at exit.
_semaphore_owners: list = []


@atexit.register
def _release_semaphores() -> None:
    for dev in _semaphore_owners:
        dev._sem = None
    _semaphore_owners.clear()


def default_driver(ctx: Context) -> str:
    """HAL driver for ctx (``Context.driver``; for cpu ``Options.cpu_driver``).

    local-sync runs dispatches inline on the calling thread: ~5 us per tiny call here
    against 20-140 us (bimodal, workers waking late) for the local-task thread pool,
    which only pays off for graphs with large, parallel dispatches.
    """
    return ctx.driver


@functools.cache
def _size_worker_stacks() -> None:
    """Process-wide, before the first local-task driver: room for the stack the compiled
    dispatches may use (options.DISPATCH_STACK_BYTES)."""
    rt.flags.parse_flags(f"--task_worker_stack_size={WORKER_STACK_BYTES}")


def _shape_nbytes(shape: Sequence[int], dtype: np.dtype) -> int:
    return math.prod(shape) * dtype.itemsize


def _size(nbytes: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} bytes"


def out_of_memory(ctx: Context, nbytes: int, what: str) -> AotexecError:
    """IREE's RESOURCE_EXHAUSTED (a RuntimeError pages long) as one line with the size asked for."""
    return AotexecError(f"out of memory on {ctx}: cannot allocate {nbytes:,} bytes ({_size(nbytes)}) for {what} "
                        "(IREE: RESOURCE_EXHAUSTED)")


def _exhausted(e: BaseException) -> bool:
    return isinstance(e, OverflowError) or "RESOURCE_EXHAUSTED" in str(e)


class Device:
    """An IREE HAL device for one Context; get it with `Device.get(ctx)` (cached).

    `driver` overrides the HAL driver (default: `default_driver(ctx)`), e.g. 'local-sync'
    for cpu; devices are cached per (ctx, driver). Buffers of local-task and local-sync
    devices are plain host memory and interoperate.
    """

    _cache: dict[tuple[Context, str], "Device"] = {}
    _cache_lock = threading.Lock()

    @classmethod
    def get(cls, ctx: Context | None = None, driver: str | None = None) -> "Device":
        ctx = current_context() if ctx is None else ctx
        if not isinstance(ctx, Context):
            raise AotexecError(f"expected a Context, got {ctx!r}")
        key = (ctx, driver or default_driver(ctx))
        dev = cls._cache.get(key)
        if dev is None:
            with cls._cache_lock:
                dev = cls._cache.get(key)
                if dev is None:
                    dev = cls._cache[key] = cls(ctx, key[1])
        return dev

    def __init__(self, ctx: Context, driver: str | None = None):
        self.context = ctx
        self.driver = driver = driver or ctx.driver
        if driver not in rt.query_available_drivers():
            raise _unavailable(ctx, driver, "the IREE runtime was built without this driver")
        if driver == "local-task":
            _size_worker_stacks()
        try:
            hal_driver = rt.get_driver(driver)
            if driver.startswith("local-"):
                # Host CPU: every cpu(i) is the same hardware; give each its own device.
                hal_device = hal_driver.create_default_device()
            else:
                infos = hal_driver.query_available_devices()
                if ctx.device_id >= len(infos):
                    raise _unavailable(ctx, driver, f"{len(infos)} device(s) enumerated")
                hal_device = hal_driver.create_device(infos[ctx.device_id])
        except AotexecError:
            raise
        except Exception as e:  # IREE raises RuntimeError/ValueError variously
            raise _unavailable(ctx, driver, str(e).strip() or type(e).__name__) from e
        self.hal_device: rt.HalDevice = hal_device
        self.allocator: rt.HalAllocator = hal_device.allocator
        self._is_local = driver.startswith("local-")
        self._sem = hal_device.create_semaphore(0)
        _semaphore_owners.append(self)
        self._sem_value = 0
        self._queue_lock = threading.Lock()
        self._staging_lock = threading.Lock()
        self._staging_buf: rt.HalBuffer | None = None

    def __repr__(self) -> str:
        return f"<Device {self.context} driver={self.driver}>"

    # -- queue helpers -----------------------------------------------------------------
    def _submit_copy(self, src: rt.HalBuffer, dst: rt.HalBuffer, nbytes: int,
                     src_offset: int = 0, dst_offset: int = 0) -> None:
        cb = rt.HalCommandBuffer(self.hal_device, begin=True)
        cb.copy(src, dst, source_offset=src_offset, target_offset=dst_offset,
                length=nbytes, end=True)
        self._execute(cb)

    def _execute(self, cb: rt.HalCommandBuffer) -> None:
        # Ordered on one timeline semaphore, and waited for: callers see finished data.
        with self._queue_lock:
            v = self._sem_value
            self._sem_value = v + 1
            self.hal_device.queue_execute(cb, [(self._sem, v)], [(self._sem, v + 1)])
            self._sem.wait(v + 1)

    @staticmethod
    def _mappable(buf: rt.HalBuffer) -> bool:
        return (buf.memory_type() & _HOST_VISIBLE) and (buf.allowed_usage() & _MAPPING)

    @staticmethod
    def _map_bytes(buf: rt.HalBuffer) -> np.ndarray:
        """Writable uint8 numpy view of a mappable buffer (keeps the mapping alive)."""
        return buf.map().asarray((buf.byte_length(),), _U8)

    # -- buffers -----------------------------------------------------------------------
    def upload(self, array: np.ndarray) -> rt.HalBufferView:
        """A device-owned copy of `array` (never imports host memory)."""
        arr = np.asarray(array)
        if not arr.flags.c_contiguous:  # (np.ascontiguousarray would turn 0-d into 1-d)
            arr = arr.copy(order="C")
        et = to_hal(arr.dtype)
        try:
            return self.allocator.allocate_buffer_copy(
                memory_type=_MT.DEVICE_LOCAL, allowed_usage=_BU.DEFAULT,
                device=self.hal_device, buffer=arr, element_type=et)
        except (RuntimeError, OverflowError) as e:
            if _exhausted(e):
                raise out_of_memory(self.context, arr.nbytes, f"a {arr.shape} {arr.dtype.name} array") from None
            raise

    def allocate(self, shape: Sequence[int], dtype="float32",
                 fill: float | int | bool | None = 0) -> rt.HalBufferView:
        """A new device buffer filled with `fill` (None: uninitialized)."""
        dt = normalize_dtype(dtype)
        shape = [int(d) for d in shape]
        nbytes = _shape_nbytes(shape, dt)
        try:
            buf = self.allocator.allocate_buffer(
                memory_type=_MT.DEVICE_LOCAL, allowed_usage=_BU.DEFAULT, allocation_size=nbytes)
        except (RuntimeError, OverflowError, TypeError) as e:
            if _exhausted(e) or nbytes >= 1 << 63:
                raise out_of_memory(self.context, nbytes, f"a {tuple(shape)} {dt.name} array") from None
            raise
        view = rt.HalBufferView(buf, shape, to_hal(dt))
        if fill is not None and nbytes and self._mappable(buf):
            # host-visible (CPU): fill through the mapping, no queue round trip (~1 ms each)
            self._map_bytes(buf)[:nbytes].view(dt)[:] = fill
        elif fill is not None and nbytes:
            pattern = np.array(fill, dtype=dt).tobytes()
            if pattern.count(pattern[:1]) == len(pattern):
                pattern = pattern[:1]  # e.g. zeros of any width: a 1-byte fill
            if len(pattern) in (1, 2, 4):
                cb = rt.HalCommandBuffer(self.hal_device, begin=True)
                cb.fill(buf, pattern, 0, nbytes, end=True)
                self._execute(cb)
            else:  # 8-byte patterns are not fillable: write the values
                self.write(view, np.full(shape, fill, dtype=dt))
        return view

    def allocate_arena(self, nbytes: int) -> rt.HalBuffer:
        """A device buffer for a function's ``iree.abi.transients`` (every intermediate)."""
        try:
            return self.allocator.allocate_buffer(memory_type=int(_MT.DEVICE_LOCAL), allowed_usage=int(_BU.DEFAULT),
                                                  allocation_size=max(int(nbytes), 64))
        except (RuntimeError, OverflowError, TypeError) as e:
            if _exhausted(e) or nbytes >= 1 << 63:
                raise out_of_memory(self.context, nbytes, "the transient arena of the compiled functions") from None
            raise

    def download(self, view: rt.HalBufferView, shape: Sequence[int] | None = None,
                 dtype=None) -> np.ndarray:
        """A fresh numpy copy of the first `shape`x`dtype` bytes of `view`'s buffer."""
        dt = from_hal(view.element_type) if dtype is None else normalize_dtype(dtype)
        shape = tuple(view.shape) if shape is None else tuple(int(d) for d in shape)
        nbytes = _shape_nbytes(shape, dt)
        if nbytes == 0:
            return np.empty(shape, dt)
        buf = view.get_buffer()
        if nbytes > buf.byte_length():
            raise AotexecError(f"download of {shape} {dt} ({nbytes} bytes) exceeds the "
                               f"buffer ({buf.byte_length()} bytes)")
        if self._mappable(buf):
            raw = self._map_bytes(buf)[:nbytes]
            return raw.view(dt).reshape(shape).copy()
        with self._staging_lock:
            stg = self._staging(nbytes)
            self._submit_copy(buf, stg, nbytes)
            return self._map_bytes(stg)[:nbytes].view(dt).reshape(shape).copy()

    def write(self, view: rt.HalBufferView, array: np.ndarray) -> None:
        """Overwrite `view`'s bytes in place (same HalBuffer: every view of it sees it).

        `array` must already have the view's byte size; dtype/broadcast is the caller's job.
        """
        arr = np.ascontiguousarray(array)
        nbytes = arr.nbytes
        if nbytes != view.byte_length:
            raise AotexecError(f"write of {nbytes} bytes into a view of {view.byte_length}")
        if nbytes == 0:
            return
        buf = view.get_buffer()
        flat = arr.reshape(-1).view(_U8)
        if self._mappable(buf):
            self._map_bytes(buf)[:nbytes] = flat
        else:
            with self._staging_lock:
                stg = self._staging(nbytes)
                self._map_bytes(stg)[:nbytes] = flat
                self._submit_copy(stg, buf, nbytes)

    def _staging(self, nbytes: int) -> rt.HalBuffer:
        """One reusable host-visible buffer per device for transfers (grown to the largest
        seen), so feeding inputs or reading results allocates nothing in steady state."""
        if self._staging_buf is None or self._staging_buf.byte_length() < nbytes:
            size = max(nbytes, 2 * (self._staging_buf.byte_length() if self._staging_buf else 0), 1 << 16)
            self._staging_buf = self.allocator.allocate_buffer(
                memory_type=_STAGING_TYPE, allowed_usage=_STAGING_USAGE_BOTH, allocation_size=size)
        return self._staging_buf

    def copy(self, src: rt.HalBufferView, dst: rt.HalBufferView) -> None:
        """Device-side copy of `src`'s content into `dst`'s buffer (equal byte sizes)."""
        n = src.byte_length
        if n != dst.byte_length:
            raise AotexecError(f"copy between views of {n} and {dst.byte_length} bytes")
        if n:
            self._submit_copy(src.get_buffer(), dst.get_buffer(), n)

    def view(self, buffer_view: rt.HalBufferView, shape: Sequence[int], dtype=None,
             byte_offset: int = 0) -> rt.HalBufferView:
        """A new HalBufferView over the same memory as `buffer_view`.

        byte_offset == 0 (reshape, prefix): same HalBuffer, any device.
        byte_offset > 0: the 3.13 bindings have no buffer subspan and HalBufferView takes
        no offset, so only host-memory devices (local-*) can do it, by importing the
        mapped bytes as an aliasing HalBuffer; the offset must be 64-byte aligned.
        """
        et = buffer_view.element_type if dtype is None else to_hal(dtype)
        dt = from_hal(et)
        shape = [int(d) for d in shape]
        nbytes = _shape_nbytes(shape, dt)
        buf = buffer_view.get_buffer()
        if byte_offset < 0 or byte_offset + nbytes > buf.byte_length():
            raise AotexecError(f"view of {nbytes} bytes at offset {byte_offset} exceeds the "
                               f"buffer ({buf.byte_length()} bytes)")
        if byte_offset == 0:
            return rt.HalBufferView(buf, shape, et)
        if not (self._is_local and self._mappable(buf)):
            raise AotexecError(f"views at a byte offset are not supported on {self.context} "
                               "(IREE 3.13 Python bindings expose no buffer subspan); copy instead")
        if byte_offset % _ALIAS_ALIGNMENT:
            raise AotexecError(f"view byte_offset {byte_offset} is not a multiple of "
                               f"{_ALIAS_ALIGNMENT}; copy instead")
        if nbytes == 0:
            return self.allocate(shape, dt, fill=None)
        # The imported buffer keeps the numpy slice alive, which keeps the mapping alive.
        alias = self.allocator.import_host_allocation(
            self._map_bytes(buf)[byte_offset:byte_offset + nbytes],
            memory_type=_MT.DEVICE_LOCAL | _MT.HOST_VISIBLE, allowed_usage=_BU.DEFAULT)
        return rt.HalBufferView(alias, shape, et)

    # -- modules -----------------------------------------------------------------------
    def load_module(self, vmfb: bytes | bytearray | memoryview | str | os.PathLike | rt.VmModule,
                    debug_sink: rt.HalModuleDebugSink | None = None,
                    parameters: tuple[str, dict[str, np.ndarray]] | None = None) -> "LoadedModule":
        """Load a compiled .vmfb (bytes, file path or a module already read) into a fresh VM
        context here.  ``parameters``: (scope, {key: array}) for a module reading IREE
        parameters; its initializers run now, on these values."""
        inst = vm_instance()
        try:
            if isinstance(vmfb, rt.VmModule):
                module = vmfb
            elif isinstance(vmfb, (str, os.PathLike)):
                module = rt.VmModule.mmap(inst, os.fspath(vmfb))
            else:
                module = rt.VmModule.copy_buffer(inst, vmfb)
            hal = rt.create_hal_module(inst, self.hal_device, debug_sink=debug_sink)
            modules: list = [hal]
            keep: list = []
            if parameters is not None:
                scope, arrays = parameters
                index = rt.ParameterIndex()
                for key, arr in arrays.items():
                    host = np.ascontiguousarray(arr)
                    keep.append(host)         # IREE may map the host memory instead of copying it
                    index.add_buffer(key, host)
                modules.append(rt.create_io_parameters_module(inst, index.create_provider(scope=scope)))
                keep.append(index)
            vm_context = rt.VmContext(inst, modules=modules + [module])
        except Exception as e:
            raise AotexecError(f"cannot load module on {self.context} ({self.driver}): {e}. "
                               f"Was it compiled for target {self.context.target!r}?") from e
        loaded = LoadedModule(self, module, vm_context, hal)
        loaded._keep = modules + keep   # the parameter module, index and values live as long as the context
        return loaded

    def read_module(self, vmfb: bytes) -> rt.VmModule:
        """The module of a .vmfb, not yet in any context (see ``load_module``)."""
        try:
            return rt.VmModule.copy_buffer(vm_instance(), vmfb)
        except Exception as e:
            raise AotexecError(f"cannot read module: {e}") from e

    def allocator_statistics(self) -> dict[str, int]:
        """IREE allocator counters: {host,device}_bytes_{peak,allocated,freed}.

        Empty when the runtime was built without IREE_STATISTICS_ENABLE. On Vulkan the
        device numbers count driver memory blocks (64 MiB pools), not tensor bytes.
        """
        if not self.allocator.has_statistics:
            return {}
        return dict(self.allocator.statistics)


class LoadedModule:
    """A compiled module bound to a Device: exported functions, invoked low-level."""

    def __init__(self, device: Device, module: rt.VmModule, vm_context: rt.VmContext,
                 hal_module: rt.VmModule):
        self.device = device
        self.module = module
        self.vm_context = vm_context
        self._hal_module = hal_module  # keep alive with the context
        self._keep: list = []
        self.function_names: list[str] = [
            n for n in module.function_names if not n.startswith("__")]
        self._functions: dict[str, rt.VmFunction] = {}
        self._result_counts: dict[str, int] = {}
        # executors of one program share this context (``runtime.program``'s module cache), and
        # iree_vm_context_t is "thread-compatible and must be externally synchronized"
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<LoadedModule {self.module.name} on {self.device.context}: {self.function_names}>"

    def function(self, name: str) -> rt.VmFunction:
        fn = self._functions.get(name)
        if fn is None:
            fn = self.module.lookup_function(name) if name in self.function_names else None
            if fn is None:
                raise AotexecError(f"module {self.module.name!r} has no function {name!r}; "
                                   f"available: {self.function_names}")
            self._functions[name] = fn
        return fn

    def reflection(self, name: str) -> dict:
        return dict(self.function(name).reflection)

    def invoke(self, name: str,
               args: Sequence[rt.HalBufferView | rt.HalBuffer]) -> list[rt.HalBufferView]:
        """Call `name` with buffer views (or raw buffers, e.g. a transients arena).

        Results must be buffer views (tensor results); they are ready on return.
        """
        fn = self._functions.get(name) or self.function(name)
        arg_list = rt.VmVariantList(len(args))
        for a in args:
            arg_list.push_ref(a)
        results = rt.VmVariantList(self._result_counts.get(name, 1))
        waiting = no_wakeup_preemption() if self.device.driver == "local-task" else contextlib.nullcontext()
        try:
            with self._lock, waiting:    # IREE VM contexts are thread-compatible, not thread-safe
                self.vm_context.invoke(fn, arg_list, results)
        except (RuntimeError, ValueError, TypeError, IndexError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if "RESOURCE_EXHAUSTED" in str(e):
                raise AotexecError(f"out of memory on {self.device.context} running {name!r} "
                                   f"(IREE: RESOURCE_EXHAUSTED: {first})") from None
            raise AotexecError(f"invoking {name!r} on {self.device.context}: {e}") from e
        n = results.size
        self._result_counts[name] = n
        return [results.get_as_object(i, rt.HalBufferView) for i in range(n)]
