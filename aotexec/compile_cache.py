"""Two-level cache of compiled vmfb bytes: an in-process LRU and a disk directory.

Disk entries are written to a temp file and renamed into place, so a concurrent
reader sees either nothing or a whole file; each entry carries a header with the
payload length and sha256, so a torn or corrupted file (disk full, crash, a
foreign writer) reads as a miss and is recompiled, never loaded.
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

__all__ = [
    "CACHE_FORMAT_VERSION",
    "cache_key",
    "lookup",
    "store",
    "cache_stats",
    "reset_cache_stats",
    "clear_memory_cache",
]

_log = logging.getLogger("aotexec.compiler")

# Bump when the key recipe or the entry layout changes.
CACHE_FORMAT_VERSION = 1

_MAGIC = b"AOTXVMFB"
_HEADER = struct.Struct("<8sIQ32s")  # magic, format version, payload length, sha256

_MEM_MAX_ENTRIES = 128
_MEM_MAX_BYTES = 512 << 20

_lock = threading.Lock()
_mem: OrderedDict[str, bytes] = OrderedDict()
_mem_bytes = 0
_stats = {"hits_memory": 0, "hits_disk": 0, "misses": 0}


def cache_key(mlir_text: str, flags: list[str], compiler_version: str) -> str:
    h = hashlib.sha256()
    # NUL separators: no flag or version string contains one, so fields cannot alias.
    for part in (f"aotexec-cache-v{CACHE_FORMAT_VERSION}", compiler_version, *flags):
        h.update(part.encode())
        h.update(b"\0")
    h.update(b"\0")
    h.update(mlir_text.encode())
    return h.hexdigest()


def _entry_path(root: Path, key: str) -> Path:
    return root / "vmfb" / key[:2] / f"{key}.vmfb"


def _mem_put(key: str, data: bytes) -> None:
    global _mem_bytes
    if len(data) > _MEM_MAX_BYTES:
        return
    with _lock:
        old = _mem.pop(key, None)
        if old is not None:
            _mem_bytes -= len(old)
        _mem[key] = data
        _mem_bytes += len(data)
        while len(_mem) > _MEM_MAX_ENTRIES or _mem_bytes > _MEM_MAX_BYTES:
            _, evicted = _mem.popitem(last=False)
            _mem_bytes -= len(evicted)


def _read_disk(root: Path, key: str) -> bytes | None:
    path = _entry_path(root, key)
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    if len(blob) >= _HEADER.size:
        magic, version, length, digest = _HEADER.unpack_from(blob)
        payload = blob[_HEADER.size:]
        if (
            magic == _MAGIC
            and version == CACHE_FORMAT_VERSION
            and length == len(payload)
            and hashlib.sha256(payload).digest() == digest
        ):
            return payload
    _log.warning("ignoring corrupt compile cache entry %s; recompiling", path)
    try:
        path.unlink()
    except OSError:
        pass
    return None


def _write_disk(root: Path, key: str, data: bytes) -> None:
    path = _entry_path(root, key)
    header = _HEADER.pack(_MAGIC, CACHE_FORMAT_VERSION, len(data), hashlib.sha256(data).digest())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(header)
                f.write(data)
            os.replace(tmp, path)  # atomic on POSIX: readers never see a partial entry
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as e:
        # A read-only or full cache directory must not fail the compile.
        _log.warning("could not write compile cache entry %s: %s", path, e)


def lookup(root: Path, key: str) -> bytes | None:
    """Memory, then disk under ``root`` (promoting to memory); counts a miss when both fail."""
    with _lock:
        data = _mem.get(key)
        if data is not None:
            _mem.move_to_end(key)
            _stats["hits_memory"] += 1
    if data is not None:
        _log.debug("compile cache hit (memory) %s", key[:16])
        return data
    data = _read_disk(root, key)
    if data is not None:
        _mem_put(key, data)
        with _lock:
            _stats["hits_disk"] += 1
        _log.debug("compile cache hit (disk) %s", key[:16])
        return data
    with _lock:
        _stats["misses"] += 1
    _log.debug("compile cache miss %s", key[:16])
    return None


def store(root: Path, key: str, data: bytes) -> None:
    _mem_put(key, data)
    _write_disk(root, key, data)


def cache_stats() -> dict[str, int]:
    with _lock:
        return dict(_stats)


def reset_cache_stats() -> None:
    with _lock:
        for k in _stats:
            _stats[k] = 0


def clear_memory_cache() -> None:
    global _mem_bytes
    with _lock:
        _mem.clear()
        _mem_bytes = 0
