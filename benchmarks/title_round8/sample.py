"""Draw perf-filter round 8 (issue 41, 41e): a fresh blind round, disjoint from rounds 1-7.

Population: the non-merge commits of the three mirrors that touch kernel paths (as
``find_perf_commits`` sees them, title rule bypassed; ``perf_filter_sample.candidates``).
Three strata, drawn per repo in proportion to its size in a round-8 hash order, skipping
every commit of rounds 1-5 (``perf_filter_sample.csv``), round 6 (``title_round6/labels.csv``)
and round 7 (``title_round7/labels.csv``), as round 7 was drawn:

* ``selected``: title rule v8 (the rule at drawing time) passes it;
* ``rejected``: v8 turns it down but the title has a perf-ish word (``PERFISH``), as in
  rounds 1-6;
* ``other``: neither (no perf-ish word at all), so recall is read over every
  kernel-touching commit, not only over perf-ish titles.

Round 8 is the held-out round of the diff-reading filter (v9, ``perf_diffmodel``): it is
drawn and labelled before that model is fitted (on rounds 1-7 only) and scored once.

Labels are added by hand afterwards, from the title, message and diff in the hash order of
``label-order|sha`` (never seeing the stratum or a rule's verdict). Titles and messages are
never stored (third-party text): ``score.py`` reads the titles and diffs from the clones again.

    .venv/bin/python benchmarks/title_round8/sample.py --selected 55 --rejected 40 --other 30
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

import perf_filter_sample as pfs  # noqa: E402

from dagster_project.mining.commits import perf_filter  # noqa: E402
from dagster_project.mining.git import GitRepo  # noqa: E402

OUT = HERE / "labels.csv"
META = HERE / "sample.json"
ROUND = 8
EARLIER = (
    pfs.OUT,
    HERE.parent / "title_round6" / "labels.csv",
    HERE.parent / "title_round7" / "labels.csv",
)
FIELDS = ["repo", "sha", "round", "stratum", "split", "label", "reason"]


def _strata() -> tuple[dict[str, list[dict]], dict[str, dict[str, int]]]:
    """Every repo's candidates sorted into the three strata, and the population sizes."""
    strata: dict[str, list[dict]] = {"selected": [], "rejected": [], "other": []}
    population: dict[str, dict[str, int]] = {}
    for repo in pfs.SOURCES:
        counts = dict.fromkeys([*strata, "candidates"], 0)
        for c in pfs.candidates(repo):
            counts["candidates"] += 1
            if perf_filter.match_title(c["subject"]) is not None:
                name = "selected"
            elif pfs.PERFISH.search(c["subject"]):
                name = "rejected"
            else:
                name = "other"
            counts[name] += 1
            strata[name].append(c)
        population[repo] = counts
    return strata, population


def _draw(strata: dict[str, list[dict]], taken: set[str], sizes: dict[str, int]) -> list[dict]:
    """Each stratum's share per repo (in proportion to its size), in the round-8 hash order."""
    rows = []
    for name, items in strata.items():
        by_repo: dict[str, list[dict]] = {}
        for c in items:
            by_repo.setdefault(c["repo"], []).append(c)
        for repo, cs in by_repo.items():
            n = max(1, round(sizes[name] * len(cs) / len(items)))
            fresh = [c for c in cs if c["sha"] not in taken]
            for c in sorted(fresh, key=lambda c: pfs._order(c["sha"], ROUND))[:n]:
                rows.append(
                    {
                        "repo": repo,
                        "sha": c["sha"],
                        "round": str(ROUND),
                        "stratum": name,
                        "split": "heldout",
                        "label": "",
                        "reason": "",
                    }
                )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--selected", type=int, default=55)
    ap.add_argument("--rejected", type=int, default=40)
    ap.add_argument("--other", type=int, default=30)
    args = ap.parse_args()
    taken = {r["sha"] for path in EARLIER for r in csv.DictReader(path.open())}
    strata, population = _strata()
    sizes = {"selected": args.selected, "rejected": args.rejected, "other": args.other}
    rows = _draw(strata, taken, sizes)
    with OUT.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(rows)
    heads = {r: GitRepo(Path(pfs.source(r))).head("HEAD") for r in pfs.SOURCES}
    meta = {
        "drawn_with_title_rule": perf_filter.RULES_VERSION,
        "heads": heads,
        "population": population,
        "sizes": sizes,
        "excluded_earlier_rounds": len(taken),
    }
    META.write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{len(rows)} rows -> {OUT}; population {population}")


if __name__ == "__main__":
    main()
