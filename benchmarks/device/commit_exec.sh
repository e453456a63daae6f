#!/usr/bin/env bash
# Issue 35: run materialised kernel_commits rows through their harness specs on the GPU.
# Here:   .venv/bin/python -m dagster_project.commit_exec.materialise_cli HOME .commit_exec_work
# Device: bash benchmarks/device/commit_exec.sh [SECONDS] [ROW_IDS,...]   (carry .commit_exec_work)
# Writes $OUT/results.jsonl (one JSON line per row, toolchain-stamped) and $OUT/nvidia-smi.txt;
# ingest here with: .venv/bin/python -m dagster_project.commit_exec.ingest_cli OUT/results.jsonl
set -uo pipefail
LIMIT=${1:-240}
ROWS=${2:-}
OUT=${OUT:-/tmp/commit_exec_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt" 2>&1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
timeout "$LIMIT" python3 -m dagster_project.commit_exec.device.runner .commit_exec_work "$OUT/results.jsonl" "$ROWS"
echo "runner exit $?"
