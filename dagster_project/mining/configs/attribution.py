"""Which PR last changed each config file's content: one rename-aware history pass.

The naive answer, the newest commit touching the current path, is wrong for 93% of SGLang
files: it lands on the refactor PRs that moved whole directories (#23019, #24004, #30784).
``git log --follow`` is per file (slow) and its copy detection hops to unrelated similar
JSONs. So we run ONE ``git log -M --raw`` over every directory the configs ever lived in
and walk it newest to oldest with a map ``name at this point in history → HEAD path``
(configs.md §6): a pure move (same blob on both sides) re-keys the map and walks on; an
add, a content modification or an inexact rename is the answer. Mode-only changes keep
the blob and are skipped too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import polars as pl

from dagster_project.mining.configs.specs import CONFIG_DIRS, PR_URL_BASE
from dagster_project.mining.git import GitRepo

#: Version of which commit a config file is attributed to. Bump it whenever mined output changes:
#: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "2"

ATTRIBUTION_SCHEMA: dict[str, pl.DataType] = {
    "repo": pl.String(),
    "path": pl.String(),  # path at the ref
    "pr_sha": pl.String(),
    "pr_number": pl.Int64(),
    "pr_url": pl.String(),
    "pr_date": pl.String(),  # committer date (when it landed), ISO 8601
    "pr_title": pl.String(),
    "pr_path": pl.String(),  # the file's name in that commit (differs after moves)
    "pr_blob_oid": pl.String(),
    "moves_followed": pl.Int64(),  # pure renames walked through to get there
    "format_only_skipped": pl.Int64(),  # changes with equal parsed JSON walked through
}

_PR_RE = re.compile(r"\(#(\d+)\)\s*$")
_MERGE_PR_RE = re.compile(r"^Merge pull request #(\d+)\b")
_ZERO = "0" * 40
_LOG_FORMAT = "@@%H%x09%cI%x09%s"


def pr_number_of(subject: str) -> int | None:
    """The PR number of a squash-merge subject: the LAST ``(#N)`` at its end.

    Subjects such as "… (RFC #29630, …) (#30784)" or "… after #23019 (#24004)" mention
    other numbers; only the trailing one is the PR. Classic merge commits say
    "Merge pull request #N from …". Direct pushes have none.
    """
    m = _PR_RE.search(subject)
    if m:
        return int(m.group(1))
    m = _MERGE_PR_RE.match(subject)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class RawChange:
    """One ``--raw`` line: ``status`` is the letter, ``score`` the similarity (R/C)."""

    old_mode: str
    new_mode: str
    old_oid: str
    new_oid: str
    status: str
    score: int | None
    path: str
    old_path: str | None = None


@dataclass(frozen=True)
class LogCommit:
    sha: str
    date: str
    subject: str
    changes: tuple[RawChange, ...]


def parse_raw_log(data: bytes) -> Iterator[LogCommit]:
    """Parse ``git log -z --raw --format=@@%H%x09%cI%x09%s`` output.

    With ``-z`` every path is NUL-terminated and never quoted, so names with spaces,
    brackets or non-ASCII bytes come through exactly.
    """
    tokens = data.split(b"\0")
    i = 0
    head: tuple[str, str, str] | None = None
    changes: list[RawChange] = []
    while i < len(tokens):
        tok = tokens[i].lstrip(b"\n")
        i += 1
        if tok.startswith(b"@@"):
            if head is not None:
                yield LogCommit(*head, tuple(changes))
            sha, date, subject = tok[2:].decode("utf-8", "replace").split("\t", 2)
            head, changes = (sha, date, subject), []
        elif tok.startswith(b":"):
            old_mode, new_mode, old_oid, new_oid, status = tok[1:].decode().split()
            letter, score = status[0], (int(status[1:]) if len(status) > 1 else None)
            if letter in "RC":
                src = tokens[i].decode("utf-8", "surrogateescape")
                dst = tokens[i + 1].decode("utf-8", "surrogateescape")
                i += 2
                changes.append(
                    RawChange(old_mode, new_mode, old_oid, new_oid, letter, score, dst, src)
                )
            else:
                path = tokens[i].decode("utf-8", "surrogateescape")
                i += 1
                changes.append(RawChange(old_mode, new_mode, old_oid, new_oid, letter, score, path))
    if head is not None:
        yield LogCommit(*head, tuple(changes))


def _pathspecs(repo_name: str, paths: Sequence[str]) -> list[str]:
    """Every config directory ever, plus the directories of any path outside them."""
    dirs = list(CONFIG_DIRS.get(repo_name, []))
    for p in paths:
        parent = p.rsplit("/", 1)[0] if "/" in p else ""
        if parent and not any(parent == d or parent.startswith(d + "/") for d in dirs):
            dirs.append(parent)
    return dirs


def _prefetch_rename_blobs(repo: GitRepo, ref: str, specs: list[str]) -> None:
    """Fetch, in one batch, the blobs inexact rename detection will read in a blobless clone.

    Rename scoring reads the content of files deleted and added in the same commit;
    without this a partial clone would lazily fetch them one round trip at a time.
    """
    if not repo.is_partial():
        return
    out = repo.run(
        [
            "log",
            "-z",
            "--raw",
            "--no-abbrev",
            "--no-renames",
            f"--format={_LOG_FORMAT}",
            ref,
            "--",
            *specs,
        ]
    )
    want: list[str] = []
    for commit in parse_raw_log(out):
        adds = [c.new_oid for c in commit.changes if c.status == "A"]
        dels = [c.old_oid for c in commit.changes if c.status == "D"]
        if adds and dels:
            want += adds + dels
    repo.prefetch_blobs(want)


def attribute_config_prs(
    repo: GitRepo,
    repo_name: str,
    ref: str,
    paths: list[str],
    *,
    pr_url_base: str | None = None,
) -> pl.DataFrame:
    """For each path at ``ref``: the newest commit that changed its CONTENT, and its PR.

    One ``git -c diff.renameLimit=0 log -M --raw`` over every config directory the repo
    ever had. Paths whose history cannot be resolved (not under any of the directories)
    come back with null PR fields rather than being dropped.
    """
    if not paths:
        return pl.DataFrame(schema=ATTRIBUTION_SCHEMA)
    base = pr_url_base if pr_url_base is not None else PR_URL_BASE.get(repo_name)
    specs = _pathspecs(repo_name, paths)
    _prefetch_rename_blobs(repo, ref, specs)
    out = repo.run(
        [
            "log",
            "-z",
            "-M",
            "--raw",
            "--no-abbrev",
            "--topo-order",
            f"--format={_LOG_FORMAT}",
            ref,
            "--",
            *specs,
        ],
        config=("diff.renameLimit=0",),
    )
    commits = list(parse_raw_log(out))
    # Changes that leave the parsed JSON equal (whitespace, key order, a trailing newline)
    # are walked through like pure moves. Which ones they are needs the blobs, so walk,
    # read the old/new blobs of the changes found (one batch), mark the equal ones and
    # walk again; each round only re-reads what it newly found (usually one round).
    format_only: set[tuple[str, str]] = set()  # (commit sha, path then)
    checked: set[tuple[str, str]] = set()
    while True:
        found, moves, skipped = _walk(commits, paths, format_only)
        todo = [
            (c, ch)
            for c, ch in found.values()
            if (c.sha, ch.path) not in checked
            and ch.status in "MR"
            and ch.old_oid != _ZERO
            and ch.old_oid != ch.new_oid
        ]
        if not todo:
            break
        checked.update((c.sha, ch.path) for c, ch in todo)
        oids = [o for _, ch in todo for o in (ch.old_oid, ch.new_oid)]
        repo.prefetch_blobs(oids)
        blobs = repo.read_blobs(oids)
        newly = {
            (c.sha, ch.path)
            for c, ch in todo
            if _same_json(blobs.get(ch.old_oid), blobs.get(ch.new_oid))
        }
        if not newly:
            break
        format_only |= newly

    rows = []
    for p in dict.fromkeys(paths):
        hit = found.get(p)
        if hit is None:
            rows.append(
                {
                    "repo": repo_name,
                    "path": p,
                    "moves_followed": moves.get(p, 0),
                    "format_only_skipped": skipped.get(p, 0),
                }
            )
            continue
        commit, ch = hit
        number = pr_number_of(commit.subject)
        rows.append(
            {
                "repo": repo_name,
                "path": p,
                "pr_sha": commit.sha,
                "pr_number": number,
                "pr_url": f"{base}{number}" if number is not None and base else None,
                "pr_date": commit.date,
                "pr_title": commit.subject,
                "pr_path": ch.path,
                "pr_blob_oid": ch.new_oid,
                "moves_followed": moves[p],
                "format_only_skipped": skipped.get(p, 0),
            }
        )
    return pl.DataFrame(rows, schema=ATTRIBUTION_SCHEMA)


def _same_json(a: bytes | None, b: bytes | None) -> bool:
    """True when both blobs parse to equal JSON (a formatting-only change)."""
    if a is None or b is None:
        return False
    try:
        return json.loads(a) == json.loads(b)
    except (ValueError, RecursionError):
        return False


def _walk(
    commits: list[LogCommit], paths: Sequence[str], format_only: set[tuple[str, str]]
) -> tuple[dict[str, tuple[LogCommit, RawChange]], dict[str, int], dict[str, int]]:
    """Newest to oldest: the change that made each path's content, moves followed.

    Changes in ``format_only`` are followed like pure moves (counted per path).
    """
    tracking: dict[str, str] = {p: p for p in dict.fromkeys(paths)}  # name then -> HEAD path
    moves: dict[str, int] = dict.fromkeys(tracking, 0)
    skipped: dict[str, int] = {}
    found: dict[str, tuple[LogCommit, RawChange]] = {}
    for commit in commits:
        if not tracking:
            break
        # Decide against the names as they were just after this commit, then apply, so
        # a commit that swaps or chains names (a→b, b→c) is not walked twice.
        renamed: dict[str, str] = {}
        done: list[str] = []
        for ch in commit.changes:
            head_path = tracking.get(ch.path)
            if head_path is None or ch.status == "D":
                continue
            same = ch.old_oid == ch.new_oid
            if (same or (commit.sha, ch.path) in format_only) and ch.status in "RM":
                if not same:
                    skipped[head_path] = skipped.get(head_path, 0) + 1
                if ch.status == "R" and ch.old_path is not None:  # move: follow it
                    done.append(ch.path)
                    renamed[ch.old_path] = head_path
                    moves[head_path] += 1
                continue  # mode-only or formatting-only change: same content
            done.append(ch.path)
            found[head_path] = (commit, ch)
        for name in done:
            tracking.pop(name, None)
        tracking.update(renamed)
    return found, moves, skipped


VERIFY_SCHEMA: dict[str, pl.DataType] = {
    "repo": pl.String(),
    "path": pl.String(),
    "pr_sha": pl.String(),
    "changed_content": pl.Boolean(),  # blob at the commit differs from the parent's
    "matches_ref": pl.Boolean(),  # content at the commit equals the ref's (same blob or JSON)
}


def verify_attribution(
    repo: GitRepo, attributions: pl.DataFrame, ref: str = "HEAD"
) -> pl.DataFrame:
    """Check each attribution against the object store, with one ``cat-file --batch-check``.

    ``changed_content``: the file's blob at the found commit differs from its blob at the
    first parent (or the parent has no such file: an add or an inexact rename).
    ``matches_ref``: that blob is still the file's content at ``ref``, i.e. nothing after the
    commit changed a value (only pure moves, which keep the blob, and formatting-only
    changes, which keep the parsed JSON).
    """
    rows = attributions.filter(pl.col("pr_sha").is_not_null())
    names: list[str] = []
    for sha, pr_path, path in rows.select("pr_sha", "pr_path", "path").iter_rows():
        names += [f"{sha}:{pr_path}", f"{sha}^:{pr_path}", f"{ref}:{path}"]
    oids: list[str | None] = []
    if names:
        out = repo.run(
            ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
            input=("\n".join(names) + "\n").encode(),
        )
        for line in out.decode().splitlines():
            parts = line.split()
            oids.append(parts[0] if len(parts) == 2 and parts[1] == "blob" else None)
    # Blobs that differ from the ref's only count as a match when their JSON is equal
    # (the formatting-only changes attribution walks through).
    differ = [
        o
        for k in range(rows.height)
        for o in oids[3 * k : 3 * k + 3 : 2]
        if oids[3 * k] is not None and oids[3 * k] != oids[3 * k + 2]
    ]
    blobs = repo.read_blobs([o for o in differ if o]) if differ else {}
    result = []
    for k, (r, sha, path) in enumerate(rows.select("repo", "pr_sha", "path").iter_rows()):
        at, parent, head = oids[3 * k : 3 * k + 3]
        same = at is not None and (at == head or _same_json(blobs.get(at), blobs.get(head or "")))
        result.append(
            {
                "repo": r,
                "path": path,
                "pr_sha": sha,
                "changed_content": at is not None and at != parent,
                "matches_ref": same,
            }
        )
    return pl.DataFrame(result, schema=VERIFY_SCHEMA)
