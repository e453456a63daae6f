"""Replace the H100's L2-warm embedding_gather times with cold ones (issue 36).

Until ``7f8f891`` (2026-12-07 12:58 UTC) the oracle sized its input-set rotation by the
bytes a case *allocates*, so an embedding table of 0.26-1.2 GB counted as one input set and
the rows its ids touch stayed in L2 between timed calls. Every H100 gather time measured
before that commit is such a warm number; stop 42 re-timed the tier's eight gather tasks
cold (``h100_gather_retime.csv``), up to 2.32x slower at T = 1024. This script applies that
re-time to the files the build reads, so that no shipped *measured* gather time is a warm
one:

* the evidence file (``h100_answers.csv``): a warm gather time whose case was re-timed
  takes the cold measurement (time, spread, repeats and the measuring stamps); one that was
  not re-timed (its source comes from an older generator, so no current session asks it) is
  withdrawn: the verdict stays (correctness does not depend on L2), the time becomes
  unknown and ``error`` says why;
* the online tier's answers (``h100_online_answers.csv``): the same two rules, and cold
  answers the tier lacks join it (``sim_online.tier_rows``: the evidence already answers
  the others).

Applied at stop 44: 26 evidence times re-timed, 7 withdrawn; 29 tier times re-timed, 19
withdrawn, 33 cold answers joined; the relists below kept every listed session (164 on the
H100, the two gather sessions of stop 42's fresh run among them, 6 with new trajectories;
102 on the H200, none changed), and ``benchmarks/device/sim_oracle_report.py --gpu h100``
(eight cross-validations, about 80 CPU minutes on two cores) refreshed the timing-model
summary (``h100_timing_model.json``). The label policy's residuals
(``sim_label_policy_fresh.py --fit``, 33 min) refitted on the new answers would move its
threshold from 0.46 to 0.41 (stop 43's trial run); run on the applied answers at stop 45 it
gave 0.3846, shipped as label policy 1.4.0 (1.3.0 kept the residuals it was frozen with).

Afterwards the evidence digest has changed, so every online session must be re-checked:
``benchmarks/device/sim_online.py relist --gpu h100 --from-run <stop 42's gather run>`` and
``relist --gpu h200``. Idempotent (a cold row is never touched again)::

    .venv/bin/python benchmarks/gather_retime_apply.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "device"))

from dagster_project.sim.oracle import (  # noqa: E402
    ANSWER_FIELDS,
    answers_path,
    online_answers_path,
    read_answers,
)

#: When the rotation fix (7f8f891) landed: a gather time measured before it is L2-warm.
FIX_AT = "2026-12-07T12:58:07Z"
RETIME = answers_path("h100").with_name("h100_gather_retime.csv")
#: The fields a re-time replaces: the measurement and its stamps, not the case or verdict.
_STAMPS = ANSWER_FIELDS[ANSWER_FIELDS.index("device") : ANSWER_FIELDS.index("measured_at") + 1]
TIMING_FIELDS = ("ms", "spread_pct", "n_timed", "timing", *_STAMPS)
WITHDRAWN = "time withdrawn: timed L2-warm before the gather rotation fix (7f8f891)"


def warm(row: dict[str, str]) -> bool:
    """A gather time measured before the rotation fix."""
    return row["op"] == "embedding_gather" and bool(row["ms"]) and row["measured_at"] < FIX_AT


def apply(rows: list[dict[str, str]], cold: dict[str, dict[str, str]]) -> tuple[int, int]:
    """Rewrite ``rows`` in place; (re-timed, withdrawn)."""
    retimed = withdrawn = 0
    for r in rows:
        if not warm(r):
            continue
        c = cold.get(r["key"])
        if c is not None and c["status"] == r["status"] == "ok" and c["ms"]:
            r.update({f: c[f] for f in TIMING_FIELDS})
            retimed += 1
        else:
            r.update({"ms": "", "spread_pct": "", "n_timed": "", "timing": "", "error": WITHDRAWN})
            withdrawn += 1
    return retimed, withdrawn


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(ANSWER_FIELDS))
        w.writeheader()
        w.writerows(sorted(rows, key=lambda r: r["key"]))
    tmp.replace(path)


def main() -> None:
    from sim_online import tier_rows

    cold_rows = _read(RETIME)
    bad = [r["key"][:12] for r in cold_rows if r["measured_at"] < FIX_AT]
    if bad:
        raise SystemExit(f"{RETIME.name}: {len(bad)} rows measured before the fix: {bad[:3]}")
    cold = {r["key"]: r for r in cold_rows}
    ev_path, tier_path = answers_path("h100"), online_answers_path("h100")
    evidence = _read(ev_path)
    e = apply(evidence, cold)
    _write(ev_path, evidence)
    tier = _read(tier_path)
    t = apply(tier, cold)
    have = {r["key"] for r in tier}
    joined = [r for r in tier_rows(cold_rows, read_answers(ev_path)) if r["key"] not in have]
    _write(tier_path, tier + joined)
    print(
        f"{ev_path.name}: {e[0]} re-timed, {e[1]} withdrawn; "
        f"{tier_path.name}: {t[0]} re-timed, {t[1]} withdrawn, {len(joined)} cold answers joined"
    )


if __name__ == "__main__":
    main()
