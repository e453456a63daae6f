"""What the blind title-rule rounds 7 and 8 (issue 41) share: the three strata of the mirrors'
kernel-touching commits and a round's draw from them (each round's ``sample.py`` names its
round, the earlier rounds it skips and its stratum sizes).

Strata, by the title rule at drawing time: ``selected`` (the rule passes the title),
``rejected`` (it does not, but the title has a perf-ish word) and ``other`` (neither).
"""

from __future__ import annotations

import csv
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import perf_filter_sample as pfs  # noqa: E402

from dagster_project.mining.commits import perf_filter  # noqa: E402
from dagster_project.mining.git import GitRepo  # noqa: E402

FIELDS = ["repo", "sha", "round", "stratum", "split", "label", "reason"]


def strata() -> tuple[dict[str, list[dict]], dict[str, dict[str, int]]]:
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


def draw(
    strata: dict[str, list[dict]], taken: set[str], sizes: dict[str, int], round_no: int
) -> list[dict]:
    """Each stratum's share per repo (in proportion to its size), in the round's hash order."""
    rows = []
    for name, items in strata.items():
        by_repo: dict[str, list[dict]] = {}
        for c in items:
            by_repo.setdefault(c["repo"], []).append(c)
        for repo, cs in by_repo.items():
            n = max(1, round(sizes[name] * len(cs) / len(items)))
            fresh = [c for c in cs if c["sha"] not in taken]
            for c in sorted(fresh, key=lambda c: pfs._order(c["sha"], round_no))[:n]:
                rows.append(
                    {
                        "repo": repo,
                        "sha": c["sha"],
                        "round": str(round_no),
                        "stratum": name,
                        "split": "heldout",
                        "label": "",
                        "reason": "",
                    }
                )
    return rows


def write_round(
    round_no: int, earlier: tuple[Path, ...], sizes: dict[str, int], out: Path, meta_path: Path
) -> None:
    """Draw round ``round_no`` (skipping every commit of ``earlier``) into ``out`` with its
    drawing record (rule version, mirror heads, population, sizes) in ``meta_path``."""
    taken = {r["sha"] for path in earlier for r in csv.DictReader(path.open())}
    groups, population = strata()
    rows = draw(groups, taken, sizes, round_no)
    with out.open("w", newline="") as fh:
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
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{len(rows)} rows -> {out}; population {population}")


def weighted(rows: list[dict], population: dict[str, dict[str, int]]) -> tuple[float, float]:
    """Population precision/recall of scored ``rows`` (``label``, ``pred``): each (repo,
    stratum) cell weighted by its population size over its sample size, N/n."""
    n_cell = Counter((r["repo"], r["stratum"]) for r in rows)
    tp = fp = fn = 0.0
    for r in rows:
        w = population[r["repo"]][r["stratum"]] / n_cell[(r["repo"], r["stratum"])]
        pos = r["label"] == "perf"
        tp += w * (r["pred"] and pos)
        fp += w * (r["pred"] and not pos)
        fn += w * (not r["pred"] and pos)
    return tp / max(tp + fp, 1e-9), tp / max(tp + fn, 1e-9)
