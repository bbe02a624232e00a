#!/usr/bin/env bash
# Builds .devcheck/ (ignored by git): these scripts, two artifacts (an MLP and a conv-BN net, each
# for cuda and llvm-cpu, with training entry points), their CPU reference results and the wheels
# the GPU machine lacks. Run here, with the compiler venv (.venv); then on the GPU machine, with
# .devcheck carried: bash .devcheck/run.sh   (tools/gpu_check/README.md)
set -e
cd "$(dirname "$0")/../.."
mkdir -p .devcheck
cp tools/gpu_check/check.py tools/gpu_check/common.py tools/gpu_check/make_inputs.py tools/gpu_check/make_ref.py \
   tools/gpu_check/run.sh .devcheck/
.venv/bin/python .devcheck/make_inputs.py          # .devcheck/src/convbn-{symbol.json,params.npz}
.venv/bin/aotexec compile examples/mlp-symbol.json --shape data=8,784 --params examples/mlp-params.npz \
  --target cuda --target llvm-cpu --cuda-arch sm_80 --cpu x86-64-v3 --grad-req write --out .devcheck/artifacts/mlp
.venv/bin/aotexec compile .devcheck/src/convbn-symbol.json \
  --shape data=8,3,16,16 --params .devcheck/src/convbn-params.npz --target cuda --target llvm-cpu \
  --cuda-arch sm_80 --cpu x86-64-v3 --grad-req write --out .devcheck/artifacts/convbn
.venv/bin/python .devcheck/make_ref.py             # ref_<net>.npz from the llvm-cpu modules
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .devcheck/whl iree-base-runtime==3.13.0 ml_dtypes==0.6.0
