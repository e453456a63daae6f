"""Mine kernel_commits rows from one repository with a fixed, small number of git calls.

Why this shape (measured in ``shared/reference/commits.md`` §5): the dominant cost of
mining is reading blobs while walking history, so

1. :func:`find_perf_commits` runs ONE ``git log --raw --no-merges --no-renames`` restricted
   to the kernel pathspecs. ``--raw`` lists paths and blob ids without reading any blob
   (≈1 s for vLLM's 16k commits). Subjects are filtered by the title rule *before* their
   file lists are even parsed.
2. :func:`mine_commit_files` then needs the blobs of only the few hundred selected commits:
   one batched ``fetch`` when the clone is blobless, ONE ``cat-file --batch-check``
   (sizes), ONE ``cat-file --batch`` (contents) and ONE ``diff-tree --stdin -p`` (patches)
   for the whole repository, never one process per commit or per blob.

Row rules (card + reference §2): modified files only (``M``; added and deleted files have no
before/after pair); a commit with more than 10 modified kernel files is dropped whole (a
mass refactor is not an optimisation task); a file is dropped when either version exceeds
120 KiB (122,880 bytes, the reference's reading of "120 KB"), when it is binary, when more
than 800 lines change, or when either version is under a non-open-source NVIDIA licence.
Every dropped kernel file lands in the *excluded* frame with its reason, so nothing is
lost silently.

Representation: ``before_code``/``after_code``/``diff`` are ``str``; non-UTF-8 bytes are
decoded as U+FFFD on all three alike (see ``diffs.py``), which keeps the diff exact.
``title`` is the PR title (the subject without its trailing `` (#N)``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import polars as pl

from dagster_project.mining.commits import diffs
from dagster_project.mining.commits.kernel_body import touches_cpu_kernel, touches_kernel_body
from dagster_project.mining.commits.languages import classify_language
from dagster_project.mining.commits.license import detect_license, exclusion_reason, row_license
from dagster_project.mining.commits.mentions import code_mentions, extract_mentions
from dagster_project.mining.commits.perf_filter import (
    PR_NUMBER_RE,
    match_title,
    pr_number,
    pr_title,
)
from dagster_project.mining.commits.prompt import build_prompt
from dagster_project.mining.commits.reverts import (
    attach_reverts,
    is_revert_message,
    resolve_reverts,
)
from dagster_project.mining.commits.specs import RepoSpec, is_binding_file
from dagster_project.mining.configs.names import ConfigNameError, normalise_gpu, parse_config_name
from dagster_project.mining.configs.specs import CONFIG_DIRS
from dagster_project.mining.git import GitRepo

#: Version of file limits and row rules (Limits, modified-only, exclusion reasons).
#: Bump it whenever mined output changes: it is part of the miner version
#: (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "2"

# -- limits ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """The card's file filters (``≤ 10`` files per commit, ``≤ 120 KB``, ``≤ 800`` lines)."""

    max_files: int = 10
    max_bytes: int = 122_880
    max_lines: int = 800


DEFAULT_LIMITS = Limits()

EXCLUSION_REASONS = (
    "too_many_files",
    "too_large",
    "binary",
    "too_many_lines",
    "license_tensorrt",
    "license_proprietary",
    "license_unlisted",
    "added_file",
    "deleted_file",
    "no_diff",
)

# -- schemas --------------------------------------------------------------------------------

