"""An artifact's parameters as an IREE parameter archive (``params.irpa``), for IREE's own tools.

``params.npz`` is what aotexec's runtime reads (typed, named as MXNet names them); the archive
holds the same arrays, keyed by variable name, as raw bytes IREE maps: ``iree-run-module
--parameters=aotexec=params.irpa`` feeds the resident module's ``#flow.parameter.named``
globals from it (``lowering.module``, scope ``signature.RESIDENT_SCOPE``), and
``iree-dump-parameters`` lists it.  Two files that must agree: ``ax.load`` checks the archive
holds exactly the .npz's arrays, byte for byte, so IREE's tools and Python never run on
different weights.  Runtime only (iree.runtime).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .manifest import first_line, invalid

ARCHIVE = "params.irpa"


def write_archive(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``arrays`` by variable name (no arg:/aux: prefixes) into an .irpa file at ``path``."""
    import iree.runtime as rt
    index = rt.ParameterIndex()
    keep = []    # the index refers to (does not copy) the host memory until the file is written
    for name, arr in arrays.items():
        host = np.ascontiguousarray(arr)
        keep.append(host)
        index.add_buffer(name, host)
    index.create_archive_file(str(path))


def archive_arrays(params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The archive's contents for params.npz's arrays (keys ``arg:<name>`` / ``aux:<name>``)."""
    return {k.partition(":")[2] or k: v for k, v in params.items()}


def check_archive(root: Path, fname: str, data: bytes, arrays: dict[str, np.ndarray]) -> None:
    """``data`` (the archive's bytes, as hashed) holds exactly ``arrays`` by name, byte for byte."""
    import iree.runtime as rt
    index = rt.ParameterIndex()
    try:
        index.load_from_file_handle(rt.FileHandle.wrap_memory(data), format="irpa")
        entries = index.items()
    except Exception as e:   # noqa: BLE001 (IREE raises RuntimeError / ValueError variously)
        raise invalid(root, f"{fname} is not an IREE parameter archive ({first_line(e)})") from None
    names = [k for k, _ in entries]
    if sorted(names) != sorted(arrays):
        raise invalid(root, f"{fname} holds {sorted(names)}; the parameters are {sorted(arrays)}")
    for name, entry in entries:
        want = np.ascontiguousarray(arrays[name]).reshape(-1).view(np.uint8)
        same = entry.is_file and not entry.is_splat and entry.length == want.size and (
            want.size == 0 or np.array_equal(np.frombuffer(entry.file_view, dtype=np.uint8), want))
        if not same:
            raise invalid(root, f"{fname}: {name} differs from its value in the .npz (re-save both, or recompile)")
