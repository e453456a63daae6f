"""Reverts, relands and near-duplicate rows of kernel_commits: this rule's one home.

Why: a reverted perf commit is a change upstream decided to undo, and a reland that repeats
an earlier change is the same task twice (in train and test it would leak the answer).
Users filter on ``reverted_by`` and ``duplicate_of`` (README), so both must find what the
history says, not only its tidiest spellings.

Reverts. A revert names its target in one of these ways, all read from the message only:

* ``git revert``'s body line "This reverts commit <sha>";
* a quoted title, as GitHub's revert button writes it: ``Revert "T (#N)" (#M)``, but also
  without the ``(#N)`` (squash merges quote the title), without the closing quote
  (hand-edited subjects) and behind tags (``[Bugfix] Revert "T"``);
* PR numbers: ``Revert #N``, ``Reverts #N and #K``, ``Revert PR N``, ``.../pull/N``, or
  GitHub's revert-PR body line ``Reverts owner/repo#N``;
* an abbreviated sha in the subject (``revert 9ad17b6…``), or the bare title after a
  ``[Revert]`` tag.

A target must be older than its revert: a PR number (or a title's PR number) at or above
the revert's own is never taken, so a reland that reuses the title is not "reverted" by
the revert that came before it. The newest revert of a target wins, and a revert that was
itself reverted (a reland by revert) no longer counts.

Relands. A commit whose title carries a reland marker (``Reland``, ``Re-land``,
``[Redo]``, ``[resubmit]``, ``[Rework]``, ``[Revision]``, ``resubmit again`` …) is linked
to the commit it lands again: the newest older commit with the same title once the
markers are removed, followed back to the first landing (``reland_roots``).

Near-duplicates. A row is ``duplicate_of`` the earliest earlier row of the same repo and
path whose changed lines (the set of added and removed lines, whitespace-collapsed) have
Jaccard similarity ``>= DUPLICATE_SIMILARITY`` with its own, or that has the same
before/after. The threshold was chosen on the three mirrors (benchmarks/RESULTS.md,
issue 41): every same-path pair at or above 0.6 was a reland, resubmit or the same edit
landed twice; the next pair below (0.56) was a different change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import polars as pl

from dagster_project.mining.git import GitRepo

#: Version of the revert, reland and near-duplicate rules. Bump it whenever mined output
#: changes: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "1"

#: Changed-line Jaccard similarity at or above which a same-path row is a near-duplicate.
DUPLICATE_SIMILARITY = 0.6
#: The same, between two rows of one reland chain (the commit says it lands the other again).
RELAND_SIMILARITY = 0.5

_TAGS = r"(?:\[[^\]]*\]\s*|\w+(?:\([^)]*\))?!?:\s+)*"
#: A revert subject: optional tags / conventional prefix, then the revert word.
_REVERT_RE = re.compile(rf"^{_TAGS}(?:partial(?:ly)?\s+)?revert(?:s|ed)?\b[\s:]*(.*)$", re.I)
#: ``[Revert] T``: the tag is the verb, the rest the reverted title.
_REVERT_TAG_RE = re.compile(r"^(?:\[[^\]]*\]\s*)*\[revert\]\s*(.*)$", re.I)
_BODY_SHA_RE = re.compile(r"This reverts commit ([0-9a-f]{40})")
_BODY_PR_RE = re.compile(r"^\s*Reverts?\s+[\w.-]+/[\w.-]+#(\d+)", re.I | re.M)
_OWN_PR_RE = re.compile(r"\s*\(#(\d+)\)\s*$")
_PR_REF_RE = re.compile(r"(?:#|\bPR\s*#?\s*|/pull/)(\d+)", re.I)
_SHA_REF_RE = re.compile(r"\b[0-9a-f]{7,40}\b")
_RELAND_RE = re.compile(
    r"\[?\b(?:re-?land(?:ed|ing)?|redo|resubmit(?:ted)?(?:\s+again)?|rework|revision"
    r"|re-?apply|reapply)\b\]?:?\s*(?:of\s+)?|[.,]?\s*\battempt\s*#?\d+\b",
    re.I,
)

_TRUNCATED_RE = re.compile(r"(?:…|\.\.\.)$")
#: A cut-short title must keep this many characters to be matched by its start.
_MIN_PREFIX = 20

_REV_FORMAT = "%x01%H%x1f%s%x1f%B%x02"


def is_revert_message(subject: str, body: str) -> bool:
    """Does this commit message say it reverts something (the commits this rule reads)?"""
    return bool(
        _REVERT_RE.match(subject) or _REVERT_TAG_RE.match(subject) or _BODY_SHA_RE.search(body)
    )


def _norm_title(text: str) -> str:
    """A title compared across spellings: no ``(#N)``, quotes, case or extra spaces."""
    text = _OWN_PR_RE.sub("", text.strip().strip('"').strip())
    return " ".join(text.strip().strip('"').rstrip(".").split()).lower()


def _split_own(subject: str) -> tuple[str, int | None]:
    """The subject without its trailing ``(#M)``, and M."""
    m = _OWN_PR_RE.search(subject)
    return (subject[: m.start()], int(m.group(1))) if m else (subject, None)


class _Index:
    """Lookups over the known subjects (kept commits and the reverts themselves)."""

    def __init__(self, subjects: Iterable[tuple[str, str]]) -> None:
        self.by_pr: dict[int, list[str]] = {}
        self.by_title: dict[str, list[tuple[int | None, int, str]]] = {}
        self.shas: list[str] = []
        for i, (sha, subject) in enumerate(subjects):
            rest, pr = _split_own(subject.strip())
            if pr is not None:
                self.by_pr.setdefault(pr, []).append(sha)
            self.by_title.setdefault(_norm_title(rest), []).append((pr, -i, sha))
            self.shas.append(sha)

    def pr(self, number: int, before: int | None) -> list[str]:
        if before is not None and number >= before:
            return []
        return self.by_pr.get(number, [])[:1]

    def title(self, text: str, before: int | None) -> list[str]:
        """The newest commit with this title older than the revert (by PR number; without
        one, the first listed: callers list newest first). A title
        GitHub cut short (``…`` or ``...`` at its end) matches the titles it starts."""
        key = _norm_title(text)
        cut = _TRUNCATED_RE.search(key)
        if cut and len(key) - len(cut.group(0)) >= _MIN_PREFIX:
            prefix = key[: cut.start()].rstrip()
            titles = [t for t in self.by_title if t.startswith(prefix)]
        else:
            titles = [key]
        found = [
            (pr or 0, order, sha)
            for t in titles
            for pr, order, sha in self.by_title.get(t, [])
            if before is None or pr is None or pr < before
        ]
        return [max(found)[2]] if found else []

    def sha_prefix(self, prefix: str) -> list[str]:
        hits = [s for s in self.shas if s.startswith(prefix)]
        return hits if len(hits) == 1 else []


def _quoted(rest: str) -> tuple[str, str] | None:
    """(the quoted title, the text after it) when ``rest`` holds a quote; a missing
    closing quote takes the rest of the subject."""
    start = rest.find('"')
    if start < 0:
        return None
    end = rest.rfind('"')
    if end <= start:
        return rest[start + 1 :], ""
    return rest[start + 1 : end], rest[:start] + " " + rest[end + 1 :]


def _quote_targets(quote: str, index: _Index, own: int | None) -> list[str]:
    inner, number = _split_own(quote)
    if number is not None:
        hit = index.pr(number, own)
        if hit:
            return hit
    return index.title(inner, own)


def revert_targets(sha: str, subject: str, body: str, index: _Index) -> list[str]:
    """Every commit of ``index`` that one revert message names (see the module docstring)."""
    shas = _BODY_SHA_RE.findall(body)
    if shas:
        return [s for s in shas if s != sha]
    rest, own = _split_own(subject.strip())
    tag = _REVERT_TAG_RE.match(rest)
    m = tag or _REVERT_RE.match(rest)
    if m is None:
        return []
    text = m.group(1)
    out: list[str] = []
    quoted = _quoted(text)
    if quoted is not None:
        out += _quote_targets(quoted[0], index, own)
        text = quoted[1]
    for n in [*_PR_REF_RE.findall(text), *_BODY_PR_RE.findall(body)]:
        out += index.pr(int(n), own)
    for prefix in _SHA_REF_RE.findall(text):
        out += index.sha_prefix(prefix)
    if not out and tag is not None:
        out += index.title(text, own)
    return [t for t in dict.fromkeys(out) if t != sha]


def resolve_reverts(
    found: Sequence[tuple[str, str, str]], subjects: dict[str, str]
) -> dict[str, str]:
    """{target: revert} from revert commits ``found`` (sha, subject, body; newest first)
    for the commits in ``subjects`` (sha -> subject)."""
    # Reverts can be targets too (a revert of a revert), so every subject is known first.
    index = _Index([*subjects.items(), *((s, subj) for s, subj, _ in found)])
    reverted: dict[str, str] = {}
    for sha, subject, body in found:  # newest first: the newest revert of a target wins
        for target in revert_targets(sha, subject, body, index):
            reverted.setdefault(target, sha)
    return {t: r for t, r in reverted.items() if r not in reverted and t in subjects}


def revert_log_args(head: str) -> list[str]:
    """The one message-only ``git log`` that lists every candidate revert up to ``head``.

    No pathspec: a message-only walk reads no tree (a pathspec would diff every commit);
    reverts of other files simply never match a perf commit.
    """
    return [
        "log",
        "--no-merges",
        "-E",
        "-i",
        "--grep=revert|This reverts commit",
        "--no-color",
        f"--format={_REV_FORMAT}",
        head,
    ]


def parse_revert_log(raw: bytes) -> list[tuple[str, str, str]]:
    """(sha, subject, body) of the revert commits in ``revert_log_args`` output."""
    found: list[tuple[str, str, str]] = []
    for chunk in raw.split(b"\x01")[1:]:
        header, _, _ = chunk.partition(b"\x02")
        fields = header.decode("utf-8", "replace").split("\x1f", 2)
        if len(fields) == 3 and is_revert_message(fields[1], fields[2]):
            found.append((fields[0], fields[1].strip(), fields[2]))
    return found


def find_reverts(repo: GitRepo, head: str, subjects: dict[str, str]) -> dict[str, str]:
    """{reverted sha: revert sha} for the commits in ``subjects`` (sha -> subject), from
    every revert reachable from ``head``. One ``git log --grep``: it reads no tree and no
    blob."""
    raw = repo.run(revert_log_args(head), config=("log.showSignature=false",))
    return resolve_reverts(parse_revert_log(raw), subjects)


def attach_reverts(repo: GitRepo, head: str, commits: pl.DataFrame) -> pl.DataFrame:
    """``commits`` with ``reverted_by`` set from the history up to ``head``."""
    if commits.is_empty():
        return commits
    newest_first = (
        commits.sort("authored_at", descending=True)
        if "authored_at" in commits.columns
        else commits
    )
    reverts = find_reverts(repo, head, dict(newest_first.select("sha", "subject").iter_rows()))
    return commits.with_columns(
        reverted_by=pl.col("sha").replace_strict(reverts, default=None, return_dtype=pl.Utf8)
    )


# -- relands ---------------------------------------------------------------------------------


def reland_title(subject: str) -> str | None:
    """The landed-again title of a reland subject (markers removed), None for others."""
    rest, _ = _split_own(subject.strip())
    if not _RELAND_RE.search(rest):
        return None
    stripped = _RELAND_RE.sub(" ", rest)
    return _norm_title(re.sub(r"\[\s*\]", " ", stripped))


def reland_roots(subjects: dict[str, str]) -> dict[str, str]:
    """{reland sha: sha of the first landing} for the relands among ``subjects``.

    The original is the PR the reland names (``[Redo] #N``, ``redo of #N``), else the
    newest older commit (by PR number) whose title, markers removed, is the reland's; a
    reland of a reland is followed back to the first landing.
    """
    by_title: dict[str, list[tuple[int, str]]] = {}
    by_pr: dict[int, str] = {}
    for sha, subject in subjects.items():
        rest, pr = _split_own(subject.strip())
        key = reland_title(subject) or _norm_title(rest)
        by_title.setdefault(key, []).append((pr or 0, sha))
        if pr is not None:
            by_pr[pr] = sha
    parent: dict[str, str] = {}
    for sha, subject in subjects.items():
        landed = reland_title(subject)
        if landed is None:
            continue
        rest, own = _split_own(subject.strip())
        named = [by_pr[n] for n in map(int, _PR_REF_RE.findall(rest)) if n in by_pr]
        older = [
            (p, s) for p, s in by_title.get(landed, []) if s != sha and (own is None or p < own)
        ]
        if named or older:
            parent[sha] = named[0] if named else max(older)[1]
    roots: dict[str, str] = {}
    for sha in parent:
        root, seen = sha, {sha}
        while root in parent and parent[root] not in seen:
            root = parent[root]
            seen.add(root)
        roots[sha] = root
    return roots


# -- near-duplicates -------------------------------------------------------------------------


def changed_line_texts(diff: str | None) -> frozenset[tuple[str, str]]:
    """The added and removed lines of a unified diff's hunks, whitespace-collapsed, blank
    ones out (``diffs.changed_lines`` gives their numbers; this compares their text)."""
    out: set[tuple[str, str]] = set()
    in_hunks = False
    for line in (diff or "").splitlines():
        if line.startswith("@@"):
            in_hunks = True
        elif line.startswith("diff --git"):
            in_hunks = False
        elif in_hunks and line[:1] in ("+", "-"):
            text = " ".join(line[1:].split())
            if text:
                out.add((line[0], text))
    return frozenset(out)


def line_similarity(a: frozenset[tuple[str, str]], b: frozenset[tuple[str, str]]) -> float:
    """Jaccard similarity of two changed-line sets (0 when both are empty)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def duplicate_ids(rows: pl.DataFrame, roots: dict[str, str] | None = None) -> pl.Series:
    """For each row, the id of the earliest earlier row of the same repo and path that it
    repeats: the same before/after, or changed lines at least ``DUPLICATE_SIMILARITY``
    alike (``RELAND_SIMILARITY`` when both commits are of one reland chain: ``roots``, see
    ``reland_roots``); null for rows that repeat nothing. ``rows`` needs id, sha, repo,
    path, authored_at, before_code, after_code and diff."""
    if rows.is_empty():
        return pl.Series("duplicate_of", [], dtype=pl.String)
    roots = roots or {}
    order = rows.with_row_index("_pos").sort("authored_at", "id")
    seen: dict[tuple[str, str], list[tuple[str, str, str, str, frozenset]]] = {}
    out: dict[int, str | None] = {}
    for r in order.iter_rows(named=True):
        lines = changed_line_texts(r["diff"])
        root = roots.get(r["sha"], r["sha"])
        earlier = seen.setdefault((r["repo"], r["path"]), [])
        out[r["_pos"]] = next(
            (
                oid
                for oid, osha, before, after, olines in earlier
                if osha != r["sha"]
                and (
                    (before == r["before_code"] and after == r["after_code"])
                    or _alike(lines, olines, roots.get(osha, osha) == root)
                )
            ),
            None,
        )
        earlier.append((r["id"], r["sha"], r["before_code"], r["after_code"], lines))
    return pl.Series("duplicate_of", [out[i] for i in range(rows.height)], dtype=pl.String)


def _alike(a: frozenset, b: frozenset, same_chain: bool) -> bool:
    threshold = RELAND_SIMILARITY if same_chain else DUPLICATE_SIMILARITY
    return bool(a) and line_similarity(a, b) >= threshold
