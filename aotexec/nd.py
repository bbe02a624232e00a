"""The `ax.nd` namespace: NDArray and its creation functions (MXNet's `mx.nd`)."""
from .runtime.ndarray import NDArray, array, empty, full, ones, waitall, zeros

__all__ = ["NDArray", "array", "empty", "full", "ones", "waitall", "zeros"]