UTC_TIME = pl.Datetime("us", "UTC")
FILE_STRUCT = pl.Struct(
    {
        "path": pl.Utf8,
        "status": pl.Utf8,
        "kind": pl.Utf8,
        "before_oid": pl.Utf8,
        "after_oid": pl.Utf8,
    }
)
PERF_COMMITS_SCHEMA: dict[str, pl.DataType] = {
    "repo": pl.Utf8(),
    "sha": pl.Utf8(),
    "parent": pl.Utf8(),
    "authored_at": UTC_TIME,
    "subject": pl.Utf8(),
    "title": pl.Utf8(),
    "message": pl.Utf8(),
    "pr_number": pl.Int64(),
    "rule": pl.Utf8(),
    "rule_match": pl.Utf8(),
    "files": pl.List(FILE_STRUCT),
    "reverted_by": pl.Utf8(),  # the upstream revert at the snapshot (``find_reverts``)
}
ROWS_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.Utf8(),
    "repo": pl.Utf8(),
    "sha": pl.Utf8(),
    "pr_number": pl.Int64(),
    "pr_url": pl.Utf8(),
    "title": pl.Utf8(),
    "rule": pl.Utf8(),
    "authored_at": UTC_TIME,
    "path": pl.Utf8(),
    "language": pl.Utf8(),
    "before_code": pl.Utf8(),
    "after_code": pl.Utf8(),
    "diff": pl.Utf8(),
    "prompt": pl.Utf8(),
    "models_mentioned": pl.List(pl.Utf8),
    "hardware_mentioned": pl.List(pl.Utf8),
    "speedup_claims": pl.List(pl.Utf8),
    "hardware_from_code": pl.List(pl.Utf8),  # path, architecture guards, config device names
    "models_from_code": pl.List(pl.Utf8),  # from the path
    "pr_body": pl.Utf8(),
    "gains": pl.Utf8(),
    "kernel_speedup": pl.Float64(),
    "e2e_speedup": pl.Float64(),
    "license": pl.Utf8(),
    "license_before": pl.Utf8(),
    "license_after": pl.Utf8(),
    "touches_kernel_body": pl.Boolean(),
    "touches_cpu_kernel": pl.Boolean(),  # a C++ CPU kernel changed inside a function body
    "is_binding_file": pl.Boolean(),
    "lines_changed": pl.Int64(),
}
EXCLUDED_SCHEMA: dict[str, pl.DataType] = {
    "repo": pl.Utf8(),
    "sha": pl.Utf8(),
    "pr_number": pl.Int64(),
    "path": pl.Utf8(),
    "language": pl.Utf8(),
    "reason": pl.Utf8(),
    "detail": pl.Utf8(),
}

# -- heads and incremental refresh ----------------------------------------------------------

_LOG_FORMAT = "%x01%H%x1f%P%x1f%at%x1f%s%x1f%B%x02"
_NULL_OID = "0" * 40


def row_id(repo: str, sha: str, path: str) -> str:
    """Stable row key: the same (repo, commit, path) always gets the same id."""
    return hashlib.sha256(f"{repo}\0{sha}\0{path}".encode()).hexdigest()[:24]


def effective_head(repo: GitRepo, spec: RepoSpec, head: str) -> str:
    """The newest commit that mining should reach from ``head`` under ``spec``.

    ``stop_at`` wins when it is an ancestor of ``head``; then, with
    ``trim_unnumbered_tip``, PR-less commits at the tip of the first-parent chain are
    skipped (fork commits above upstream). Callers store this as the watermark.
    """
    h = repo.head(head)
    if spec.stop_at and repo.has_commit(spec.stop_at) and repo.is_ancestor(spec.stop_at, h):
        h = repo.head(spec.stop_at)
    if spec.trim_unnumbered_tip:
        out = repo.text(["log", "--first-parent", "--format=%H%x1f%s", "-n", "5000", h])
        for line in out.splitlines():
            sha, _, subject = line.partition("\x1f")
            if PR_NUMBER_RE.search(subject):
                return sha
    return h


def needs_full_remine(repo: GitRepo, old_head: str | None, new_head: str) -> bool:
    """True when ``old_head..new_head`` is not a safe increment (first run, force push,
    or a watermark commit that no longer exists)."""
    if not old_head:
        return True
    if not repo.has_commit(old_head):
        return True
    return not repo.is_ancestor(old_head, new_head)


# -- step 1: perf commits -------------------------------------------------------------------


def _parse_raw(rawpart: bytes, spec: RepoSpec) -> list[dict[str, str | None]]:
    """Candidate kernel files of one commit from its ``--raw -z`` records."""
    toks = rawpart.split(b"\0")
    files: list[dict[str, str | None]] = []
    i = 0
    while i < len(toks):
        tok = toks[i].lstrip(b"\n")
        if not tok.startswith(b":") or i + 1 >= len(toks):
            i += 1
            continue
        path = toks[i + 1].decode("utf-8", "surrogateescape")
        i += 2
        parts = tok[1:].decode().split(" ")
        if len(parts) < 5:
            continue
        mode_a, mode_b, oid_a, oid_b, status = parts[:5]
        status = status[:1]
        if status not in "MAD" or {mode_a, mode_b} & {"120000", "160000"}:
            continue
        if status == "M" and oid_a == oid_b:
            continue  # mode change only
        kind = spec.kernel_kind(path)
        if kind is None:
            continue
        files.append(
            {
                "path": path,
                "status": status,
                "kind": kind,
                "before_oid": None if oid_a == _NULL_OID else oid_a,
                "after_oid": None if oid_b == _NULL_OID else oid_b,
            }
        )
    return files


