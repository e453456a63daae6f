#!/usr/bin/env bash
# Here, before a device call of benchmarks/device/round.sh: a `git archive HEAD` snapshot in
# the git-ignored .devrun/clean (what the device runs), and every spec-covered kernel_commits
# row materialised into .commit_exec_work (upstream source: ignored, carried, never
# committed). KC is datasets.kernel_commits of a lake built against the mirrors, as Parquet
# (default: the lake at KERNELHOUSE_HOME, read through the package). REPOS is the folder of
# <repo>.git clones the specs' sibling modules are read from (default: repos/ beside KC, or
# KERNELHOUSE_HOME/repos); without it rows with siblings load them as stubs.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx "/.devrun/" .git/info/exclude || echo "/.devrun/" >> .git/info/exclude
rm -rf .devrun/clean && mkdir -p .devrun/clean
git archive HEAD dagster_project benchmarks/device tests/gpu tests/__init__.py | tar x -C .devrun/clean
rm -rf .commit_exec_work
if [ -n "${KC:-}" ]; then
  REPOS="$(realpath -m "${REPOS:-$(dirname "$KC")/repos}")"
  (cd .devrun/clean && ../../.venv/bin/python -c "
import sys, polars as pl; from pathlib import Path
from dagster_project.commit_exec.materialise import materialise
repos = Path(sys.argv[2]) if Path(sys.argv[2]).is_dir() else None
m = materialise(pl.read_parquet(sys.argv[1]), Path('../../.commit_exec_work'), repos)
print(len(m), 'rows', len({r['sha'] for r in m}), 'commits,',
      sum('siblings' in r for r in m), 'with siblings from', repos)" "$KC" "$REPOS")
else
  (cd .devrun/clean && ../../.venv/bin/python -m dagster_project.commit_exec.materialise \
    "${KERNELHOUSE_HOME:?set KERNELHOUSE_HOME or KC}" ../../.commit_exec_work)
fi
git log --oneline -1
