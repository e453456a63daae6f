"""The GPU test of the execution reward (issue 35), shipped as data and read back as figures.

On the device, ``tests/gpu/test_commit_exec_gpu.py`` runs each named executed row's oracle
edit (the commit itself as SEARCH/REPLACE), its unchanged ``before_code`` and a broken edit
through ``rewards.commit_reward`` and writes one JSON line per row. ``append`` turns such a
file into rows of ``data/reward_checks.csv`` (one batch per device session); ``summary``
compares every checked row with the row's published label, its first timed run of the
shipped execution batches (``columns.first_runs``):

* a label whose CI clears the effect floor asks for direction: a significant gain must earn
  the oracle edit more than the unchanged code's no-gain reward, a significant slowdown less;
* a label that is not significant asks nothing of the direction;
* the unchanged code must earn no gain and the broken edit the error reward, on every row.

The acceptance counts checks of today's reward (``REWARD_VERSION``), and a check of an
earlier reward in ``SAME_WITHOUT_SIBLING_EDITS`` where the row's oracle edit changes no sibling
module (``sibling_edits`` 0, recorded by the device test from stop 43 on; filled for stop
43's reward-2 batch from the materialised trees, ``before_siblings`` vs ``after_siblings``).

Why a CSV beside the Parquet batches: a handful of rows per session, read by the card and a
report script; a reviewer can diff it. ``side_by_side`` records how many rows shared the card
while it was timed: sessions s06 and s07 timed two rows at once (pytest's ``-n 2`` from the
root pyproject), which is a device-contention artefact, so the acceptance figure counts only
checks run one row at a time.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from .device import stats
from .ingest import DATA_DIR, shipped

CHECKS_CSV = DATA_DIR / "reward_checks.csv"
COLUMNS = (
    "batch",
    "id",
    "status",
    "reward_speedup",
    "reward_ci_lo",
    "reward_ci_hi",
    "reward_significant",
    "oracle_edit_reward",
    "unchanged_reward",
    "broken_reward",
    "timed_shapes",
    "interval",
    "side_by_side",
    "scope",
    "reward_version",
    "sibling_edits",
)
#: The reward's values the test asserts (``rewards.commit_reward``; repeated here so reading
#: the shipped checks needs no sandbox import).
NO_GAIN_REWARD = 0.1
ERROR_REWARD = -0.5
REWARD_VERSION = "3"
#: An earlier reward whose check of a row stands for today's where the row's oracle edit
#: changes no sibling module (``sibling_edits`` 0): reward 3 differs from reward 2 only in
#: letting a completion edit the siblings, so for such a row the sandbox receives the very
#: same files under both. A row whose oracle edits a sibling needs a reward-3 check.
SAME_WITHOUT_SIBLING_EDITS = ("2",)


class RewardCheckError(ValueError):
    """A reward-check file that cannot be appended (named in the message)."""


def _csv_row(batch: str, rec: dict[str, Any], note: str, side_by_side: int) -> dict[str, Any]:
    ci = rec.get("ci") or [None, None]
    if "id" not in rec or "oracle_edit_reward" not in rec:
        raise RewardCheckError(f"reward-check line without id/oracle_edit_reward: {rec!r:.120}")
    return {
        "batch": batch,
        "id": rec["id"],
        "status": rec.get("status"),
        "reward_speedup": rec.get("speedup"),
        "reward_ci_lo": ci[0],
        "reward_ci_hi": ci[1],
        "reward_significant": "true" if rec.get("significant") else "false",
        "oracle_edit_reward": rec["oracle_edit_reward"],
        "unchanged_reward": rec.get("unchanged_reward"),
        "broken_reward": rec.get("broken_reward"),
        "timed_shapes": "named + random",
        "interval": note,
        "side_by_side": side_by_side,
        # the scope the reward read its speedup in (stats.label_scope); until stop 42 the
        # reward read graph replay only, so a row its graph could not capture had none
        "scope": rec.get("scope") or "",
        # the reward the line tested (rewards.commit_reward.REWARD_VERSION); lines before
        # stop 42 carried none and were reward 1
        "reward_version": str(rec.get("reward_version") or "1"),
        # how many sibling modules the oracle edit changes (the commit changed them too);
        # "" where the line did not say (before stop 43)
        "sibling_edits": "" if rec.get("sibling_edits") is None else len(rec["sibling_edits"]),
    }


def append(
    batch: str, jsonl: Path, note: str, side_by_side: int = 1, dest: Path = CHECKS_CSV
) -> int:
    """Append the device's ``reward_check.jsonl`` as batch ``batch``; returns rows added.

    Refuses a batch already in the file (a re-run gets a new batch name) and a malformed
    line (nothing is written then: the file is rewritten whole, through a temporary)."""
    lines = [ln for ln in jsonl.read_text().splitlines() if ln.strip()]
    try:
        recs = [json.loads(ln) for ln in lines]
    except json.JSONDecodeError as exc:
        raise RewardCheckError(f"{jsonl}: not JSON lines ({exc})") from exc
    old = list(csv.DictReader(dest.open())) if dest.exists() else []
    if any(r["batch"] == batch for r in old):
        raise RewardCheckError(f"{dest.name} already holds batch {batch}")
    new = [_csv_row(batch, r, note, side_by_side) for r in recs]
    tmp = dest.with_suffix(".tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in old:
            w.writerow({c: r.get(c, "") for c in COLUMNS})
        w.writerows(new)
    tmp.replace(dest)
    return len(new)


def _labels(runs: pl.DataFrame) -> dict[str, tuple[float, bool]]:
    """Each row's label, the one ``datasets.kernel_commits`` publishes: its label run
    (``columns.first_runs``: the first executed and timed session; later ones re-measure,
    they do not relabel) read in the label's scope (``stats.label_scope``). Until stop 42
    this read the latest timed run, which differed for the 7 significant rows timed twice."""
    from .columns import first_runs

    timed = runs.filter(
        (pl.col("status") == "executed")
        & pl.col("equivalent")
        & ~pl.col("batch").str.ends_with("-check")
        & (pl.col("graph_speedup").is_not_null() | pl.col("host_speedup").is_not_null())
    )
    out: dict[str, tuple[float, bool]] = {}
    for r in first_runs(timed).iter_rows(named=True):
        scope = stats.label_scope({s: r[f"{s}_speedup"] is not None for s in stats.SCOPES})
        out[r["id"]] = (float(r[f"{scope}_speedup"]), bool(r[f"{scope}_significant"]))
    return out


def _consistent(check: dict[str, Any], speedup: float) -> bool:
    if speedup > 1:
        return float(check["oracle_edit_reward"]) > float(check["unchanged_reward"])
    return float(check["oracle_edit_reward"]) < float(check["unchanged_reward"])


def _batch_line(batch: str, rows: list[dict[str, Any]], labels: dict) -> dict[str, Any]:
    n = agree = 0
    ratios = []
    for c in rows:
        if c["id"] not in labels:
            continue
        sp, sig = labels[c["id"]]
        if c["reward_speedup"] not in (None, "") and sp:
            ratios.append(abs(math.log(float(c["reward_speedup"]) / sp)))
        if sig:
            n += 1
            agree += _consistent(c, sp)
    return {
        "batch": batch,
        "rows": len(rows),
        "side_by_side": max(int(c.get("side_by_side") or 1) for c in rows),
        "significant": n,
        "consistent": agree,
        "median_log_ratio": statistics.median(ratios) if ratios else None,
    }


def summary(
    runs: pl.DataFrame | None = None, checks: Iterable[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Per batch and over the acceptance's population (see the module docstring)."""
    if runs is None:
        runs = shipped()[0]
    rows = list(checks) if checks is not None else list(csv.DictReader(CHECKS_CSV.open()))
    labels = _labels(runs)
    by_batch: dict[str, list[dict[str, Any]]] = {}
    for c in rows:
        by_batch.setdefault(c["batch"], []).append(c)
    batches = [_batch_line(b, rs, labels) for b, rs in by_batch.items()]
    significant = sorted(i for i, (_, sig) in labels.items() if sig)
    # the acceptance counts checks of today's reward only, run one row at a time, the
    # latest per row; an earlier reward's checks are reported beside it, per version
    per_version: dict[str, dict[str, Any]] = {}
    for c in rows:
        if int(c.get("side_by_side") or 1) == 1:
            per_version.setdefault(c.get("reward_version") or "1", {})[c["id"]] = c
    alone = dict(per_version.get(REWARD_VERSION, {}))
    for v in SAME_WITHOUT_SIBLING_EDITS:
        for i, c in per_version.get(v, {}).items():
            if i not in alone and str(c.get("sibling_edits")) == "0":
                alone[i] = c
    tested = [i for i in significant if i in alone]
    agree = [i for i in tested if _consistent(alone[i], labels[i][0])]
    earlier = {
        v: {
            "tested": len([i for i in significant if i in got]),
            "consistent": len(
                [i for i in significant if i in got and _consistent(got[i], labels[i][0])]
            ),
        }
        for v, got in sorted(per_version.items())
        if v != REWARD_VERSION
    }
    carried = sum(1 for i in tested if alone[i].get("reward_version") != REWARD_VERSION)
    return {
        "batches": batches,
        "reward_version": REWARD_VERSION,
        "significant_rows": len(significant),
        "tested_alone": len(tested),
        # of those, checks of an earlier reward that stand for today's (no sibling edit)
        "carried_over": carried,
        "consistent_alone": len(agree),
        "untested": [i for i in significant if i not in alone],
        "inconsistent": [i for i in tested if i not in agree],
        "earlier_rewards": earlier,
        "checks": len(rows),
        "unchanged_no_gain": sum(
            float(c["unchanged_reward"]) <= NO_GAIN_REWARD + 1e-9 for c in rows
        ),
        "broken_error": sum(float(c["broken_reward"]) == ERROR_REWARD for c in rows),
    }


def card_context() -> dict[str, Any]:
    """The name the kernel_opt_rl card's template uses for the reward test (None: no file)."""
    return {"kc_reward": summary() if CHECKS_CSV.exists() else None}


def main(argv: list[str]) -> int:
    """``python -m dagster_project.commit_exec.reward_checks BATCH reward_check.jsonl NOTE``
    appends a device session's reward test; with no arguments, prints the summary."""
    if argv:
        print(append(argv[0], Path(argv[1]), argv[2]), "rows appended to", CHECKS_CSV)
        return 0
    s = summary()
    for b in s["batches"]:
        print(b)
    print(
        f"reward {s['reward_version']}: significant rows {s['significant_rows']}, tested one "
        f"at a time {s['tested_alone']} ({s['carried_over']} by an earlier reward's check "
        f"of a row with no sibling edit), consistent {s['consistent_alone']}; "
        f"untested {len(s['untested'])}; inconsistent {s['inconsistent']}"
    )
    for v, e in s["earlier_rewards"].items():
        print(f"reward {v} (superseded): tested {e['tested']}, consistent {e['consistent']}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