def find_perf_commits(
    repo: GitRepo, spec: RepoSpec, *, head: str, since: str | None = None
) -> pl.DataFrame:
    """Non-merge commits in ``since..head`` that touch kernel paths and whose subject passes
    the title rule, with their candidate kernel files (blob ids before/after).

    ``head`` is first resolved with :func:`effective_head` (fork tips, ``stop_at``); store
    that commit as the watermark. ``since`` must be an ancestor of it — check with
    :func:`needs_full_remine` first and mine from scratch when it is not (force push).
    ``files`` lists modified, added and deleted candidate paths (added/deleted ones are
    reported as excluded later); whether a ``.py`` path is a kernel is decided from its
    content in :func:`mine_commit_files`.
    """
    top = effective_head(repo, spec, head)
    if since and repo.head(since) == top:
        return pl.DataFrame(schema=PERF_COMMITS_SCHEMA)
    rev = f"{since}..{top}" if since else top
    raw = repo.run(
        [
            "log",
            "--raw",
            "--no-merges",
            "--no-renames",
            "-z",
            "--no-abbrev",
            "--no-color",
            "--no-show-signature",
            f"--format={_LOG_FORMAT}",
            rev,
            "--",
            *spec.pathspecs(),
        ],
        config=("core.quotepath=false", "log.showSignature=false"),
    )
    records: list[dict[str, object]] = []
    revert_log: list[tuple[str, str, str]] = []
    for chunk in raw.split(b"\x01")[1:]:
        header, _, rawpart = chunk.partition(b"\x02")
        fields = header.split(b"\x1f", 4)
        if len(fields) < 5:
            continue
        sha, parents, at, subject_b, body_b = fields
        subject = subject_b.decode("utf-8", "replace")
        body = body_b.decode("utf-8", "replace")
        if is_revert_message(subject, body):
            # Reverts of kernel commits touch kernel paths too: collected from this same log.
            revert_log.append((sha.decode(), subject.strip(), body))
        match = match_title(subject, spec.title_rule)
        if match is None:
            continue
        files = _parse_raw(rawpart, spec)
        if not files:
            continue
        records.append(
            {
                "repo": spec.name,
                "sha": sha.decode(),
                "parent": parents.decode().split(" ")[0] or None,
                "authored_at": datetime.fromtimestamp(int(at), tz=UTC),
                "subject": subject,
                "title": pr_title(subject),
                "message": body_b.decode("utf-8", "replace").rstrip("\n"),
                "pr_number": pr_number(subject),
                "rule": match.rule,
                "rule_match": match.matched,
                "files": files,
            }
        )
    reverts = resolve_reverts(revert_log, {str(r["sha"]): str(r["subject"]) for r in records})
    for r in records:
        r["reverted_by"] = reverts.get(str(r["sha"]))
    return pl.DataFrame(records, schema=PERF_COMMITS_SCHEMA)


# -- step 2: files → rows -------------------------------------------------------------------


@dataclass
class _File:
    sha: str
    path: str
    status: str
    kind: str
    before_oid: str | None
    after_oid: str | None
    language: str | None = None


def _diff_tree(repo: GitRepo, shas: Sequence[str], paths: Sequence[str]) -> bytes:
    """One ``diff-tree --stdin -p`` over all commits, limited to the kept paths."""
    return repo.run(
        [
            "diff-tree",
            "--stdin",
            "-r",
            "-p",
            "--no-renames",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            "-U3",
            "--inter-hunk-context=0",
            "--diff-algorithm=myers",
            "--ignore-submodules",
            "--",
            *(f":(literal){p}" for p in sorted(set(paths))),
        ],
        input=("\n".join(dict.fromkeys(shas)) + "\n").encode(),
        config=(
            "core.quotepath=false",
            "diff.suppressBlankEmpty=false",
            "diff.noprefix=false",
            "diff.mnemonicPrefix=false",
            "diff.relative=false",
        ),
    )


