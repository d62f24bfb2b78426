#!/usr/bin/env bash
# The prepared GPU check (bench/device_check.py): CUDA against CPU for simulation, training and extraction.
#   bash bench/device_check.sh                        # on the GPU machine; carry .whl (jsonschema and its needs)
#   DEVICE_CHECK_QUICK=1 bash bench/device_check.sh   # tiny sizes; CUDA sides skipped where there is no GPU
# Results: $OUT (default ./device_out): summary.json, summary.md, device_check.log, env.txt.
# DEVICE_CHECK_BUDGET_S: the Python side's time budget (default 300 s, quick 100 s); DEVICE_CHECK_TIMEOUT: a hard
# stop for the whole Python run (default budget + 45 s) in case one step hangs.
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
OUT=${OUT:-./device_out}
mkdir -p "$OUT"
export OUT

# The GPU machine lacks jsonschema (causalpos.workflow.config imports it); the carried wheels bring it.
SITE=${DEVICE_CHECK_SITE:-/tmp/site}
extra=""
if ! python3 -c "import jsonschema" 2>/dev/null; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
      && extra=$SITE || echo "device_check.sh: installing .whl/*.whl failed; training and extraction will fail"
  else
    echo "device_check.sh: no jsonschema and no .whl folder; training and extraction will fail"
  fi
fi
export PYTHONPATH="src${extra:+:$extra}${PYTHONPATH:+:$PYTHONPATH}"

{
  date; uname -a; nproc; free -g 2>/dev/null
  nvidia-smi 2>&1 || echo "no nvidia-smi"
  python3 -c "import torch, numba, transformers, sys; print(sys.version); print('torch', torch.__version__, \
'cuda', torch.version.cuda, torch.cuda.is_available(), 'numba', numba.__version__, 'transformers', transformers.__version__)"
} >"$OUT/env.txt" 2>&1
tail -n 2 "$OUT/env.txt"

quick=0
[ "${DEVICE_CHECK_QUICK:-0}" != "0" ] && [ -n "${DEVICE_CHECK_QUICK:-}" ] && quick=1
budget=${DEVICE_CHECK_BUDGET_S:-$([ $quick = 1 ] && echo 100 || echo 300)}
export DEVICE_CHECK_BUDGET_S=$budget
set -o pipefail
timeout -k 10 "${DEVICE_CHECK_TIMEOUT:-$((budget + 45))}" python3 bench/device_check.py "$@" 2>&1 \
  | tee "$OUT/device_check.log"
rc=$?
echo "device_check.sh: exit $rc; files in $OUT: $(ls "$OUT" | tr '\n' ' ')"
exit $rc
