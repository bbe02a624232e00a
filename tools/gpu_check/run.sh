#!/usr/bin/env bash
# Device command (run from the repo root): bash .devcheck/run.sh
# Installs the carried wheels (iree-base-runtime 3.13.0 + ml_dtypes 0.6.0, cp312 manylinux x86_64) into
# /tmp/site, puts aotexec (the repo's plain package folder) on PYTHONPATH, runs the check (<= 300 s).
set -u
: "${OUT:=/tmp/devcheck-out}"
mkdir -p "$OUT"
if ! python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .devcheck/whl/*.whl; then
  echo "pip install failed; unpacking the wheels with zipfile instead"
  python3 -c "import glob, zipfile; [zipfile.ZipFile(w).extractall('/tmp/site') for w in glob.glob('.devcheck/whl/*.whl')]" || exit 3
fi
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi -L
PYTHONUNBUFFERED=1 timeout -k 10 300 python3 .devcheck/check.py 2>&1 | tee "$OUT/log.txt"
rc=${PIPESTATUS[0]}
if [ -f .devcheck/zoo_check.py ]; then    # build_zoo.sh's nets against MXNet's references
  PYTHONUNBUFFERED=1 timeout -k 10 300 python3 .devcheck/zoo_check.py 2>&1 | tee "$OUT/zoo_log.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
exit "$rc"
