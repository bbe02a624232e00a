#!/usr/bin/env bash
# Adds to .devcheck/ (after build.sh) CUDA training artifacts of the CI-sized model-zoo nets of
# tests/data/zoo (MXNet-computed float64 references travel with the working tree); the device
# compares against those references: bash .devcheck/run.sh runs zoo_check.py after check.py.
set -e
cd "$(dirname "$0")/../.."
cp tools/gpu_check/zoo_check.py .devcheck/
for net in ${ZOO_NETS:-mobilenetv2_1.0 mobilenet1.0 resnet18_v1 resnet18_v2 densenet121 squeezenet1.1}; do
  src=tests/data/zoo/$net
  sym=$src/symbol.json; [ -f $src/symbol_train.json ] && sym=$src/symbol_train.json
  shape=$(python3 -c "import json; print(','.join(map(str, json.load(open('$src/meta.json'))['inputs']['data'])))")
  .venv/bin/aotexec compile $sym --shape data=$shape --params $src/params.npz --target cuda --cuda-arch sm_80 \
    --grad-req write --out .devcheck/artifacts/zoo_$net
done
