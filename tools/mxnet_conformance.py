"""Run MXNet 1.9.1's own unit tests against aotexec, through a small ``mxnet`` shim.

    python tools/mxnet_conformance.py /tmp/mxnet-tests/tests/python/unittest \
        [--files test_symbol.py ...] [-k substring] [--timeout 120] [--max-compiles 40] \
        [--json results.json] [--compare before.json]

The unittest folder is MXNet's ``tests/python/unittest`` at tag 1.9.1 (not part of aotexec:
fetch it, e.g. ``git archive 1.9.1 tests/python/unittest tests/python/common | tar -x -C /tmp/mxnet-tests``;
``tests/python/common`` holds the ``models`` module the tests import).  ``tools/mxnet_shim`` goes
first on ``sys.path``: ``import mxnet`` gets aotexec (see its README).

The test files are loaded with their indexing of numpy arrays by lists read as numpy < 1.23
did (``legacy_getitem``; MXNet's CI ran numpy < 1.20), and ``np.arange`` of unsigned dtypes
from negative ints wrapping as numpy < 2 did (``_LegacyNumpy``).  Each file's tests run in a worker
process, one at a time; the runner kills a worker whose test
runs over ``--timeout`` seconds and starts a new one for the rest.  Every bind / simple_bind /
reshape is an executor; a test that causes more than ``--max-compiles`` compiles (a new shape of a
structure without a shape-generic program costs one) stops and is reported as over budget.
The report groups results by cause:
pass, assertion (a wrong result or behaviour), aotexec error, missing operator, unsupported
(autograd, gluon, sparse, custom ops...: parts of MXNet aotexec does not have), budget, timeout.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path

SHIM = Path(__file__).resolve().parent / "mxnet_shim"
DEFAULT_FILES = ("test_symbol.py", "test_executor.py", "test_infer_shape.py", "test_operator.py")
STATUSES = ("pass", "assertion", "aotexec error", "missing operator", "unsupported", "error", "budget",
            "timeout", "crash", "skip")


# ---- worker (runs inside the child process) -------------------------------------------------
def _classify(exc: BaseException, test_file: str) -> tuple[str, str]:
    """(status, detail) for a failed test."""
    import mxnet._harness as h
    from aotexec.base import AotexecError
    first = (str(exc).strip().splitlines() or [""])[0][:240]
    if isinstance(exc, h.BudgetExceeded) or h.STATE["over"]:
        return "budget", f"{h.STATE['executors']} executors"
    if isinstance(exc, h.Unsupported):
        return "unsupported", exc.feature
    if isinstance(exc, h.MissingOp):
        return "missing operator", exc.op
    if isinstance(exc, AotexecError) and "is not registered in aotexec" in first:
        return "missing operator", first.split("'")[1]
    import unittest
    if isinstance(exc, unittest.SkipTest):
        return "skip", first
    where = _test_frame(exc, test_file)
    if isinstance(exc, AssertionError):
        return "assertion", f"{where}: {first}" if first else where
    if isinstance(exc, AotexecError):
        return "aotexec error", f"{where}: {first}"
    return "error", f"{where}: {type(exc).__name__}: {first}"


def _test_frame(exc: BaseException, test_file: str) -> str:
    """The deepest traceback line inside the test file (where the test was when it failed)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith(test_file)]
    return f"line {frames[-1].lineno}" if frames else "?"


def _seed(seed: int) -> None:
    import random
    import numpy as np
    import mxnet as mx
    random.seed(seed)
    np.random.seed(seed)
    mx.random.seed(seed)


def _run_one(fn) -> None:
    result = fn()
    if hasattr(result, "__next__"):      # nose generator test: yields (function, *args)
        for case in result:
            case[0](*case[1:])


def legacy_getitem(obj, index):
    """``obj[index]`` with numpy < 1.23's reading of a list index on a numpy array: a list of
    fewer than 32 entries holding a slice, None, Ellipsis or a sequence indexes as a tuple.
    MXNet 1.9.1's CI ran numpy < 1.20, and its tests index that way (test_flip's
    ``x.asnumpy()[[slice(None, None, -1), ...]]``, test_pick's ``data[[array, ...]]``); numpy
    >= 1.23 refuses (IndexError / "setting an array element with a sequence"), whatever the
    library under test (MXNet 1.9.1 with numpy 1.23 fails them too)."""
    return obj[_legacy_index(obj, index)]


def legacy_setitem(obj, index, value) -> None:
    """``obj[index] = value`` as ``legacy_getitem`` reads the index."""
    obj[_legacy_index(obj, index)] = value


