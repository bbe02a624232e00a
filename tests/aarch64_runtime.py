"""IREE's aarch64 tools under qemu-user, for the cross-compiled artifact tests.

The aarch64 ``iree-run-module`` comes from the aarch64 iree-base-runtime wheel of this runtime's
version (``pip download --platform manylinux_2_28_aarch64``), unpacked once per machine into
``~/.cache/aotexec/iree-base-runtime-<version>-aarch64`` (``$XDG_CACHE_HOME`` respected; not
AOTEXEC_CACHE_DIR, which CI points at a fresh folder per run).  It is a dynamically linked
glibc program: qemu runs it with Debian's aarch64 libraries (``-L /usr/aarch64-linux-gnu``,
packages libc6-arm64-cross libstdc++6-arm64-cross), which .ci/run installs with qemu-user-static.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SYSROOT = Path("/usr/aarch64-linux-gnu")
PACKAGES = "qemu-user-static libc6-arm64-cross libstdc++6-arm64-cross"


def qemu() -> str | None:
    """The qemu-user aarch64 emulator and the aarch64 C/C++ runtime it loads, or None."""
    exe = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
    libs = [SYSROOT / "lib" / n for n in ("ld-linux-aarch64.so.1", "libc.so.6", "libstdc++.so.6")]
    return exe if exe and all(p.exists() for p in libs) else None


def cache_root() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "aotexec"


def runtime_tools() -> Path:
    """The folder holding the aarch64 IREE tools (downloaded and unpacked on first use)."""
    from importlib.metadata import version
    ver = version("iree-base-runtime")      # pip's version (iree.runtime.version says 3.13.0rcYYYYMMDD)
    dest = cache_root() / f"iree-base-runtime-{ver}-aarch64"
    if (dest / "iree-run-module").is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)       # one download per machine, even with parallel runs
        if (dest / "iree-run-module").is_file():
            return dest
        with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check",
                   "--platform", "manylinux_2_28_aarch64", "--only-binary=:all:", f"iree-base-runtime=={ver}",
                   "--dest", tmp]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            wheels = list(Path(tmp).glob("*.whl"))
            if proc.returncode != 0 or not wheels:
                raise RuntimeError(f"could not download the aarch64 iree-base-runtime=={ver} wheel: "
                                   f"{' '.join(cmd)}\n{proc.stderr[-2000:]}")
            staged = Path(tmp) / "tools"
            staged.mkdir()
            with zipfile.ZipFile(wheels[0]) as z:
                for info in z.infolist():
                    name = info.filename
                    if name.startswith("iree/_runtime_libs/iree-") and "/" not in name[len("iree/_runtime_libs/"):]:
                        target = staged / Path(name).name
                        target.write_bytes(z.read(info))
                        target.chmod(0o755)     # zip extraction drops the executable bit
            os.rename(staged, dest)
    return dest


def wrapper(folder: Path, emulator: str, binary: Path) -> Path:
    """An executable script running the aarch64 ``binary`` under ``emulator`` (what --tool names)."""
    script = folder / binary.name
    script.write_text(f'#!/bin/sh\nexec {emulator} -L {SYSROOT} {binary} "$@"\n')
    script.chmod(0o755)
    return script
