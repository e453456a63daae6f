#!/usr/bin/env bash
# One device call for issues 35 and 36 together (stop 35's call 1): the commit execution
# rows first (warm-up checks, one timing process, the GPU reward test), then the sim oracle
# on the sessions of the GPU it landed on, with whatever is left of ~560 s.
#
# Here, first:  bash benchmarks/device/prepare_round.sh      (snapshot + materialised rows)
#               .venv/bin/python benchmarks/device/sim_oracle.py prepare --gpu h100 --out .oracle/h100 --limit 1400
#               (and --gpu h200 --out .oracle/h200)
# Device:       bash benchmarks/device/round.sh   with carry [".commit_exec_work", ".devrun",
#               ".oracle/h100", ".oracle/h200"]
# It runs the commit execution from .devrun/clean (a `git archive HEAD` snapshot), so edits
# in progress in the working tree never travel into a measurement. Writes under $OUT:
# results.jsonl, ce.tgz (warm.jsonl, reward_check.jsonl, log), oracle/ and oracle.log
# (8 files: the tool's limit). Ingest: commit_exec.ingest s0N-<gpu> results.jsonl and
# warm.jsonl --shared-check; sim_oracle.py collect --run OUT/oracle --manifest
# .oracle/<gpu>/manifest.json --gpu <gpu>.
set -u
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
G=$(nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && echo h200 || echo h100)
echo "G=$G"
R=$(pwd)
mkdir -p /tmp/ce
cd .devrun/clean && ln -sfn "$R/.commit_exec_work" .commit_exec_work
# .devrun/time_rows.txt (one id per line, written here): the timing process's priority order;
# .devrun/warm_rows.txt (optional): the only rows the warm-up checks (default: every row)
TR=""; [ -f "$R/.devrun/time_rows.txt" ] && TR=$(paste -sd, "$R/.devrun/time_rows.txt")
WR=""; [ -f "$R/.devrun/warm_rows.txt" ] && WR=$(paste -sd, "$R/.devrun/warm_rows.txt")
TIME_ROWS=${TR:-$WR} COMMIT_EXEC_REWARD_ROWS=${COMMIT_EXEC_REWARD_ROWS:-} WARM=${WARM:-90} OUT=/tmp/ce \
  timeout "${CE_S:-420}" bash benchmarks/device/commit_exec.sh "${CE_TIME_S:-280}" "$WR" "${REWARD_S:-40}" \
  > /tmp/ce/log.txt 2>&1
grep -v "^\s*$" /tmp/ce/log.txt | tail -12
cp /tmp/ce/results.jsonl "$OUT/" 2>/dev/null
tar czf "$OUT/ce.tgz" -C /tmp/ce .
echo "ce done at $(( $(date +%s) - T0 )) s"
B=$(( ${TOTAL_S:-560} - ($(date +%s) - T0) ))
echo "oracle budget $B"
if [ "$B" -gt 40 ]; then
  PYTHONUNBUFFERED=1 timeout $((B + 20)) python3 benchmarks/device/sim_oracle.py run \
    --src "$R/.oracle/$G" --out "$OUT/oracle" --budget "$B" --verify-share 0.4 --workers 4 \
    --compile-jobs 14 > "$OUT/oracle.log" 2>&1
  tail -8 "$OUT/oracle.log"
fi
echo "end $(( $(date +%s) - T0 )) s"
