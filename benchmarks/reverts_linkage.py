"""How many upstream reverts of kept commits does ``reverted_by`` link (issue 41)?

The reference set is found here, independently of the miner's rule
(``dagster_project/mining/commits/reverts.py``): its own ``git log --grep=revert`` over each
mirror up to the lake's watermark head, and its own message parsing, written separately and
deliberately broader (any ``revert`` word in the subject, every ``#N`` / ``PR N`` /
``pull/N`` / hex token / quoted text in it, GitHub's ``Reverts owner/repo#N`` body line).
A revert *names a kept commit* when one of those references is a commit of
``raw.perf_commits`` older than the revert. Reverts whose subject only mentions reverting
(``Fix X by reverting Y``) are counted apart: they are not reverts of the named commit.

Then the miner's own rule is run on the same mirror and heads, and every (revert, kept
target) pair is scored: linked when the target has a ``reverted_by``. A pair whose revert
was itself reverted (a reland by revert) is expected unlinked and reported apart.

    KERNELHOUSE_HOME=/tmp/kh-exec python benchmarks/reverts_linkage.py \
        --mirror vllm=/path/vllm.git --mirror sglang=... --mirror flashinfer=... [--sample 30]

``linked_by_lake`` counts the pairs the lake's stored ``reverted_by`` links (the rule
version that built it), for a before/after. Prints a JSON summary, the misses, and a
seeded random sample of the miner's links for a hand check (revert subject beside the
target's, and whether the target is in the revert's history).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from dagster_project.mining.commits.reverts import find_reverts
from dagster_project.mining.git import GitRepo

_TRAILING_PR = re.compile(r"\(#(\d+)\)\s*$")
_REFS = re.compile(r"(?:#|\bpr\s*#?\s*|pull/)(\d+)", re.I)
_HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
_QUOTED = re.compile(r'"([^"]*)"?')
_GH_BODY = re.compile(r"^\s*reverts?\s+\S+?#(\d+)", re.I | re.M)
_BODY_SHA = re.compile(r"reverts commit ([0-9a-f]{40})", re.I)


@dataclass
class Revert:
    sha: str
    subject: str
    body: str
    own: int | None
    leading: bool  # the subject's verb is "revert" (not "fix X by reverting")
    targets: set[str] = field(default_factory=set)


def _leading(subject: str) -> bool:
    """After bracket tags and a ``type(scope):`` prefix, does the subject start with a
    revert verb (or carry a ``[Revert]`` tag)?"""
    s = subject.strip()
    if "[revert]" in s.lower():
        return True
    while True:
        t = re.sub(r"^\[[^\]]*\]\s*", "", s)
        t = re.sub(r"^[a-z]+(\([^)]*\))?!?:\s+", "", t, flags=re.I)
        if t == s:
            break
        s = t
    low = s.lower()
    return low.startswith(("revert", "partial revert", "partially revert"))


def _norm(title: str) -> str:
    title = _TRAILING_PR.sub("", title.strip().strip('"'))
    return re.sub(r"\s+", " ", title).strip().strip('"').rstrip(".").lower()


def _log(git_dir: str, head: str) -> list[tuple[str, str, str]]:
    out = subprocess.run(
        [
            "git",
            f"--git-dir={git_dir}",
            "log",
            "--no-merges",
            "-i",
            "--grep=revert",
            "--format=%H%x00%s%x00%b%x1e",
            head,
        ],
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", "replace")
    found = []
    for rec in out.split("\x1e"):
        parts = rec.strip("\n").split("\x00")
        if len(parts) == 3:
            found.append((parts[0], parts[1], parts[2]))
    return found


class _Kept:
    """The kept commits by PR number and by normalised title."""

    def __init__(self, kept: dict[str, str]) -> None:
        self.kept = kept
        self.by_pr: dict[int, str] = {}
        self.by_title: dict[str, list[tuple[int, str]]] = {}
        for sha, subject in kept.items():
            m = _TRAILING_PR.search(subject)
            pr = int(m.group(1)) if m else None
            if pr is not None:
                self.by_pr[pr] = sha
            self.by_title.setdefault(_norm(subject), []).append((pr or 0, sha))

    def titled(self, match, own: int | None) -> set[str]:
        """The newest older kept commit whose title satisfies ``match``."""
        cands = [
            c
            for title, cs in self.by_title.items()
            if match(title)
            for c in cs
            if own is None or c[0] < own
        ]
        return {max(cands)[1]} if cands else set()

    def quoted(self, q: str, own: int | None) -> set[str]:
        qm = _TRAILING_PR.search(q)
        if qm and int(qm.group(1)) in self.by_pr:
            return {self.by_pr[int(qm.group(1))]}
        nq = _norm(q)
        cut = nq.rstrip("…").rstrip(".") if nq.endswith(("…", "...")) else None
        return self.titled(
            lambda t: t == nq or bool(cut and len(cut) >= 20 and t.startswith(cut)), own
        )

    def numbered(self, text: str, body: str, own: int | None) -> set[str]:
        found = set()
        for n in [*_REFS.findall(text), *_GH_BODY.findall(body)]:
            if int(n) in self.by_pr and (own is None or int(n) < own):
                found.add(self.by_pr[int(n)])
        for h in _HEX.findall(text):
            hits = [s for s in self.kept if s.startswith(h)]
            if len(hits) == 1:
                found.add(hits[0])
        return found


def _targets(k: _Kept, head: str, body: str, own: int | None) -> set[str]:
    targets = {s for s in _BODY_SHA.findall(body) if s in k.kept}
    for q in _QUOTED.findall(head):
        targets |= k.quoted(q, own)
    # A second, looser path: the first 40 characters of a kept title inside the subject.
    low = " ".join(head.lower().split())
    targets |= k.titled(lambda t: len(t) > 12 and t[:40] in low, own)
    targets |= k.numbered(_QUOTED.sub(" ", head), body, own)
    tag = re.search(r"\[revert\]\s*(.*)$", head, re.I)
    if tag and not targets:
        targets |= k.titled(lambda t: t == _norm(tag.group(1)), own)
    return targets


def reference_reverts(log, kept: dict[str, str]) -> list[Revert]:
    """Every revert-like commit of ``log`` with the kept commits it names."""
    k = _Kept(kept)
    out = []
    for sha, subject, body in log:
        m = _TRAILING_PR.search(subject)
        own = int(m.group(1)) if m else None
        head = subject[: m.start()] if m else subject
        if "revert" not in head.lower() and not _BODY_SHA.search(body):
            continue
        r = Revert(sha, subject, body, own, _leading(head) or bool(_BODY_SHA.search(body)))
        r.targets = _targets(k, head, body, own) - {sha}
        out.append(r)
    return out


def _reverted_reverts(reverts: list[Revert]) -> set[str]:
    """Reverts that a later revert undoes (by sha in the body or by quoting the subject)."""
    subjects = {_norm(r.subject): r.sha for r in reverts}
    undone = set()
    for r in reverts:
        for s in _BODY_SHA.findall(r.body):
            undone.add(s)
        for q in _QUOTED.findall(r.subject):
            inner = q
            if _norm(inner) in subjects:
                undone.add(subjects[_norm(inner)])
        # Revert "Revert "X"": the outer quote swallows the inner one.
        m = re.match(r'^\s*revert\s+"(revert\s+".*)"\s*(\(#\d+\))?\s*$', r.subject, re.I)
        if m and _norm(m.group(1)) in subjects:
            undone.add(subjects[_norm(m.group(1))])
    return undone & {r.sha for r in reverts}


def score_repo(
    name: str, git_dir: str, head: str, kept: dict[str, str], rows: set[str], stored: set[str]
):
    """Score the miner's rule on one mirror; ``stored``: targets the lake's own
    ``reverted_by`` links (the rule version the lake was built with)."""
    log = _log(git_dir, head)
    refs = reference_reverts(log, kept)
    undone = _reverted_reverts(refs)
    linked = find_reverts(GitRepo(Path(git_dir)), head, kept)
    pairs, misses, cancelled, mentions = [], [], [], []
    for r in refs:
        for t in sorted(r.targets):
            item = {
                "revert": r.sha,
                "revert_subject": r.subject,
                "target": t,
                "target_subject": kept[t],
                "in_rows": t in rows,
            }
            if not r.leading:
                mentions.append({**item, "miner": linked.get(t)})
            elif r.sha in undone:
                cancelled.append({**item, "miner": linked.get(t)})
            else:
                pairs.append(item)
                if t not in linked:
                    misses.append(item)
    return {
        "repo": name,
        "head": head,
        "revert_like_commits": len(refs),
        "pairs": len(pairs),
        "linked": len(pairs) - len(misses),
        "pairs_in_rows": sum(p["in_rows"] for p in pairs),
        "linked_in_rows": sum(p["in_rows"] and p["target"] in linked for p in pairs),
        "linked_by_lake": sum(p["target"] in stored for p in pairs),
        "cancelled_pairs": cancelled,
        "mention_pairs": mentions,
        "misses": misses,
        "miner_links": [{"target": t, "revert": r} for t, r in linked.items()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", action="append", required=True, help="repo=git-dir")
    ap.add_argument("--sample", type=int, default=30)
    ap.add_argument("--seed", type=int, default=41)
    args = ap.parse_args()
    home = os.environ.get("KERNELHOUSE_HOME", "data")
    con = duckdb.connect(f"{home}/lake.duckdb", read_only=True)
    results = []
    subjects_all: dict[str, str] = {}
    for spec in args.mirror:
        name, git_dir = spec.split("=", 1)
        head = con.execute(
            "SELECT head FROM raw.mining_watermarks WHERE repo = ?", [name]
        ).fetchone()[0]
        kept = dict(
            con.execute(
                "SELECT sha, subject FROM raw.perf_commits WHERE repo = ?", [name]
            ).fetchall()
        )
        rows = {
            s
            for (s,) in con.execute(
                "SELECT DISTINCT sha FROM datasets.kernel_commits WHERE repo = ?", [name]
            ).fetchall()
        }
        stored = {
            s
            for (s,) in con.execute(
                "SELECT sha FROM raw.perf_commits WHERE repo = ? AND reverted_by IS NOT NULL",
                [name],
            ).fetchall()
        }
        subjects_all |= kept
        results.append(score_repo(name, git_dir, head, kept, rows, stored))
    pairs = sum(r["pairs"] for r in results)
    linked = sum(r["linked"] for r in results)
    summary = {
        "per_repo": {
            r["repo"]: {
                k: r[k]
                for k in (
                    "head",
                    "revert_like_commits",
                    "pairs",
                    "linked",
                    "pairs_in_rows",
                    "linked_in_rows",
                    "linked_by_lake",
                )
            }
            | {
                "cancelled": len(r["cancelled_pairs"]),
                "mentions": len(r["mention_pairs"]),
                "miner_links": len(r["miner_links"]),
            }
            for r in results
        },
        "pairs": pairs,
        "linked": linked,
        "linked_share": round(linked / pairs, 4) if pairs else None,
        "linked_by_lake": sum(r["linked_by_lake"] for r in results),
    }
    print(json.dumps(summary, indent=1))
    for r in results:
        for m in r["misses"]:
            print(
                "MISS", r["repo"], m["revert"][:10], m["revert_subject"], "->", m["target_subject"]
            )
        for m in r["cancelled_pairs"]:
            print(
                "CANCELLED",
                r["repo"],
                m["revert_subject"],
                "->",
                m["target_subject"],
                "miner:",
                m["miner"],
            )
        for m in r["mention_pairs"]:
            print(
                "MENTION",
                r["repo"],
                m["revert_subject"],
                "->",
                m["target_subject"],
                "miner:",
                m["miner"],
            )
    links = [(r["repo"], x) for r in results for x in r["miner_links"]]
    subj = {}
    for spec in args.mirror:
        name, git_dir = spec.split("=", 1)
        shas = [x["revert"] for rn, x in links if rn == name]
        if shas:
            out = subprocess.run(
                ["git", f"--git-dir={git_dir}", "show", "-s", "--format=%H%x00%s", *shas],
                capture_output=True,
                check=True,
            ).stdout.decode()
            subj |= dict(line.split("\x00", 1) for line in out.splitlines() if "\x00" in line)
    dirs = dict(spec.split("=", 1) for spec in args.mirror)
    rng = random.Random(args.seed)
    for repo, x in rng.sample(links, min(args.sample, len(links))):
        # A true link's target is in the revert's history (checked, not assumed).
        older = (
            subprocess.run(
                [
                    "git",
                    f"--git-dir={dirs[repo]}",
                    "merge-base",
                    "--is-ancestor",
                    x["target"],
                    x["revert"],
                ],
                capture_output=True,
            ).returncode
            == 0
        )
        print(
            "LINK",
            repo,
            x["revert"][:10],
            "ancestor" if older else "NOT-ANCESTOR",
            subj.get(x["revert"]),
            "=>",
            subjects_all[x["target"]],
        )


if __name__ == "__main__":
    main()
