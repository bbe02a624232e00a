"""The `ax.nd` namespace: NDArray, its creation functions and MXNet's NDArray files (MXNet's `mx.nd`)."""
from .runtime.ndarray import NDArray, array, empty, full, ones, waitall, zeros
from .runtime.ndarray_file import load, load_frombuffer, save

__all__ = ["NDArray", "array", "empty", "full", "load", "load_frombuffer", "ones", "save", "waitall", "zeros"]
