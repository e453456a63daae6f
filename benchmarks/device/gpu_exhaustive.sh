#!/usr/bin/env bash
# Time issue 38's exhaustive or skewed-routing plans on the GPU, resumably, in one budget.
#
#   bash benchmarks/device/gpu_exhaustive.sh BUDGET_S PLAN [PLAN ...]
#
# PLANs come from benchmarks/device/gpu_exhaustive_plan.py (in the git-ignored .gpu/,
# carried with carry: [".gpu"]); they run in the order given until BUDGET_S seconds are
# spent, each through gpu_measure_configs.sh (restarts after a lost CUDA context).
# Results go to $OUT/<plan>.out.jsonl. A plan an earlier call did not finish resumes:
# copy that call's $OUT/<plan>.out.jsonl(.attempts) to .gpu/results/ before the next
# call, and run_batch skips every (row, candidate) already there. A plan named for one
# GPU (-h100- / -h200- in its name, as the plan writer names them) runs only on that GPU:
# pass both GPUs' plans and the card the call gets picks its own. Afterwards:
#   kernelhouse gpu pack $OUT/<plan>.out.jsonl -o dagster_project/data/measured/<gpu>/batch-NNN.parquet
# Once a cut call's results are packed and shipped, resume from the package instead:
# `python benchmarks/device/gpu_exhaustive_plan.py pending PLAN --gpu G` writes the rows not
# yet shipped in full as <plan>-pending.jsonl.xz (no raw results file needs keeping).
set -uo pipefail
BUDGET=${1:?usage: gpu_exhaustive.sh BUDGET_S PLAN [PLAN ...]}
shift
OUT=${OUT:?set OUT}
WORKERS=${WORKERS:-$(( $(nproc) - 1 ))}
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/device.txt" 2>&1
card=$(grep -o -m1 -E 'H100|H200' "$OUT/device.txt" | tr 'A-Z' 'a-z')
for plan in "$@"; do
  name=$(basename "$plan")
  for other in h100 h200; do
    if [ -n "$card" ] && [ "$other" != "$card" ] && [[ "$name" == *"-$other-"* ]]; then
      echo "$name: skipped (planned for the $other, this is an ${card})"
      continue 2
    fi
  done
  name=${name%.xz}
  name=${name%.jsonl}
  out="$OUT/$name.out.jsonl"
  for f in "$name.out.jsonl" "$name.out.jsonl.attempts"; do
    if [ -f ".gpu/results/$f" ] && [ ! -f "$OUT/$f" ]; then cp ".gpu/results/$f" "$OUT/$f"; fi
  done
  left=$(( BUDGET - ($(date +%s) - start) ))
  if [ "$left" -le 30 ]; then echo "budget spent before $name"; break; fi
  t0=$(date +%s)
  bash benchmarks/device/gpu_measure_configs.sh "$plan" "$out" "$left" "$WORKERS" \
    > "$OUT/$name.log" 2>&1
  lines=$( [ -f "$out" ] && wc -l < "$out" || echo 0 )
  echo "$name: $(( $(date +%s) - t0 )) s, $lines result lines; $(tail -1 "$OUT/$name.log")"
done | tee -a "$OUT/exhaustive.txt"
