#!/usr/bin/env bash
# Rows per GPU-minute of the config harness, before (harness 1.0.0, HEAD's copy under
# .gpu/before/) and after (this checkout), on the same rows in one device call, each
# with an empty Triton cache; then the rest of the time on a large batch (resumable).
#
#   bash benchmarks/device/gpu_throughput.sh SMALL.jsonl BIG.jsonl.xz TOTAL_S [WORKERS]
#
# SMALL.jsonl is read by both harnesses (1.0.0 reads plain JSONL only); results go to
# $OUT/out-small-v100.jsonl, $OUT/out-small.jsonl and $OUT/out-big.jsonl, wall times to
# $OUT/throughput.txt. Needs python3 with torch, triton and numpy only.
set -uo pipefail
SMALL=${1:?usage: gpu_throughput.sh SMALL.jsonl BIG.jsonl.xz TOTAL_S [WORKERS]}
BIG=${2:?}
TOTAL=${3:?}
WORKERS=${4:-$(( $(nproc) - 1 ))}
OUT=${OUT:?set OUT}
export PYTHONUNBUFFERED=1
start=$(date +%s)
root=$(pwd)
log() { echo "$*" | tee -a "$OUT/throughput.txt"; }
log "host: $(nproc) cores; $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"

if [ "${SKIP_BEFORE:-0}" != 1 ]; then
  t0=$(date +%s.%N)
  if [ "${SKIP_V100:-0}" != 1 ]; then
  (cd .gpu/before && TRITON_CACHE_DIR=/tmp/tc-before KERNELHOUSE_GPU_CACHE=/tmp/khg-before \
    python3 -m dagster_project.rewards.gpu.run_batch "$root/$SMALL" "$OUT/out-small-v100.jsonl" \
      --budget-s 240 --workers "$WORKERS") > "$OUT/before.log" 2>&1
  t1=$(date +%s.%N)
  log "before (harness 1.0.0): $(tail -1 "$OUT/before.log")"
  log "before wall_s: $(python3 -c "print(round($t1 - $t0, 1))")"
  fi

  t0=$(date +%s.%N)
  TRITON_CACHE_DIR=/tmp/tc-after KERNELHOUSE_GPU_CACHE=/tmp/khg-after \
    python3 -m dagster_project.rewards.gpu.run_batch "$SMALL" "$OUT/out-small.jsonl" \
      --budget-s 240 --workers "$WORKERS" > "$OUT/after.log" 2>&1
  t1=$(date +%s.%N)
  log "after (this checkout): $(tail -1 "$OUT/after.log")"
  log "after wall_s: $(python3 -c "print(round($t1 - $t0, 1))")"
fi

left=$(( TOTAL - ($(date +%s) - start) - 10 ))
t0=$(date +%s.%N)
TRITON_CACHE_DIR=/tmp/tc-after KERNELHOUSE_GPU_CACHE=/tmp/khg-after \
  bash benchmarks/device/gpu_measure_configs.sh "$BIG" "$OUT/out-big.jsonl" "$left" "$WORKERS" \
  > "$OUT/big.log" 2>&1
t1=$(date +%s.%N)
log "big: $(tail -1 "$OUT/big.log")"
log "big wall_s: $(python3 -c "print(round($t1 - $t0, 1))"); result lines: $(wc -l < "$OUT/out-big.jsonl")"
rm -f "$OUT"/*.attempts
gzip -9 "$OUT"/out-*.jsonl "$OUT"/big.log
zcat "$OUT/big.log.gz" | tail -12
cat "$OUT/throughput.txt"
