"""Runtime layer: contexts, IREE devices and modules, NDArray."""
from .context import Context, cpu, current_context, gpu, vulkan
from .device import Device, LoadedModule
from .ndarray import NDArray

__all__ = ["Context", "Device", "LoadedModule", "NDArray", "cpu", "current_context", "gpu",
           "vulkan"]
