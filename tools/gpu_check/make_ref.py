"""Reference results from each artifact's llvm-cpu module -> .devcheck/ref_<net>.npz (run here)."""
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import aotexec as ax  # noqa: E402
from common import NETS, make_inputs, run_steps  # noqa: E402

for net in (sys.argv[1:] or NETS):
    art = ax.load(HERE / "artifacts" / net)
    inputs = make_inputs(net, art)
    res = run_steps(art, ax.cpu(), inputs)
    arrays = {f"input.{k}": v for k, v in inputs.items()}
    arrays.update({f"expected.{k}": v for k, v in res.items()})
    np.savez(HERE / f"ref_{net}.npz", **arrays)
    bad = [k for k, v in res.items() if not np.all(np.isfinite(v))]
    print(f"{net}: {len(res)} expected arrays, non-finite: {bad or 'none'}")
    # train and fused (train_step) must agree on the CPU already
    worst = max((float(np.max(np.abs(res[k] - res['fused.' + k[6:]])) / max(1e-30, float(np.max(np.abs(res[k])))))
                 for k in res if k.startswith("train.")), default=0.0)
    print(f"{net}: cpu train vs fused max rel err {worst:.2e}")
