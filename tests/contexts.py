"""The contexts tests run on: cpu always, vulkan where a Vulkan device exists (always in CI)."""
from __future__ import annotations

import os

import pytest

import aotexec as ax


def _vulkan_reason() -> str | None:
    try:
        from aotexec.runtime.device import Device
        Device.get(ax.vulkan())
        return None
    except Exception as e:  # no driver / no device
        return f"no Vulkan device: {e}"


_reason = _vulkan_reason()
if _reason and os.environ.get("CI"):
    raise RuntimeError(f"CI must run the Vulkan tests (lavapipe): {_reason}")

VULKAN_MISSING = _reason


def _cuda_reason() -> str | None:
    try:
        from aotexec.runtime.device import Device
        Device.get(ax.gpu())
        return None
    except Exception as e:  # no NVIDIA GPU / driver here
        return f"no CUDA device: {str(e).splitlines()[0][:160]}"


CUDA_MISSING = _cuda_reason()

CONTEXTS = [
    pytest.param(ax.cpu(), id="cpu"),
    pytest.param(ax.vulkan(), id="vulkan",
                 marks=pytest.mark.skipif(_reason is not None, reason=_reason or "")),
    pytest.param(ax.gpu(), id="cuda",
                 marks=pytest.mark.skipif(CUDA_MISSING is not None, reason=CUDA_MISSING or "")),
]
