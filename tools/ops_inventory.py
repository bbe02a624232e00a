"""Write the "MXNet 1.9.1 operator inventory" section of docs/OPS.md: every operator MXNet 1.9.1
registers and every other public ``mx.sym`` function (tests/data/semantics/mxnet_ops.txt, from
tools/make_semantics_reference.py), with aotexec's status for each.

    python tools/ops_inventory.py            # rewrites the section in place

tests/test_mxnet_semantics.py checks the section against the list and aotexec.sym.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aotexec.symbol as S  # noqa: E402

HEADING = "## MXNet 1.9.1 operator inventory"
# being added on other branches (issue #18)
IN_PROGRESS = {"LayerNorm", "InstanceNorm", "GroupNorm", "L2Normalization", "Pad", "pad", "Crop", "slice_like",
               "topk", "sort", "argsort", "gather_nd", "scatter_nd", "arange", "_arange", "_full", "full",
               "shape_array", "size_array", "depth_to_space", "space_to_depth", "softmax_cross_entropy",
               "smooth_l1", "BilinearSampler", "GridGenerator", "RNN", "_rnn_param_concat", "SequenceMask",
               "SequenceLast", "SequenceReverse"}
GROUPS = (("contrib (`mx.sym.contrib`)", ("_contrib_",)),
          ("linear algebra (`mx.sym.linalg`)", ("_linalg_", "linalg_")),
          ("random draws (`mx.sym.random`, `sample_*`, `random_*`)", ("_random_", "_sample_", "random_", "sample_")),
          ("sparse storage (`mx.sym.sparse`)", ("_sparse_",)),
          ("image (`mx.sym.image`)", ("_image_", "_cvimread", "_cvimdecode", "_cvimresize", "_cvcopyMakeBorder")),
          ("internal (`mx.sym._internal`)", ("_",)),
          ("operators (`mx.sym`)", ("",)))


# where a supported op still behaves unlike MXNet 1.9.1, and why
DIFFERENCES = [
    "Known differences from MXNet 1.9.1 among the supported names (tests/test_mxnet_semantics.py checks "
    "the rest against MXNet's own answers; `tools/mxnet_conformance.py` runs MXNet's unit tests):", "",
    "- float64 `gamma` / `gammaln` (and their gradients' digamma) compute in float32 on llvm-cpu (IREE 3.13 links "
    "no float64 lgamma); float64 `sin`, `cos`, `tan`, `arcsin`, `arccos`, `arctan`, `cbrt`, `rcbrt`, `tanh`, `mod` are "
    "aotexec's own (fdlibm's kernels, Newton steps: `ops/libm.py`), within an ulp or two.",
    "- `take(mode='raise')` and `gather_nd` (IndexError) check indices bound directly as an argument "
    "(through pass-through ops such as "
    "`BlockGrad`); indices computed in the graph are clipped. As in MXNet, the error comes out when the output "
    "is read.",
    "- `backward()` (is_train=True) after `forward(is_train=False)` recomputes the activations in training mode "
    "(BatchNorm's batch statistics; Dropout's mask drawn from the last forward's random state) where MXNet reuses "
    "whatever its buffers hold; `backward(is_train=False)` is the inference graph's gradient, as in MXNet.",
    "- Monitor callbacks do not see `_head_grad_<i>_id_rhs` (the head gradient's shape-only input), and a "
    "zero gradient node is `<variable>_zeros_like<i>` where MXNet names it after the forward node.",
    "",
]


def status(name: str) -> str:
    if hasattr(S, name):
        return "supported"
    return "in progress (#18)" if name in IN_PROGRESS else "not yet"


def section(rows: list[tuple[str, str]]) -> str:
    groups: dict[str, list[str]] = {title: [] for title, _ in GROUPS}
    groups["Python functions of `mx.sym` (not registered operators)"] = []
    for name, kind in rows:
        if name.startswith(("_backward", "_np", "_npi", "_npx")):
            continue
        title = "Python functions of `mx.sym` (not registered operators)" if kind == "function" else \
            "MXNet " + next(t for t, prefixes in GROUPS if name.startswith(prefixes))
        groups.setdefault(title, []).append(name)
    counts = [status(n) for names in groups.values() for n in names]
    out = [HEADING, "",
           "Every operator MXNet 1.9.1 registers (its `_backward_*` ops and the numpy interface's `_np*` ops "
           "aside) and every other public `mx.sym` function, from `tests/data/semantics/mxnet_ops.txt` "
           "(written in an MXNet 1.9.1 venv by `tools/make_semantics_reference.py`); this section is written "
           "by `tools/ops_inventory.py`. For a name marked *not yet*, `ax.sym.<name>` raises "
           "`AttributeError: module 'aotexec.symbol' has no attribute '<name>'`, and a symbol JSON using the "
           "operator fails to load with `Operator '<name>' (node '...') is not registered in aotexec`.", "",
           f"{counts.count('supported')} supported, {counts.count('in progress (#18)')} in progress (#18), "
           f"{counts.count('not yet')} not yet.", ""] + DIFFERENCES
    for title, names in groups.items():
        if not names:
            continue
        out += [f"### {title}", "", "| name | status |", "| --- | --- |"]
        out += [f"| `{n}` | {status(n)} |" for n in sorted(names, key=str.lower)]
        out.append("")
    return "\n".join(out)


def main() -> int:
    lines = (ROOT / "tests/data/semantics/mxnet_ops.txt").read_text().splitlines()
    rows = [tuple(line.split("\t")) for line in lines if line and not line.startswith("#")]
    doc_path = ROOT / "docs/OPS.md"
    doc = doc_path.read_text()
    start = doc.find(HEADING)
    if start < 0:
        doc = doc.rstrip("\n") + "\n\n" + section(rows)
    else:
        end = doc.find("\n## ", start + len(HEADING))
        doc = doc[:start] + section(rows) + (doc[end:] if end >= 0 else "")
    doc_path.write_text(doc.rstrip("\n") + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