def config_hardware(repo: GitRepo, repo_name: str, shas: Sequence[str]) -> dict[str, list[str]]:
    """GPUs named by the tuned-config files each commit adds or changes (a tuning PR's
    ``device_name=NVIDIA_H200`` says which GPU its kernel change is for). One
    ``git log --no-walk --name-only`` over the config directories; no blob is read."""
    dirs = CONFIG_DIRS.get(repo_name, [])
    if not dirs or not shas:
        return {}
    out = repo.run(
        ["log", "--no-walk=unsorted", "--name-only", "--format=%x01%H", *shas, "--", *dirs],
        config=("core.quotepath=false",),
    )
    found: dict[str, list[str]] = {}
    for chunk in out.decode("utf-8", "replace").split("\x01")[1:]:
        sha, *paths = [line for line in chunk.splitlines() if line.strip()]
        gpus: list[str] = []
        for path in paths:
            if not path.endswith(".json"):
                continue
            try:
                name = parse_config_name(path.rsplit("/", 1)[-1])
            except ConfigNameError:
                continue
            label = normalise_gpu(name.device_name).label if name.device_name else None
            if label:
                gpus.append(
                    label.split(" ", 1)[-1] if label.startswith(("NVIDIA ", "AMD ")) else label
                )
        if gpus:
            found[sha] = list(dict.fromkeys(gpus))
    return found


