"""Building ``aotexec.kernels``' object code: the system C compiler, once per source and compiler,
remembered in the compile cache folder."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ..compiler import CompileOptions, _child_setup, resolve_cpu
from ..options import Options
from ..kernels import code as kernel_code
from ..kernels.code import Kernels

_log = logging.getLogger("aotexec.kernels")

SOURCE = Path(kernel_code.__file__).with_name("avx512_kernels.c")
# freestanding code for IREE's embedded ELF linker: no libc calls (memset patterns, stack
# protector, unwind tables), no PIC indirection, no jump tables (absolute relocations)
CFLAGS = ("-O3", "-march=x86-64-v4", "-std=c11", "-ffreestanding", "-fno-builtin", "-fno-stack-protector",
          "-fno-tree-loop-distribute-patterns", "-fno-asynchronous-unwind-tables", "-fno-pic",
          "-ffunction-sections", "-fdata-sections", "-fno-jump-tables")
# what the object needs of the CPU the module runs on (LLVM feature names)
REQUIRED_FEATURES = {"avx512f", "fma"}
COMPILERS = ("cc", "gcc", "clang")
# graphs with grouped convolutions: deep products outside inference functions from this depth
# (0: none). MobileNet v1 / v2 b16 training 0.970 / 0.982 with 512; v1 0.971 with 256, where v2
# was 1.16 (its module then fell back to the fenced form)
GROUPED_DEEP_MIN_DEPTH = 512


def _compiler() -> str | None:
    for name in COMPILERS:
        path = shutil.which(name)
        if path:
            return path
    return None


@functools.lru_cache(maxsize=1)
def _compiler_id() -> tuple[str, str] | None:
    """(path, ``--version`` text) of the first C compiler found, None without one."""
    cc = _compiler()
    if cc is None:
        _log.info("no C compiler (%s) found: modules use IREE's own matmuls", ", ".join(COMPILERS))
        return None
    try:
        return cc, subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError) as e:
        _log.info("C compiler %s unusable (%s): modules use IREE's own matmuls", cc, e)
        return None


_failed: set[str] = set()


def _build(cache_dir: Path) -> Kernels | None:
    ident = _compiler_id()
    if ident is None:
        return None
    cc, version = ident
    key = hashlib.sha256("\0".join([SOURCE.read_text(), version, *CFLAGS]).encode()).hexdigest()[:24]
    name = f"avx512_kernels-{key}.o"
    kept = cache_dir / "kernels" / name
    if not kept.exists():
        if key in _failed or not _compile(cc, kept):
            _failed.add(key)
            return None
    return Kernels(_module_path(kept, name))


def _compile(cc: str, path: Path) -> bool:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        proc = subprocess.run([cc, *CFLAGS, "-c", str(SOURCE), "-o", str(tmp)], capture_output=True, text=True,
                              timeout=120, preexec_fn=_child_setup(None) if sys.platform == "linux" else None)
    except (OSError, subprocess.SubprocessError) as e:
        _log.warning("building the matmul kernel with %s failed (%s): modules use IREE's own matmuls", cc, e)
        return False
    if proc.returncode != 0:
        _log.warning("building the matmul kernel with %s failed: %s; modules use IREE's own matmuls",
                     cc, proc.stderr.strip().splitlines()[-1:] or proc.returncode)
        tmp.unlink(missing_ok=True)
        return False
    os.replace(tmp, path)
    return True


def _module_path(kept: Path, name: str) -> Path:
    """Where modules name the object: a per-user folder in the temp folder, the same whatever
    the compile cache folder (a module's text is its cache key, and caches get copied: the
    benchmark harness compiles cold in a fresh folder, then copies it); ``kept`` where that
    folder cannot be had, or is not this user's."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    folder = Path(tempfile.gettempdir()) / f"aotexec-{uid}-kernels"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        if folder.stat().st_uid != uid:
            return kept
        path = folder / name
        if not path.exists():
            tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            shutil.copyfile(kept, tmp)
            os.replace(tmp, path)
        return path
    except OSError:
        return kept


def kernels_for(opts: CompileOptions, options: Options, graph=None) -> Kernels | None:
    """The kernels a module compiled with ``opts`` may call: llvm-cpu, an x86-64 target CPU with
    AVX-512 (this machine's, or named with its features), ``options.kernels`` on. A ``graph``
    with grouped convolutions gets deep products from ``FOLDED_MIN_DEPTH`` in inference functions
    (where their epilogues fold: MobileNet v1 b16 6.5% faster, v2 even; without the fold 6% / 15%
    slower), elsewhere from ``GROUPED_DEEP_MIN_DEPTH``."""
    if not options.kernels or opts.target != "llvm-cpu":
        return None
    try:
        cpu = resolve_cpu(opts, llvm_host_name=False, options=options)
    except Exception:       # a bad CPU name is reported by the compile itself
        return None
    if not (cpu["triple"] or "").startswith("x86_64") or not REQUIRED_FEATURES <= set(cpu["features"] or ()):
        return None
    kernels = _build(options.cache_dir)
    if kernels is not None and graph is not None and any(getattr(n.params, "num_group", 1) > 1 for n in graph.nodes):
        if GROUPED_DEEP_MIN_DEPTH:
            return dataclasses.replace(kernels, deep_min_depth=GROUPED_DEEP_MIN_DEPTH)
        return dataclasses.replace(kernels, deep_products=False)
    return kernels
