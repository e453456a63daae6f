#!/usr/bin/env bash
# One device call of stop 39 (s07), for whichever Hopper card the call gets: the sim oracle on
# that card's prepared questions, then issue 38's second-session re-measure of 30 random rows
# of that card's shipped latency tables, then the commit rows not yet executed (warm-up check
# and a short timing process; the GPU reward test runs only on the H100, where the rows'
# labels were measured: see round_exec6.sh).
# Here first:
#   KC=/tmp/kh-exec/kc.parquet bash benchmarks/device/prepare_round.sh
#   (cd .devrun/clean && ../../.venv/bin/python benchmarks/device/sim_oracle.py prepare \
#      --gpu h200 --out ../../.oracle/h200 --limit 500 --order tier)     # and/or --gpu h100
#   .venv/bin/python benchmarks/device/gpu_exhaustive_plan.py remeasure --gpu h200 --rows 30 \
#      --seed 20261207
#   id lists .devrun/exec6_warm.txt, .devrun/exec7_time.txt (comma-separated)
# Device, with carry [".commit_exec_work", ".devrun", ".oracle/<gpu>", ".gpu"]:
#   ORACLE_S=240 GM_S=90 WARM=50 CE_TIME_S=80 bash benchmarks/device/round_s07.sh
# Writes $OUT/oracle.tgz, $OUT/gm.tgz, $OUT/ce.tgz. A stage given 0 seconds is skipped.
set -u
T0=$(date +%s); R=$(pwd)
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100)
echo "card $G"
if [ "${ORACLE_S:-240}" -gt 0 ] && [ -d "$R/.oracle/$G" ]; then
  (cd .devrun/clean && PYTHONUNBUFFERED=1 timeout $(( ${ORACLE_S:-240} + 30 )) python3 \
    benchmarks/device/sim_oracle.py run --src "$R/.oracle/$G" --out /tmp/oracle_out \
    --budget "${ORACLE_S:-240}" --verify-share 0.4 --workers 4 --compile-jobs 14 \
    > /tmp/oracle.log 2>&1)
  tail -3 /tmp/oracle.log; cp /tmp/oracle.log /tmp/oracle_out/run.log
  tar czf "$OUT/oracle.tgz" -C /tmp/oracle_out .
  echo "oracle done at $(( $(date +%s) - T0 )) s"
fi
PLAN=$(ls .gpu/remeasure-"$G"-s*.jsonl.xz 2>/dev/null | head -1)
if [ "${GM_S:-90}" -gt 0 ] && [ -n "$PLAN" ]; then
  mkdir -p /tmp/gm
  OUT=/tmp/gm timeout $(( ${GM_S:-90} + 30 )) bash benchmarks/device/gpu_exhaustive.sh \
    "${GM_S:-90}" "$PLAN" | tail -3
  tar czf "$OUT/gm.tgz" -C /tmp/gm .
  echo "re-measure done at $(( $(date +%s) - T0 )) s"
fi
if [ "${CE_TIME_S:-80}" -gt 0 ]; then
  mkdir -p /tmp/ce
  (cd .devrun/clean && ln -sfn "$R/.commit_exec_work" .commit_exec_work &&
    SHARDS=8 WARM=${WARM:-50} TIME_ROWS=$(cat "$R/.devrun/exec7_time.txt") OUT=/tmp/ce \
    timeout $(( ${WARM:-50} + ${CE_TIME_S:-80} + 30 )) bash benchmarks/device/commit_exec.sh \
    "${CE_TIME_S:-80}" "$(cat "$R/.devrun/exec6_warm.txt")" 0 > /tmp/ce/log.txt 2>&1)
  grep -v "^\s*$" /tmp/ce/log.txt | tail -4
  echo "warm $(wc -l < /tmp/ce/warm.jsonl 2>/dev/null) timed $(wc -l < /tmp/ce/results.jsonl 2>/dev/null)"
  tar czf "$OUT/ce.tgz" -C /tmp/ce .
fi
echo "end $(( $(date +%s) - T0 )) s"
