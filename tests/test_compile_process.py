"""A compiling ``iree-compile`` child dies with the process that started it: a killed test,
worker or notebook kernel leaves no orphan compiler behind (Linux)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

COMPILE_FOREVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import aotexec as ax, nets
    sym = nets.symbol(ax.sym, "resnet8")
    ex = sym.simple_bind(ax.cpu(), grad_req="write", data=(16, 3, 32, 32))
    ex.forward(is_train=True)       # compiles forward_train + backward in iree-compile
""")


def _compilers() -> dict[int, int]:
    """pid -> parent pid of every running iree-compile."""
    out = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            exe = os.path.basename(os.readlink(d / "exe"))
        except OSError:
            continue
        if exe.startswith("iree-compile"):
            out[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
def test_killed_parent_leaves_no_compiler_running(tmp_path):
    env = {**os.environ, "AOTEXEC_COMPILE_MODE": "subprocess", "AOTEXEC_CACHE": "0",
           "AOTEXEC_CACHE_DIR": str(tmp_path)}
    parent = subprocess.Popen([sys.executable, "-c", COMPILE_FOREVER, str(ROOT / "benchmarks")], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        child = None
        deadline = time.monotonic() + 120
        while child is None and time.monotonic() < deadline and parent.poll() is None:
            child = next((pid for pid, ppid in _compilers().items() if ppid == parent.pid), None)
            time.sleep(0.05)
        assert child is not None, "the parent never started iree-compile"
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 10
    while child in _compilers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child not in _compilers(), f"iree-compile {child} outlived its killed parent"
