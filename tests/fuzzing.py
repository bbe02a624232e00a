"""Seeded mutations for the fuzz suite (tests/test_fuzz*.py): bytes and JSON documents, and a
time limit per case.  Deterministic: a case is (seed, index), so a finding reproduces."""
from __future__ import annotations

import contextlib
import copy
import json
import random
import resource
import signal
import time
from typing import Any, Iterator

INTERESTING_INTS = [0, 1, -1, 2, 3, 7, 8, 255, 256, 65535, 2**31 - 1, 2**31, -2**31, 2**32, 2**63 - 1, 2**63,
                    -2**63, 2**64, 10**30]
INTERESTING_VALUES: list[Any] = [None, True, False, "", "0", "-1", "nan", "inf", "(1, 2)", "()", "a\"b\\c", "\u00e9",
                                 "..", "../x", "/etc/passwd", "x" * 300, 0.5, -0.0, 1e308, float("nan"), [], {}, [[]],
                                 [0], [-1, 2], {"a": 1}]


def cpu_seconds() -> float:
    """CPU time of this process and its finished children: the suite's budget, which a busy
    shared machine does not stretch as it does the wall clock."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + kids.ru_utime + kids.ru_stime


class Hang(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise Hang if the block runs longer (main thread only: SIGALRM)."""
    def on_alarm(signum, frame):
        raise Hang(f"case ran over {seconds} s")
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def mutate_bytes(rng: random.Random, data: bytes, max_edits: int = 4) -> bytes:
    """A few random edits: bit flips, interesting bytes, inserts, deletes, truncation, copies."""
    b = bytearray(data)
    for _ in range(rng.randint(1, max_edits)):
        if not b:
            b += bytes([rng.randrange(256)])
            continue
        i = rng.randrange(len(b))
        kind = rng.randrange(7)
        if kind == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            b[i] = rng.choice([0, 1, 0x7F, 0x80, 0xFF])
        elif kind == 2:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif kind == 3:
            del b[i:i + rng.randint(1, 16)]
        elif kind == 4:
            del b[i:]
        elif kind == 5:   # a 4-byte little-endian field set to an interesting value
            v = rng.choice(INTERESTING_INTS) & 0xFFFFFFFF
            b[i:i + 4] = v.to_bytes(4, "little")
        else:
            j = rng.randrange(len(b))
            n = rng.randint(1, 64)
            b[j:j] = b[i:i + n]
    return bytes(b)


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _get(doc: Any, path: tuple) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _random_value(rng: random.Random, like: Any) -> Any:
    r = rng.random()
    if isinstance(like, bool) or r < 0.3:
        return copy.deepcopy(rng.choice(INTERESTING_VALUES))
    if isinstance(like, int) and r < 0.8:
        return rng.choice([like + 1, like - 1, -like, like * 2, rng.choice(INTERESTING_INTS)])
    if isinstance(like, str) and r < 0.8:
        return rng.choice([like + "x", like[:-1], like.upper(), like * 2, "", like.replace("_", "")])
    return copy.deepcopy(rng.choice(INTERESTING_VALUES + INTERESTING_INTS))


def mutate_json(rng: random.Random, doc: Any, max_edits: int = 3) -> Any:
    """A copy of ``doc`` with a few structural edits: values replaced (by type-aware neighbours or
    odd values), keys deleted or renamed, list items dropped, duplicated or swapped."""
    doc = copy.deepcopy(doc)
    for _ in range(rng.randint(1, max_edits)):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            return rng.choice(INTERESTING_VALUES)
        path = rng.choice(paths)
        parent, key = _get(doc, path[:-1]), path[-1]
        kind = rng.randrange(6)
        if kind <= 2:
            parent[key] = _random_value(rng, parent[key])
        elif kind == 3:
            del parent[key]
        elif kind == 4 and isinstance(parent, dict):
            parent[str(key) + rng.choice(["_", "x", ""]) if rng.random() < 0.5 else str(key).upper()] = parent.pop(key)
        elif isinstance(parent, list):
            j = rng.randrange(len(parent))
            if rng.random() < 0.5:
                parent.insert(j, copy.deepcopy(parent[key]))
            else:
                parent[key], parent[j] = parent[j], parent[key]
        else:
            parent[key] = copy.deepcopy(_get(doc, rng.choice(paths)[:-1]) if rng.random() < 0.3 else parent[key])
    return doc


def mutate_json_text(rng: random.Random, text: str) -> str:
    """Structural edits most of the time, raw byte edits (broken JSON, odd UTF-8) otherwise."""
    if rng.random() < 0.8:
        return json.dumps(mutate_json(rng, json.loads(text)))
    return mutate_bytes(rng, text.encode()).decode("utf-8", "replace")