class _CommitFiles:
    """One run of :func:`mine_commit_files`: the commits' metadata and files, the blobs
    read for them, and the rows and exclusions made so far (each step below adds to them
    in the order the module doc gives the rules)."""

    def __init__(self, repo: GitRepo, spec: RepoSpec, commits: pl.DataFrame, limits: Limits):
        self.repo = repo
        self.spec = spec
        self.limits = limits
        self.rows: list[dict[str, object]] = []
        self.excluded: list[dict[str, object]] = []
        self.meta = {c["sha"]: c for c in commits.select(pl.exclude("files")).iter_rows(named=True)}
        self.files: list[_File] = [
            _File(sha, f["path"], f["status"], f["kind"], f["before_oid"], f["after_oid"])
            for sha, fl in zip(commits["sha"].to_list(), commits["files"].to_list(), strict=True)
            for f in fl
        ]
        self.mentions_cache: dict[str, tuple[list[str], list[str], list[str]]] = {}

    def exclude(self, f: _File, reason: str, detail: str = "") -> None:
        """Record one file as excluded, with the reason and its detail."""
        self.excluded.append(
            {
                "repo": self.spec.name,
                "sha": f.sha,
                "pr_number": self.meta[f.sha]["pr_number"],
                "path": f.path,
                "language": f.language,
                "reason": reason,
                "detail": detail,
            }
        )

    def read_blobs(self) -> None:
        """The GPUs named by config files of each commit, then every blob's size and the
        contents of those under the size limit (native files are classified by extension,
        so blobs over the limit are never read)."""
        repo, files, limits = self.repo, self.files, self.limits
        self.config_gpus = config_hardware(repo, self.spec.name, list(self.meta))
        all_oids = [o for f in files for o in (f.before_oid, f.after_oid) if o]
        repo.prefetch_blobs(all_oids)  # one batched fetch, and only in a blobless clone
        self.sizes = repo.batch_check(all_oids)
        # Native files are classified by extension: blobs over the size limit are never read.
        want = [
            o
            for f in files
            for o in (f.before_oid, f.after_oid)
            if o and (f.kind == "python" or (self.sizes.get(o) or 0) <= limits.max_bytes)
        ]
        self.blobs = repo.read_blobs(want)

    def modified_by_commit(self) -> dict[str, list[_File]]:
        """Kernel files by commit, once classified: added and deleted files are excluded,
        host Python next to the kernels is not a kernel file at all."""
        blobs = self.blobs
        by_commit: dict[str, list[_File]] = {}
        for f in self.files:
            f.language = classify_language(
                f.kind, f.path, blobs.get(f.before_oid or ""), blobs.get(f.after_oid or "")
            )
            if f.language is None:
                continue  # host Python next to the kernels: not a kernel file at all
            if f.status == "A":
                self.exclude(f, "added_file", "no before version")
            elif f.status == "D":
                self.exclude(f, "deleted_file", "no after version")
            else:
                by_commit.setdefault(f.sha, []).append(f)
        return by_commit

    def within_limits(self, by_commit: dict[str, list[_File]]) -> list[_File]:
        """The files of commits with few enough kernel files, and of a size under the limit."""
        limits, sizes = self.limits, self.sizes
        survivors: list[_File] = []
        for group in by_commit.values():
            if len(group) > limits.max_files:
                for f in group:
                    self.exclude(f, "too_many_files", f"{len(group)} modified kernel files")
                continue
            for f in group:
                big = max(sizes.get(f.before_oid or "") or 0, sizes.get(f.after_oid or "") or 0)
                if big > limits.max_bytes:
                    self.exclude(f, "too_large", f"{big} bytes")
                else:
                    survivors.append(f)
        return survivors

    def mentions(self, sha: str) -> tuple[list[str], list[str], list[str]]:
        """(models, hardware, speedup claims) the commit message names, once per commit."""
        if sha not in self.mentions_cache:
            c = self.meta[sha]
            m = extract_mentions(c["message"] or c["subject"])
            self.mentions_cache[sha] = (m.models, m.hardware, m.speedup_claims)
        return self.mentions_cache[sha]

    def add_file(self, f: _File, patch: bytes | None) -> None:
        """One surviving file's row, or its exclusion (no patch, binary, too many changed
        lines, or a licence that rules it out)."""
        if patch is None:
            self.exclude(f, "no_diff", "diff-tree produced no patch")
            return
        if diffs.is_binary_patch(patch):
            self.exclude(f, "binary")
            return
        diff = patch.decode("utf-8", "replace")
        changed = diffs.changed_lines(diff)
        if changed.count > self.limits.max_lines:
            self.exclude(f, "too_many_lines", f"{changed.count} lines changed")
            return
        before_b = self.blobs[f.before_oid or ""]
        after_b = self.blobs[f.after_oid or ""]
        lic_before, lic_after = detect_license(before_b), detect_license(after_b)
        reason = exclusion_reason(
            lic_before, lic_after, row_license(lic_before, lic_after, self.spec.default_license)
        )
        if reason:
            self.exclude(f, reason, f"before={lic_before} after={lic_after}")
            return
        self.rows.append(self.row(f, diff, changed, before_b, after_b, (lic_before, lic_after)))

    def row(
        self,
        f: _File,
        diff: str,
        changed: diffs.ChangedLines,
        before_b: bytes,
        after_b: bytes,
        licenses: tuple[str | None, str | None],
    ) -> dict[str, object]:
        """The kernel_commits row of one file that passed every rule."""
        spec = self.spec
        lic_before, lic_after = licenses
        c = self.meta[f.sha]
        models, hardware, claims = self.mentions(f.sha)
        before_code = before_b.decode("utf-8", "replace")
        after_code = after_b.decode("utf-8", "replace")
        assert f.language is not None
        code_hw, code_models = code_mentions(f.path, after_code, diff)
        code_hw = list(dict.fromkeys([*code_hw, *self.config_gpus.get(f.sha, [])]))
        hardware = list(dict.fromkeys([*hardware, *code_hw]))
        models = list(dict.fromkeys([*models, *code_models]))
        return {
            "id": row_id(spec.name, f.sha, f.path),
            "repo": spec.name,
            "sha": f.sha,
            "pr_number": c["pr_number"],
            "pr_url": spec.pr_url(c["pr_number"]),
            "title": c["title"],
            "rule": c["rule"],
            "authored_at": c["authored_at"],
            "path": f.path,
            "language": f.language,
            "before_code": before_code,
            "after_code": after_code,
            "diff": diff,
            "prompt": build_prompt(c["title"], hardware, models, f.path, f.language, before_code),
            "models_mentioned": models,
            "hardware_mentioned": hardware,
            "speedup_claims": claims,
            "hardware_from_code": code_hw,
            "models_from_code": code_models,
            "pr_body": None,
            "gains": None,
            "kernel_speedup": None,
            "e2e_speedup": None,
            "license": row_license(lic_before, lic_after, spec.default_license),
            "license_before": lic_before,
            "license_after": lic_after,
            "touches_kernel_body": touches_kernel_body(
                f.language, before_code, after_code, diff, changed
            ),
            "touches_cpu_kernel": touches_cpu_kernel(
                f.language, f.path, before_code, after_code, diff, changed
            ),
            "is_binding_file": is_binding_file(f.path),
            "lines_changed": changed.count,
        }


