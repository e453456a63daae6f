#!/usr/bin/env bash
# Measure one batch of tuned configs on a CUDA GPU (the lent H200 machine), resumably.
#
#   bash benchmarks/device/gpu_measure_configs.sh IN.jsonl OUT.jsonl [BUDGET_S] [WORKERS]
#
# IN.jsonl comes from `kernelhouse gpu plan` (it holds the rows' kernel sources, so it
# lives in the git-ignored .gpu/ folder and travels with `carry: [".gpu"]`); OUT.jsonl
# gets one line per (row, candidate) as soon as it is measured, and goes back into the
# lake with `kernelhouse gpu ingest OUT.jsonl`. Needs only python3 with torch, triton and
# numpy. A run that loses its CUDA context (exit 75) or crashes is restarted and resumes
# from OUT.jsonl; the whole script stays within BUDGET_S seconds (default 240).
set -uo pipefail
IN=${1:?usage: gpu_measure_configs.sh IN.jsonl OUT.jsonl [BUDGET_S] [WORKERS]}
OUT=${2:?usage: gpu_measure_configs.sh IN.jsonl OUT.jsonl [BUDGET_S] [WORKERS]}
BUDGET=${3:-240}
WORKERS=${4:-$(( $(nproc) - 1 ))}
export PYTHONUNBUFFERED=1
export KERNELHOUSE_GPU_CACHE=${KERNELHOUSE_GPU_CACHE:-/tmp/kernelhouse-gpu}
start=$(date +%s)
rc=0
for attempt in 1 2 3 4 5; do
  left=$(( BUDGET - ($(date +%s) - start) ))
  if [ "$left" -le 15 ]; then break; fi
  python3 -m dagster_project.rewards.gpu.run_batch "$IN" "$OUT" --budget-s "$left" \
    --workers "$WORKERS"
  rc=$?
  case $rc in
    0|2) break ;;                        # done, or a usage error
    *) echo "run_batch exited $rc (attempt $attempt): restarting to resume" >&2
       ;;                                # compiled kernels are in Triton's disk cache
  esac
done
exit $rc