def _legacy_index(obj, index):
    import numpy as np
    if (isinstance(obj, np.ndarray) and type(index) is list and len(index) < 32
            and any(isinstance(i, (slice, list, tuple, np.ndarray)) or i is None or i is Ellipsis for i in index)):
        return tuple(index)
    return index


class _LegacyNumpy:
    """The test file's ``np``: numpy, but ``arange`` of an unsigned dtype with negative Python
    ints wraps as numpy < 2 did (test_init's ``np.arange(-100, 100, 1, dtype=np.uint8)``;
    numpy 2 raises OverflowError: NEP 50)."""

    def __init__(self, np) -> None:
        self._np = np

    def __getattr__(self, name: str):
        return getattr(self._np, name)

    def arange(self, *args, dtype=None, **kwargs):
        np = self._np
        if dtype is not None and np.dtype(dtype).kind == "u" and any(
                isinstance(a, int) and a < 0 for a in args):
            return np.arange(*args, dtype=np.int64, **kwargs).astype(dtype)
        return np.arange(*args, dtype=dtype, **kwargs)


def _plain(node: ast.Subscript) -> bool:
    """No slice syntax in the index (``a[i]``, not ``a[1:2]``): the index is a value."""
    return not any(isinstance(n, ast.Slice) for n in ast.walk(node.slice))


class _LegacyIndexing(ast.NodeTransformer):
    """``a[i]`` -> ``__legacy_getitem__(a, i)``; ``a[i] = v`` -> ``__legacy_setitem__(a, i, v)``."""

    def visit_Subscript(self, node: ast.Subscript):
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load) or not _plain(node):
            return node
        return ast.copy_location(ast.Call(ast.Name("__legacy_getitem__", ast.Load()), [node.value, node.slice], []),
                                 node)

    def visit_Assign(self, node: ast.Assign):
        self.generic_visit(node)
        t = node.targets[0]
        if len(node.targets) != 1 or not isinstance(t, ast.Subscript) or not _plain(t):
            return node
        call = ast.Call(ast.Name("__legacy_setitem__", ast.Load()), [t.value, t.slice, node.value], [])
        return ast.copy_location(ast.Expr(call), node)


