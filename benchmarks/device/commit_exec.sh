#!/usr/bin/env bash
# Issue 35: run materialised kernel_commits rows through their harness specs on the GPU.
# Here:   .venv/bin/python -m dagster_project.commit_exec.materialise HOME .commit_exec_work
# Device: bash benchmarks/device/commit_exec.sh [SECONDS] [ROW_IDS,...] [REWARD_SECONDS]
#         (run with carry=[".commit_exec_work"]; upstream files never enter a commit)
# Writes $OUT/results.jsonl (one JSON line per row, toolchain-stamped), $OUT/nvidia-smi.txt
# and, when REWARD_SECONDS > 0, $OUT/reward_check.jsonl from tests/gpu/test_commit_exec_gpu.py
# (rows in $COMMIT_EXEC_REWARD_ROWS). Ingest here with:
#   .venv/bin/python -m dagster_project.commit_exec.ingest BATCH OUT/results.jsonl
# The warm-up's 8 shards share the card: each caps its allocator at 0.9/8 of it (runner.py,
# warm_memory_fraction), so a row too big for that fails alone there (harness_error under
# --shared-check) and gets its verdict from the timing process, which has the whole card.
# CPU check of rows here, no GPU (rows using triton.autotune or torch.cuda.device too):
#   TRITON_INTERPRET=1 COMMIT_EXEC_CPU_PATCH=1 COMMIT_EXEC_SMOKE=1 /tmp/venv-exec/bin/python \
#     -m dagster_project.commit_exec.device.runner .commit_exec_work OUT.jsonl ID[,ID...]
# (COMMIT_EXEC_CPU_PATCH refuses to start where CUDA is present or the interpreter is off.)
set -uo pipefail
LIMIT=${1:-240}
ROWS=${2:-}
REWARD=${3:-0}
OUT=${OUT:-/tmp/commit_exec_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$(pwd)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
# compile first, side by side: SHARDS checking processes fill Triton's disk cache (no timing)
WARM=${WARM:-90}
SHARDS=${SHARDS:-8}
if [ "$WARM" -gt 0 ]; then
  for i in $(seq 0 $((SHARDS - 1))); do
    COMMIT_EXEC_WARM=1 COMMIT_EXEC_SHARD=$i/$SHARDS timeout "$WARM" python3 -m dagster_project.commit_exec.device.runner \
      .commit_exec_work "$OUT/warm-$i.jsonl" "$ROWS" > /dev/null 2>&1 &
  done
  wait
  cat "$OUT"/warm-*.jsonl > "$OUT/warm.jsonl" 2>/dev/null; rm -f "$OUT"/warm-*.jsonl
  echo "warm-up done: $(wc -l < "$OUT/warm.jsonl") rows checked"
fi
# then one process times everything (compile-cache hits), interleaved A/B
# (TIME_ROWS: the timing process's ids in priority order; default the same rows as the warm-up)
timeout "$LIMIT" python3 -m dagster_project.commit_exec.device.runner .commit_exec_work "$OUT/results.jsonl" "${TIME_ROWS:-$ROWS}"
echo "runner exit $?"
if [ "$REWARD" -gt 0 ]; then
  if python3 -c "import pytest" 2>/dev/null; then
    # -p no:xdist: one row at a time on the card (a root pyproject's "-n 2" would time two
    # rows side by side; stop 39's s07 reward test ran that way)
    OUT=$OUT timeout "$REWARD" python3 -m pytest -q -p no:cacheprovider -p no:xdist -o addopts= \
      tests/gpu/test_commit_exec_gpu.py 2>&1 | tail -15
  else
    echo "no pytest on this machine: reward check skipped"
  fi
fi
