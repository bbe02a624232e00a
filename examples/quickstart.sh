#!/usr/bin/env bash
# The README's main job: set up, compile the bundled MLP to artifacts/mlp, load it back and run it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[compiler]'
.venv/bin/aotexec compile examples/mlp-symbol.json --shape data=8,784 --params examples/mlp-params.npz --out artifacts/mlp
.venv/bin/aotexec inspect artifacts/mlp
.venv/bin/aotexec run artifacts/mlp --input data=examples/mlp-input.npy --out artifacts/mlp/outputs
