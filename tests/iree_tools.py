"""IREE's own command-line tools for the tests: the binaries iree-base-runtime ships (not its
Python console-script wrappers), and the printed ``aotexec export-run-cmd`` snippets run by bash
exactly as a user would, with no Python involved in the run."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np

from cli_runner import invoke


def tool(name: str) -> Path:
    import iree._runtime_libs as libs
    return Path(libs.__file__).parent / name


def export(args: list) -> str:
    res = invoke(["export-run-cmd", *args])
    assert res.exit_code == 0, res.output
    return res.stdout


def run_snippet(snippet: str, cwd: Path, timeout: float = 300) -> str:
    """Run an export-run-cmd snippet with bash in ``cwd``; its output (iree-run-module prints EXEC @fn)."""
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", snippet], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{snippet}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


def outputs(folder: Path) -> dict[str, np.ndarray]:
    return {p.stem: np.load(p) for p in sorted(folder.glob("*.npy"))}
