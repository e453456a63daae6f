"""Does the PR description close the title rule's gap? (issue 21, an experiment)

The title rule tops out near precision 0.86 / recall 0.79 on unseen commits (round 5 of
``data/perf_filter_sample.csv``), and a second reader agrees with the labels 98% of the
time, so the gap is what a title can say. The next signal a miner can get is the PR
description (``pr_bodies``). This script measures how much it adds, with rules fixed
**before any description was read** (written 2026-12-02, committed with the first run):

* ``gain``: the gains extractor finds an audited measurement in the description whose
  usable speedup is above 1.02 (the PR shows itself faster);
* ``claim``: the description, with the repositories' PR templates removed (HTML comments,
  checklist lines ``- [ ]``, the template's own headings), says perf in outcome words
  (``PERF_CLAIM_RE``).

and four ways to combine them with the title rule, all falling back to the title alone
when no description was found:

====== =====================================================================
A      title rule, or (title rejected and ``gain``)                 widen only
B      A, and a title-selected commit whose description has neither ``gain``
       nor ``claim`` (and is at least ``MIN_BODY`` characters) is vetoed
C      title rule, or (title rejected and (``gain`` or ``claim``))   widen more
D      C with B's veto
====== =====================================================================

Round 4 is where a variant may be chosen (it is development data for the title rule too);
round 5 is the held-out round: every variant is printed on both, and the headline is the
variant chosen on round 4, scored on round 5.

Descriptions are third-party text: they live in the git-ignored ``data/perf_filter_bodies/``
(filled from the search corpus by a helper, or from GitHub with ``--fetch`` and a token);
only ``data/perf_filter_bodies.csv`` (which PR, found or not, length and sha256 of the text
used) is committed, so a fresh clone can fetch the same texts and check them.

    .venv/bin/python benchmarks/perf_filter_bodies.py            # score (needs the cache)
    .venv/bin/python benchmarks/perf_filter_bodies.py --manifest # write the committed list
    GITHUB_TOKEN=... .venv/bin/python benchmarks/perf_filter_bodies.py --fetch
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from dagster_project.gains.extract import extract_pr_gains
from dagster_project.mining.commits import perf_filter

sys.path.insert(0, str(Path(__file__).parent))
from bench_perf_filter import SAMPLE, report_errors, report_variants, subjects  # noqa: E402
from perf_filter_sample import SOURCES, source  # noqa: E402

HERE = Path(__file__).parent
CACHE = HERE / "labelled" / "data" / "perf_filter_bodies"
MANIFEST = HERE / "labelled" / "data" / "perf_filter_bodies.csv"
FULL = {
    "vllm": "vllm-project/vllm",
    "sglang": "sgl-project/sglang",
    "flashinfer": "flashinfer-ai/flashinfer",
}
ROUNDS = ("4", "5")
#: a description shorter than this (after the template is removed) says too little to veto
MIN_BODY = 200

#: outcome words of a perf claim (the title rule's CORE words, in a description's prose)
PERF_CLAIM_RE = re.compile(
    r"speed[\s-]?ups?\b|sped up|\bfaster\b|\bperf(ormance)?\b|throughput|latency|\bTTFT\b"
    r"|\bTPOT\b|\bITL\b|optimi[sz]|\bimprov\w*|\breduc\w*\s+(the\s+)?(overhead|latency|time"
    r"|memory|launch|kernel|sync)|\b\d+(\.\d+)?\s*[x×]\b|\b\d+(\.\d+)?\s*%",
    re.IGNORECASE,
)
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_CHECKLIST_RE = re.compile(r"^\s*[-*]\s*\[[ xX]\].*$", re.MULTILINE)
#: template text of the three repositories that is not the author's (headings and the
#: boilerplate sections after them)
_TEMPLATE_SECTION_RE = re.compile(
    r"^#+\s*(checklist|essential elements of an effective pr description checklist"
    r"|review process|reviewer notes?)\b.*?(?=^#+\s|\Z)",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)
_HEADING_RE = re.compile(r"^#+.*$", re.MULTILINE)


def author_text(body: str) -> str:
    """The description without the PR template: comments, checklists, template sections
    and headings ("## Benchmarking and Profiling" is the template's word, not a claim)."""
    text = _COMMENT_RE.sub(" ", body)
    text = _TEMPLATE_SECTION_RE.sub(" ", text)
    text = _CHECKLIST_RE.sub(" ", text)
    text = _HEADING_RE.sub(" ", text)
    return text.strip()


def body_path(repo: str, pr: str, sha: str) -> Path:
    return CACHE / (f"{repo}-{pr}.md" if pr else f"{repo}-sha-{sha[:10]}.md")


def signals(body: str, repo: str) -> dict[str, bool]:
    """``gain`` and ``claim`` of one description (see the module docstring)."""
    text = author_text(body)
    gains = extract_pr_gains("\n" + body, repo=FULL[repo]).measurements
    gain = any((m.usable_speedup or 0.0) > 1.02 for m in gains)
    return {
        "gain": gain,
        "claim": bool(PERF_CLAIM_RE.search(text)),
        "long": len(text) >= MIN_BODY,
    }


Variant = Callable[[bool, dict[str, bool] | None], bool]


def _a(title: bool, s: dict[str, bool] | None) -> bool:
    return title or (s is not None and s["gain"])


def _b(title: bool, s: dict[str, bool] | None) -> bool:
    if s is not None and title and s["long"] and not (s["gain"] or s["claim"]):
        return False
    return _a(title, s)


def _c(title: bool, s: dict[str, bool] | None) -> bool:
    return title or (s is not None and (s["gain"] or s["claim"]))


def _d(title: bool, s: dict[str, bool] | None) -> bool:
    if s is not None and title and s["long"] and not (s["gain"] or s["claim"]):
        return False
    return _c(title, s)


VARIANTS: dict[str, Variant] = {
    "title": lambda title, s: title,
    "A": _a,
    "B": _b,
    "C": _c,
    "D": _d,
}


def _rows() -> list[dict]:
    rows = [r for r in csv.DictReader(SAMPLE.open()) if r["round"] in ROUNDS]
    subj = subjects(rows, {r: source(r) for r in SOURCES})
    for r in rows:
        r["subject"] = subj[r["sha"]]
        r["pr"] = str(perf_filter.pr_number(r["subject"]) or "")
    return rows


def write_manifest(rows: list[dict]) -> None:
    """The committed list: which PR each sample commit is, and the text used (hash only)."""
    with MANIFEST.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["repo", "sha", "round", "pr", "url", "found", "n_chars", "sha256"])
        for r in rows:
            path = body_path(r["repo"], r["pr"], r["sha"])
            text = path.read_text("utf-8") if path.is_file() else None
            url = f"https://github.com/{FULL[r['repo']]}/pull/{r['pr']}" if r["pr"] else ""
            w.writerow(
                [
                    r["repo"],
                    r["sha"],
                    r["round"],
                    r["pr"],
                    url,
                    "true" if text is not None else "false",
                    len(text) if text is not None else "",
                    hashlib.sha256(text.encode()).hexdigest() if text is not None else "",
                ]
            )
    print(f"wrote {MANIFEST}")


