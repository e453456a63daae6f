#!/usr/bin/env bash
# One device call for issue 35 (and 37's GPU groups) under harness 6, as stop 38's s06 ran it.
# Here first: `KC=/tmp/kh-exec/kc.parquet bash benchmarks/device/prepare_round.sh` (snapshot in
# .devrun/clean, rows in .commit_exec_work), then the id lists, comma-separated, one line each:
#   .devrun/exec6_warm.txt    rows to check in the 8-shard warm-up (new rows first)
#   .devrun/exec6_time.txt    the timing process's rows in priority order (new rows, then rows
#                             to re-measure, then never-timed rows); an _h200 variant is used on
#                             an H200 when present
#   .devrun/exec6_reward.txt  rows for the GPU reward test (significant rows)
# Device, with carry [".commit_exec_work", ".devrun"]:
#   WARM=60 CE_S=380 CE_TIME_S=120 REWARD_S=190 COST_S=25 EXG_S=60 bash benchmarks/device/round_exec6.sh
# (EXG_S=0 skips the exploit groups.) Writes $OUT/ce.tgz (results.jsonl, warm.jsonl,
# reward_check.jsonl, log) and $OUT/exploits.tgz. Ingest here:
#   python -m dagster_project.commit_exec.ingest s0N-<gpu> results.jsonl
#   python -m dagster_project.commit_exec.ingest s0N-<gpu>-check warm.jsonl --shared-check
#   python -m dagster_project.rewards.exploits.table DIR --csv ... --md ...
set -u
T0=$(date +%s); R=$(pwd)
mkdir -p /tmp/ce /tmp/ex
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo _h200 || echo "")
TIME_LIST="$R/.devrun/exec6_time$G.txt"; [ -f "$TIME_LIST" ] || TIME_LIST="$R/.devrun/exec6_time.txt"
cd .devrun/clean && ln -sfn "$R/.commit_exec_work" .commit_exec_work
SHARDS=8 WARM=${WARM:-60} TIME_ROWS=$(cat "$TIME_LIST") \
  COMMIT_EXEC_REWARD_ROWS=$(cat "$R/.devrun/exec6_reward.txt") OUT=/tmp/ce \
  timeout "${CE_S:-380}" bash benchmarks/device/commit_exec.sh "${CE_TIME_S:-120}" \
  "$(cat "$R/.devrun/exec6_warm.txt")" "${REWARD_S:-190}" > /tmp/ce/log.txt 2>&1
grep -v "^\s*$" /tmp/ce/log.txt | tail -20
echo "warm $(wc -l < /tmp/ce/warm.jsonl 2>/dev/null) timed $(wc -l < /tmp/ce/results.jsonl 2>/dev/null)" \
  "reward $(wc -l < /tmp/ce/reward_check.jsonl 2>/dev/null) at $(( $(date +%s) - T0 )) s"
tar czf "$OUT/ce.tgz" -C /tmp/ce .
if [ "${EXG_S:-60}" -gt 0 ]; then
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > /tmp/ex/gpu.txt
  xr() { timeout "$1" python3 -m dagster_project.rewards.exploits.run "${@:2}"; }
  xr "${COST_S:-25}" --group cost --out /tmp/ex/cost.json > /tmp/ex/cost.log 2>&1; tail -3 /tmp/ex/cost.log
  for g in ${EXG_GROUPS:-heldout4-numpy heldout4-torch heldout4-config heldout3-torch heldout3-config}; do
    xr "${EXG_S:-60}" --group "$g" --out "/tmp/ex/${g/-/_}.json" > "/tmp/ex/${g/-/_}.log" 2>&1 &
  done
  wait
  for f in /tmp/ex/*.log; do echo "== $f"; tail -2 "$f"; done
  tar czf "$OUT/exploits.tgz" -C /tmp/ex .
fi
echo "end $(( $(date +%s) - T0 )) s"
