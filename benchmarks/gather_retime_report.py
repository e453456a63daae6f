"""The H100 embedding_gather re-time (issue 36, stop 42): the oracle timed gathers L2-warm
until 7f8f891 (its input rotation counted allocated bytes, so a 1 GB table was one input
set). Stop 42 re-ran the H100 tier's eight embedding_gather tasks afresh on an H100 with the
fixed oracle (``sim_online.py run --fresh --ops embedding_gather``); its answers ship as
``sim/data/measured/h100_gather_retime.csv``. This prints, for every case timed both ways,
the cold time over the warm one (the tier's answer, else the evidence file's), both read as
they were shipped at ``--warm`` (default ``707dc87``, a revision with the warm times; so the
report still reads them once ``benchmarks/gather_retime_apply.py`` puts the cold ones in their
place)::

    .venv/bin/python benchmarks/gather_retime_report.py
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import subprocess
import tempfile
from pathlib import Path

from dagster_project.sim.oracle import Answer, answers_path, online_answers_path, read_answers

RETIME = (
    Path(__file__).resolve().parents[1] / "dagster_project/sim/data/measured/h100_gather_retime.csv"
)


ROOT = RETIME.parents[4]


def _at(rev: str, path: Path) -> dict[str, Answer]:
    """One answer file as it was shipped at git revision ``rev``."""
    rel = path.resolve().relative_to(ROOT)
    text = subprocess.run(
        ["git", "show", f"{rev}:{rel}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / path.name).write_text(text)
        return read_answers(Path(tmp) / path.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--warm", default="707dc87", help="a revision that ships the warm times")
    rev = ap.parse_args().warm
    evidence, tier = _at(rev, answers_path("h100")), _at(rev, online_answers_path("h100"))
    rows = list(csv.DictReader(RETIME.open(newline="")))
    pairs = []
    for r in rows:
        old = next((a for a in (tier.get(r["key"]), evidence.get(r["key"])) if a and a.ms), None)
        if r["ms"] and old is not None:
            shape = json.loads(r["shape"])
            src = "tier" if tier.get(r["key"]) is old else "evidence"
            pairs.append((float(r["ms"]) / old.ms, shape, r["impl"], src))
    ratios = [p[0] for p in pairs]
    n_tier = sum(p[3] == "tier" for p in pairs)
    print(
        f"{len(rows)} cold answers; {len(pairs)} cases timed both ways "
        f"({n_tier} tier, {len(pairs) - n_tier} evidence)"
    )
    print(
        f"cold/warm: median {statistics.median(ratios):.3f}, "
        f"geomean {math.exp(statistics.fmean(math.log(x) for x in ratios)):.3f}, "
        f"max {max(ratios):.2f}; > 1.2x slower cold: {sum(x > 1.2 for x in ratios)}, "
        f"> 2x: {sum(x > 2 for x in ratios)}"
    )
    print("| T | V | H | impl | cases | median cold/warm | max |")
    print("|---|---|---|---|---|---|---|")
    by: dict[tuple, list[float]] = {}
    for x, s, impl, _ in pairs:
        by.setdefault((s["T"], s["V"], s["H"], impl), []).append(x)
    for (t, v, h, impl), xs in sorted(by.items()):
        med = statistics.median(xs)
        print(f"| {t} | {v} | {h} | {impl} | {len(xs)} | {med:.2f} | {max(xs):.2f} |")


if __name__ == "__main__":
    main()