def _load_test_module(path: str):
    """The test file as a module, its reads of numpy arrays indexed as numpy < 1.23 did."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(__legacy_getitem__=legacy_getitem, __legacy_setitem__=legacy_setitem)
    tree = ast.fix_missing_locations(_LegacyIndexing().visit(ast.parse(Path(path).read_text(), path)))
    exec(compile(tree, path, "exec"), module.__dict__)
    if getattr(module.__dict__.get("np"), "__name__", None) == "numpy":
        module.np = _LegacyNumpy(module.np)
    return module


def worker(path: str, names: list[str], max_executors: int, out_fd: int) -> None:
    out = os.fdopen(out_fd, "w", buffering=1)
    sys.path[:0] = [str(SHIM), os.path.dirname(path)]
    import mxnet._harness as h
    try:
        module = _load_test_module(path)
        if hasattr(module, "setup_module"):
            module.setup_module()
    except BaseException as e:  # noqa: BLE001  (any import failure fails every test of the file)
        status, detail = _classify(e, Path(path).name)
        for name in names:
            out.write(json.dumps({"event": "done", "test": name, "status": status,
                                  "detail": f"import: {detail}", "seconds": 0}) + "\n")
        return
    for name in names:
        out.write(json.dumps({"event": "start", "test": name}) + "\n")
        h.reset(max_executors)
        _seed(int(os.environ.get("MXNET_TEST_SEED", "0")))    # tests without @with_seed repeat too
        t = time.time()
        try:
            _run_one(getattr(module, name))
            status, detail = ("budget", f"{h.STATE['executors']} executors") if h.STATE["over"] else ("pass", "")
        except BaseException as e:  # noqa: BLE001
            status, detail = _classify(e, Path(path).name)
        out.write(json.dumps({"event": "done", "test": name, "status": status, "detail": detail,
                              "seconds": round(time.time() - t, 2), "executors": h.STATE["executors"]}) + "\n")


# ---- supervisor -----------------------------------------------------------------------------
def collect(path: Path) -> list[str]:
    """Module-level ``test_*`` functions, as nose collects them."""
    tree = ast.parse(path.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]


def run_file(path: Path, names: list[str], args, log) -> list[dict]:
    results: list[dict] = []
    pending = list(names)
    workdir = tempfile.mkdtemp(prefix="mxconf-")
    while pending:
        r, w = os.pipe()
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SHIM), str(path.parent)] +
                                                           [p for p in [os.environ.get("PYTHONPATH")] if p]),
                   MXNET_TEST_SEED=str(args.seed), MXNET_MODULE_SEED=str(args.seed))
        cmd = [args.python, str(Path(__file__).resolve()), "--worker", str(path), "--max-executors",
               str(args.max_executors), "--fd", str(w), "--tests", ",".join(pending)]
        proc = subprocess.Popen(cmd,
                                pass_fds=(w,), cwd=workdir, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL if not args.verbose else None, start_new_session=True)
        os.close(w)
        current, deadline, buf = None, time.time() + args.timeout, b""
        while True:
            ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.time()))
            if not ready:
                _kill(proc)
                _record(results, pending, current or pending[0], "timeout", f"over {args.timeout} s", log)
                break
            chunk = os.read(r, 65536)
            if not chunk:
                proc.wait()
                if current is not None:
                    _record(results, pending, current, "crash", f"worker exited with {proc.returncode}", log)
                elif pending:   # died before the first test started
                    _record(results, pending, pending[0], "crash", f"worker exited with {proc.returncode}", log)
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg["event"] == "start":
                    current, deadline = msg["test"], time.time() + args.timeout
                else:
                    current = None
                    _record(results, pending, msg["test"], msg["status"], msg["detail"], log, msg)
            if not pending:
                proc.wait()
                break
        os.close(r)
    return results


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _record(results, pending, name, status, detail, log, msg=None) -> None:
    rec = {"test": name, "status": status, "detail": detail, "seconds": (msg or {}).get("seconds"),
           "executors": (msg or {}).get("executors")}
    results.append(rec)
    if name in pending:
        pending.remove(name)
    log(rec)


def report(results: dict[str, list[dict]], before: dict | None) -> str:
    lines = []
    total = Counter(r["status"] for rs in results.values() for r in rs)
    for fname, rs in results.items():
        c = Counter(r["status"] for r in rs)
        lines.append(f"{fname}: {len(rs)} tests, " + ", ".join(f"{c[s]} {s}" for s in STATUSES if c[s]))
    lines.append("total: " + ", ".join(f"{total[s]} {s}" for s in STATUSES if total[s]))
    by_cause = defaultdict(list)
    for fname, rs in results.items():
        for r in rs:
            if r["status"] != "pass":
                key = r["status"] + (f": {r['detail']}" if r["status"] in ("missing operator", "unsupported") else "")
                by_cause[key].append(f"{fname}::{r['test']}" + (f"  ({r['detail']})" if r["status"] not in (
                    "missing operator", "unsupported") and r["detail"] else ""))
    for cause in sorted(by_cause, key=lambda k: (STATUSES.index(k.split(":")[0]), k)):
        lines.append(f"\n[{cause}] {len(by_cause[cause])}")
        lines.extend(f"  {t}" for t in by_cause[cause])
    if before:
        old = {(f, r["test"]): r["status"] for f, rs in before.items() for r in rs}
        changed = [(k, old[k], r["status"]) for f, rs in results.items() for r in rs
                   if (k := (f, r["test"])) in old and old[k] != r["status"]]
        lines.append(f"\nchanged since the baseline: {len(changed)}")
        lines.extend(f"  {f}::{t}: {a} -> {b}" for (f, t), a, b in sorted(changed))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("unittest_dir", nargs="?")
    ap.add_argument("--files", nargs="+", default=list(DEFAULT_FILES))
    ap.add_argument("-k", dest="pattern", help="run tests whose name contains this (comma-separated: any of these)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per test")
    ap.add_argument("--max-compiles", "--max-executors", dest="max_executors", type=int, default=40,
                    help="compiles per test")
    ap.add_argument("--seed", type=int, default=42,
                    help="MXNET_TEST_SEED / MXNET_MODULE_SEED, so random shapes repeat between runs")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--json", help="write every result here")
    ap.add_argument("--compare", help="a --json file of an earlier run: list what changed")
    ap.add_argument("-v", "--verbose", action="store_true", help="show the tests' stderr")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--tests", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.tests.split(","), args.max_executors, args.fd)
        return 0
    if not args.unittest_dir:
        ap.error("give the path of MXNet 1.9.1's tests/python/unittest")
    root = Path(args.unittest_dir)
    results: dict[str, list[dict]] = {}
    for fname in args.files:
        path = root / fname
        names = [n for n in collect(path) if not args.pattern or any(p in n for p in args.pattern.split(","))]
        print(f"== {fname}: {len(names)} tests", flush=True)
        results[fname] = run_file(path, names, args, lambda r: print(
            f"  {r['status']:<16} {r['test']}" + (f"  {r['detail']}" if r["detail"] else ""), flush=True))
    before = json.loads(Path(args.compare).read_text()) if args.compare else None
    print("\n" + report(results, before))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