def mine_commit_files(
    repo: GitRepo,
    spec: RepoSpec,
    commits: pl.DataFrame,
    *,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Turn perf commits into (rows, excluded) frames; see the module doc for the rules."""
    if commits.height == 0:
        return pl.DataFrame(schema=ROWS_SCHEMA), pl.DataFrame(schema=EXCLUDED_SCHEMA)
    run = _CommitFiles(repo, spec, commits, limits)
    run.read_blobs()
    survivors = run.within_limits(run.modified_by_commit())
    patches = (
        diffs.split_diff_tree(
            _diff_tree(repo, [f.sha for f in survivors], [f.path for f in survivors])
        )
        if survivors
        else {}
    )
    for f in survivors:
        run.add_file(f, patches.get((f.sha, f.path)))
    out_rows = pl.DataFrame(run.rows, schema=ROWS_SCHEMA).sort(["authored_at", "sha", "path"])
    out_excl = pl.DataFrame(run.excluded, schema=EXCLUDED_SCHEMA).sort(["sha", "path"])
    return out_rows, out_excl


def mine_repo(
    repo: GitRepo,
    spec: RepoSpec,
    *,
    head: str = "HEAD",
    since: str | None = None,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Both steps for one repository: (perf_commits, rows, excluded)."""
    commits = find_perf_commits(repo, spec, head=head, since=since)
    if since is not None:  # an increment: reverts in it may name older commits, and vice versa
        commits = attach_reverts(repo, effective_head(repo, spec, head), commits)
    rows, excluded = mine_commit_files(repo, spec, commits, limits=limits)
    return commits, rows, excluded


def merge_increment(
    old_rows: pl.DataFrame, new_rows: pl.DataFrame, key: str = "id"
) -> pl.DataFrame:
    """Old rows plus newly mined ones; a re-mined key replaces its old row."""
    if new_rows.height == 0:
        return old_rows
    kept = old_rows.filter(~pl.col(key).is_in(new_rows[key].implode()))
    return pl.concat([kept, new_rows], how="vertical_relaxed").sort(["authored_at", "sha", "path"])


def exclusion_counts(excluded: pl.DataFrame) -> dict[str, int]:
    """Excluded files per reason (the TensorRT/proprietary counts the build reports)."""
    counts = dict.fromkeys(EXCLUSION_REASONS, 0)
    for reason, n in excluded.group_by("reason").len().iter_rows():
        counts[reason] = n
    return counts


def summarize(rows: pl.DataFrame, excluded: pl.DataFrame) -> dict[str, object]:
    """Plain counts for run metadata and the card comparison (rows, PRs, languages,
    licences, date range, exclusions with the non-open-source count)."""
    prs = rows.filter(pl.col("pr_number").is_not_null()).select("repo", "pr_number").unique()
    counts = exclusion_counts(excluded)
    return {
        "rows": rows.height,
        "prs": prs.height,
        "commits": rows["sha"].n_unique(),
        "rows_without_pr": rows["pr_number"].null_count(),
        "core_rows": rows.filter(pl.col("rule") == "core").height,
        "languages": dict(rows.group_by("language").len().sort("language").iter_rows()),
        "licenses": dict(rows.group_by("license").len().sort("license").iter_rows()),
        "first_authored": rows["authored_at"].min(),
        "last_authored": rows["authored_at"].max(),
        "excluded": counts,
        "excluded_non_oss": counts["license_tensorrt"] + counts["license_proprietary"],
        "touches_kernel_body": int(rows["touches_kernel_body"].sum() or 0),
        "binding_files": int(rows["is_binding_file"].sum() or 0),
        **replacement_counts(rows),
    }


def replacement_counts(rows: pl.DataFrame) -> dict[str, int]:
    """How much code was decoded with U+FFFD (issue 42: silent before). Code is decoded
    with ``errors="replace"`` (``diffs.py``): a file with invalid UTF-8 keeps its diff
    exact, but its text is not the bytes; the run says how many rows and characters, and
    the original bytes stay in git (``sha`` + ``path``). A literal U+FFFD in a source
    counts too: both are text a reader cannot take at face value."""
    if not rows.height:
        return {"rows_with_replacement_chars": 0, "replacement_chars": 0}
    n = pl.col("before_code").str.count_matches("\ufffd", literal=True).fill_null(0) + pl.col(
        "after_code"
    ).str.count_matches("\ufffd", literal=True).fill_null(0)
    counts = rows.select(n.alias("n"))["n"]
    return {
        "rows_with_replacement_chars": int((counts > 0).sum()),
        "replacement_chars": int(counts.sum()),
    }
