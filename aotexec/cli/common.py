"""What the commands share: the one-line error, NAME=VALUE parsing, shapes, devices, files."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any, NoReturn


class CliError(Exception):
    """Bad input: ``main`` prints it as one line and exits with code 2."""


def fail(msg: str) -> NoReturn:
    raise CliError(msg)


def pairs(items: list[str] | None, what: str) -> dict[str, str]:
    out = {}
    for item in items or ():
        if "=" not in item:
            fail(f"{what} '{item}' must look like NAME=VALUE")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def shape(text: str, name: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.replace("(", "").replace(")", "").split(",") if d.strip())
    except ValueError:
        fail(f"shape of '{name}' must be comma-separated integers, got '{text}'")
    if not dims or any(d <= 0 for d in dims):
        fail(f"shape of '{name}' must have positive dimensions, got '{text}'")
    return dims


def variants(items: list[str] | None) -> list[dict[str, tuple[int, ...]]]:
    """Repeating --shape for a name makes variants: the i-th occurrences form variant i;
    a name given once applies to every variant."""
    seen: dict[str, list[tuple[int, ...]]] = {}
    for item in items or ():
        if "=" not in item:
            fail(f"--shape '{item}' must look like NAME=D0,D1,...")
        k, v = item.split("=", 1)
        seen.setdefault(k.strip(), []).append(shape(v.strip(), k.strip()))
    if not seen:
        return []
    count = max(len(v) for v in seen.values())
    bad = [k for k, v in seen.items() if len(v) not in (1, count)]
    if bad:
        fail(f"--shape for {bad} is repeated {[len(seen[k]) for k in bad]} times; give each repeated input "
             f"the same number of variants ({count})")
    return [{k: (v[i] if len(v) > 1 else v[0]) for k, v in seen.items()} for i in range(count)]


def context(device: str):
    import aotexec as ax
    make = {"cpu": ax.cpu, "vulkan": ax.vulkan, "gpu": ax.gpu}.get(device)
    if make is None:
        fail(f"unknown device '{device}'; use cpu, vulkan or gpu")
    return make()


def load_array(path: str | Path, what: str) -> Any:
    """One array from a .npy file; any other kind of file is a one-line error."""
    import numpy as np
    path = Path(path)
    if not path.exists() or path.is_dir():
        fail(f"{what}: {path} does not exist" if not path.exists() else f"{what}: {path} is a folder")
    try:
        # read whole: a pipe (bash's <(...)) is not seekable, and np.load seeks
        arr = np.load(io.BytesIO(path.read_bytes()), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        fail(f"{what}: {path} is not a numpy .npy file ({str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__})")
    if not isinstance(arr, np.ndarray):
        arr.close()
        fail(f"{what}: {path} is an .npz archive; give a single-array .npy file (np.save)")
    return arr
