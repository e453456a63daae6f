"""Draw the labelled sample of ``bench_perf_filter.py`` from the real clones (issue 21).

Candidates are the non-merge commits that touch kernel paths (``RepoSpec.pathspecs``,
with a kernel-kind file), as ``find_perf_commits`` sees them, with every title kept. Two
strata, drawn per repo in proportion to its size with a fixed hash order (so the draw is
reproducible and independent of the labeller):

* ``selected``: the title rule at drawing time (``perf_filter.RULES_VERSION``) passes it;
* ``rejected``: it does not, but the title has a perf-ish word (``PERFISH`` below).

Round 1 rows get ``split`` ``dev`` (the rule may be tuned on it) or ``heldout`` (scored
only) from the sha's hash. A later round (``--round 2``) draws a fresh, disjoint sample
with the rule as it is then, all ``heldout``, appended to the same file: once a round's
held-out half has been scored and the rule tuned again, only a new round is held out.
Drawing a new round therefore marks every older row ``dev`` (round 4, drawn with rule v5,
turned rounds 1-3 into development rows).
Labels and reasons are added by hand afterwards, blind: the labeller sees the commits in
a hash order with title, message and diff stat, never the stratum or the rule's verdict;
titles are never stored (they are third-party text): ``bench_perf_filter.py`` reads
them from the clones again. Population sizes go to ``perf_filter_sample.json`` so the
benchmark can also weight the strata back to the population.

    .venv/bin/python benchmarks/perf_filter_sample.py --per-stratum 110            # round 1
    .venv/bin/python benchmarks/perf_filter_sample.py --round 2 --per-stratum 60   # appended
    .venv/bin/python benchmarks/perf_filter_sample.py --round 4 --per-stratum 100  # v5's held-out
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
from pathlib import Path

from dagster_project.mining.commits import mine, perf_filter
from dagster_project.mining.commits.specs import DEFAULT_SPECS
from dagster_project.mining.git import GitRepo

HERE = Path(__file__).parent
OUT = HERE / "labelled" / "data" / "perf_filter_sample.csv"
META = HERE / "labelled" / "data" / "perf_filter_sample.json"
SOURCES = {
    "vllm": "/work/.mirror/local-inference-lab+vllm/repo",
    "sglang": "/work/.mirror/nokiaMS+sglang/repo",
    "flashinfer": "/work/.mirror/flashinfer-ai+flashinfer/repo",
}
#: Words that make a rejected title a plausible miss (wider than the rule on purpose).
PERFISH = re.compile(
    r"perf|optimi|\bopt\b|speed|fast|fuse|fusion|fusing|latency|throughput|efficien|improv"
    r"|reduc|overhead|tun(e|ed|ing)\b|accelerat|vectori|bandwidth|boost|split[\s-]?k"
    r"|persistent|warp[\s-]?spec",
    re.IGNORECASE,
)


def source(repo: str) -> str:
    return os.environ.get(f"KERNELHOUSE_{repo.upper()}_SOURCE", SOURCES[repo])


def candidates(repo: str) -> list[dict]:
    """Every kernel-touching commit of ``repo`` with its subject (title rule bypassed)."""
    git = GitRepo(Path(source(repo)))
    original = mine.match_title
    mine.match_title = lambda subject, rule="mid": perf_filter.TitleMatch("any", "")
    try:
        df = mine.find_perf_commits(git, DEFAULT_SPECS[repo], head="HEAD")
    finally:
        mine.match_title = original
    return df.select("repo", "sha", "subject").to_dicts()


def _order(sha: str, rnd: int = 1) -> str:
    salt = "perf-filter-sample" if rnd == 1 else f"perf-filter-sample-r{rnd}"
    return hashlib.sha256(f"{salt}|{sha}".encode()).hexdigest()


def split_of(sha: str) -> str:
    return (
        "dev"
        if int(hashlib.sha256(f"split|{sha}".encode()).hexdigest(), 16) % 2 == 0
        else "heldout"
    )


def _older_rounds(rnd: int) -> list[dict]:
    """The rows of the rounds drawn before ``rnd``, all turned into development rows."""
    old_rows = list(csv.DictReader(OUT.open())) if OUT.exists() and rnd > 1 else []
    for r in old_rows:  # a round already scored (and tuned on) is development data now
        r["split"] = "dev"
    return old_rows


def _strata() -> tuple[dict[str, list[dict]], dict[str, dict[str, int]]]:
    """Every repo's candidates sorted into the two strata, and the population sizes."""
    strata: dict[str, list[dict]] = {"selected": [], "rejected": []}
    population: dict[str, dict[str, int]] = {}
    for repo in SOURCES:
        counts = {"selected": 0, "rejected": 0, "candidates": 0}
        per: dict[str, list[dict]] = {"selected": [], "rejected": []}
        for c in candidates(repo):
            counts["candidates"] += 1
            if perf_filter.match_title(c["subject"]) is not None:
                per["selected"].append(c)
            elif PERFISH.search(c["subject"]):
                per["rejected"].append(c)
        counts["selected"], counts["rejected"] = len(per["selected"]), len(per["rejected"])
        population[repo] = counts
        for k, v in per.items():
            strata[k].extend(v)
    return strata, population


def _draw(strata: dict[str, list[dict]], taken: set[str], per_stratum: int, rnd: int) -> list[dict]:
    """Each stratum's share per repo (in proportion to its size), in the round's hash order,
    skipping commits an earlier round already drew."""
    rows = []
    for name, items in strata.items():
        total = len(items)
        by_repo: dict[str, list[dict]] = {}
        for c in items:
            by_repo.setdefault(c["repo"], []).append(c)
        for repo, cs in by_repo.items():
            n = max(1, round(per_stratum * len(cs) / total))
            fresh = [c for c in cs if c["sha"] not in taken]
            for c in sorted(fresh, key=lambda c: _order(c["sha"], rnd))[:n]:
                rows.append(
                    {
                        "repo": repo,
                        "sha": c["sha"],
                        "round": str(rnd),
                        "stratum": name,
                        "split": split_of(c["sha"]) if rnd == 1 else "heldout",
                        "label": "",
                        "reason": "",
                    }
                )
    return rows


def _write_meta(rnd: int, per_stratum: int, population: dict[str, dict[str, int]]) -> None:
    """Record how the round was drawn (rule version, heads, population) beside the sample."""
    heads = {r: GitRepo(Path(source(r))).head("HEAD") for r in SOURCES}
    meta = json.loads(META.read_text()) if META.exists() and rnd > 1 else {"rounds": {}}
    meta["rounds"][str(rnd)] = {
        "drawn_with_title_rule": perf_filter.RULES_VERSION,
        "heads": heads,
        "population": population,
        "per_stratum": per_stratum,
    }
    META.write_text(json.dumps(meta, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-stratum", type=int, default=110)
    ap.add_argument("--round", type=int, default=1)
    args = ap.parse_args()
    old_rows = _older_rounds(args.round)
    taken = {r["sha"] for r in old_rows}
    strata, population = _strata()
    rows = _draw(strata, taken, args.per_stratum, args.round)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", newline="") as fh:
        w = csv.DictWriter(
            fh, fieldnames=["repo", "sha", "round", "stratum", "split", "label", "reason"]
        )
        w.writeheader()
        w.writerows(old_rows + rows)
    _write_meta(args.round, args.per_stratum, population)
    print(f"{len(rows)} rows -> {OUT}; population {population}")


if __name__ == "__main__":
    main()