def fetch(token: str) -> None:
    """Refill the cache from GitHub (PyGithub) for the PRs the manifest says were found.

    Search excerpts are a prefix of the body, so the fetched body is cut to ``n_chars`` and
    kept only when its sha256 is the manifest's (the description was not edited since).
    """
    from github import Auth, Github, GithubException

    gh = Github(auth=Auth.Token(token), retry=None)
    CACHE.mkdir(parents=True, exist_ok=True)
    for row in csv.DictReader(MANIFEST.open()):
        if row["found"] != "true" or not row["pr"]:
            continue
        path = body_path(row["repo"], row["pr"], row["sha"])
        try:
            body = gh.get_repo(FULL[row["repo"]]).get_pull(int(row["pr"])).body or ""
        except GithubException as exc:
            print(f"{row['repo']}#{row['pr']}: GitHub error {exc.status}")
            continue
        text = body.replace("\r\n", "\n")[: int(row["n_chars"])].rstrip()
        if hashlib.sha256(text.encode()).hexdigest() != row["sha256"]:
            print(f"{row['repo']}#{row['pr']}: body changed since it was read; {path} not written")
            continue
        path.write_text(text, encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--manifest", action="store_true", help="write data/perf_filter_bodies.csv")
    ap.add_argument("--fetch", action="store_true", help="refill the cache from GitHub")
    ap.add_argument("--errors", default="", help="list the errors of a variant on round 5")
    args = ap.parse_args()
    if args.fetch:
        fetch(os.environ["GITHUB_TOKEN"])
        return
    rows = _rows()
    if args.manifest:
        write_manifest(rows)
    for r in rows:
        path = body_path(r["repo"], r["pr"], r["sha"])
        r["signals"] = signals(path.read_text("utf-8"), r["repo"]) if path.is_file() else None
        r["title"] = perf_filter.match_title(r["subject"]) is not None
    for rnd in ROUNDS:
        part = [r for r in rows if r["round"] == rnd]
        found = sum(r["signals"] is not None for r in part)
        print(f"round {rnd}: {len(part)} commits, description found for {found}")
        chosen = report_variants(part, VARIANTS)
        if rnd == "4":
            print(f"  chosen on round 4 (best F1): {chosen}")
    if args.errors:
        report_errors(rows, VARIANTS[args.errors])


if __name__ == "__main__":
    main()
