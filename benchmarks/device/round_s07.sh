#!/usr/bin/env bash
# One device call of stop 39 (s07), for whichever Hopper card the call gets: the sim oracle on
# that card's prepared questions, then issue 38's second-session re-measure of 30 random rows
# of that card's shipped latency tables, then the commit rows not yet executed (warm-up check
# and a short timing process; REWARD_S > 0 adds the GPU reward test, meaningful only on the
# H100, where the rows' labels were measured), then exploit groups side by side (EXG_S > 0:
# EXG_GROUPS, default heldout5's three, each cut at EXG_S). ONLINE_S > 0 first grows the online
# measured tier for the card (benchmarks/device/sim_online.py; ONLINE_OPEN / ONLINE_N pick how
# many sessions start: about 7 / 110 on a card with no tier yet, 6 / 90 after), collected here
# with `sim_online.py collect --run <files_at>/online --gpu <card>`.
# Here first:
#   KC=/tmp/kh-exec/kc.parquet bash benchmarks/device/prepare_round.sh
#   (cd .devrun/clean && ../../.venv/bin/python benchmarks/device/sim_oracle.py prepare \
#      --gpu h200 --out ../../.oracle/h200 --limit 500 --order tier)     # and/or --gpu h100
#   .venv/bin/python benchmarks/device/gpu_exhaustive_plan.py remeasure --gpu h200 --rows 30 \
#      --seed 20261207
#   id lists .devrun/exec6_warm.txt (WARM_LIST overrides it), .devrun/exec7_time.txt
#   (TIME_LIST), .devrun/exec6_reward.txt (REWARD_LIST), each comma-separated
# Device, with carry [".commit_exec_work", ".devrun", ".oracle/<gpu>", ".gpu"]:
#   ORACLE_S=240 GM_S=90 WARM=50 CE_TIME_S=80 REWARD_S=0 EXG_S=0 bash benchmarks/device/round_s07.sh
# Writes $OUT/oracle.tgz, $OUT/gm.tgz, $OUT/ce.tgz, $OUT/exploits.tgz. A stage given 0 seconds
# is skipped.
set -u
T0=$(date +%s); R=$(pwd)
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100)
echo "card $G"
if [ "${ONLINE_S:-0}" -gt 0 ]; then
  PYTHONUNBUFFERED=1 timeout $(( ONLINE_S + 40 )) python3 benchmarks/device/sim_online.py run \
    --out /tmp/online --budget "$ONLINE_S" --max-open "${ONLINE_OPEN:-6}" \
    --sessions "${ONLINE_N:-90}" > /tmp/online.log 2>&1
  tail -4 /tmp/online.log; cp /tmp/online.log /tmp/online/run.log
  rm -rf /tmp/online/round*/src /tmp/online/round*/out
  tar czf "$OUT/online.tgz" -C /tmp/online .
  echo "online done at $(( $(date +%s) - T0 )) s"
fi
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
    SHARDS=8 WARM=${WARM:-50} TIME_ROWS=$(cat "$R/${TIME_LIST:-.devrun/exec7_time.txt}") OUT=/tmp/ce \
    COMMIT_EXEC_REWARD_ROWS=$(cat "$R/${REWARD_LIST:-.devrun/exec6_reward.txt}" 2>/dev/null) \
    timeout $(( ${WARM:-50} + ${CE_TIME_S:-80} + ${REWARD_S:-0} + 30 )) \
    bash benchmarks/device/commit_exec.sh "${CE_TIME_S:-80}" "$(cat "$R/${WARM_LIST:-.devrun/exec6_warm.txt}")" \
    "${REWARD_S:-0}" > /tmp/ce/log.txt 2>&1)
  grep -v "^\s*$" /tmp/ce/log.txt | tail -4
  echo "warm $(wc -l < /tmp/ce/warm.jsonl 2>/dev/null) timed $(wc -l < /tmp/ce/results.jsonl 2>/dev/null)" \
    "reward $(wc -l < /tmp/ce/reward_check.jsonl 2>/dev/null) at $(( $(date +%s) - T0 )) s"
  tar czf "$OUT/ce.tgz" -C /tmp/ce .
fi
if [ "${EXG_S:-0}" -gt 0 ]; then
  mkdir -p /tmp/ex
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > /tmp/ex/gpu.txt
  for g in ${EXG_GROUPS:-heldout5-numpy heldout5-torch heldout5-config}; do
    timeout "$EXG_S" python3 -m dagster_project.rewards.exploits.run --group "$g" \
      --out "/tmp/ex/${g/-/_}.json" > "/tmp/ex/${g/-/_}.log" 2>&1 &
  done
  wait
  for f in /tmp/ex/*.log; do echo "== $f"; tail -2 "$f"; done
  tar czf "$OUT/exploits.tgz" -C /tmp/ex .
fi
echo "end $(( $(date +%s) - T0 )) s"
