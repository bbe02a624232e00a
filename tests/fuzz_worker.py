"""Child process of tests/test_fuzz_artifact.py: loads each mutated artifact under CASES (folders
case-<i>, from index START on) and reports one line per case on stdout, flushed before the
next starts, so a case that kills the process (a crash in IREE's C code) is known by its
``start`` line.  ``run``: also bind the loaded ones and compare forward with CASES/ref.npy.

    python tests/fuzz_worker.py CASES START [run]
"""
from __future__ import annotations

import faulthandler
import sys
import warnings
from pathlib import Path

import numpy as np


def main() -> None:
    faulthandler.enable()
    warnings.simplefilter("ignore")
    import aotexec as ax
    cases, start, run = Path(sys.argv[1]), int(sys.argv[2]), "run" in sys.argv[3:]
    x = np.load(cases / "input.npy")
    ref = np.load(cases / "ref.npy")
    for d in sorted(cases.glob("case-*")):
        i = int(d.name.split("-")[1])
        if i < start:
            continue
        print(f"start {i}", flush=True)
        try:
            art = ax.load(d)
            outcome = "loaded"
            if run:
                out = art.simple_bind(ax.cpu(), grad_req="null").forward(data=x)[0].asnumpy()
                outcome = "ok" if np.allclose(out, ref, rtol=1e-5, atol=1e-6) else "wrong"
        except ax.AotexecError as e:
            outcome = "refused " + str(e).splitlines()[0][:200]
        except Exception as e:   # noqa: BLE001 (what the fuzz suite looks for)
            outcome = f"raised {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        print(f"{outcome.split()[0]} {i} {outcome}", flush=True)


if __name__ == "__main__":
    main()
