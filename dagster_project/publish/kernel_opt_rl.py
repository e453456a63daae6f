"""Export of kernel-opt-rl (subsets ``tuned_configs`` and ``kernel_commits``).

Layout (what ``datasets.load_dataset(path, "<subset>", split=…)`` and the Hub expect)::

    README.md                                   card: YAML ``configs:`` + statistics
    tuned_configs/{train,test}-00000-of-00001.parquet
    kernel_commits/{train,test}-00000-of-00001.parquet
    pr_tasks/{train,test}-00000-of-00001.parquet  kernel_commits one PR per row (when built)
    code/reward.py                              the reward functions, standalone
    licenses/<repo>/LICENSE, NOTICE …           upstream notices (Apache-2.0 §4)

Every figure in the card is computed here from the lake with the ``sql/publish`` queries, in
the same read-only connection that writes the Parquet files, so the card describes exactly
the rows shipped beside it. Parquet is streamed from DuckDB through Arrow record batches, so
memory stays flat however large ``kernel_commits`` (full before/after sources) grows. The
output is deterministic (no build timestamps), so an unchanged lake re-exports to identical
files and an unchanged Hub push is a no-op.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from dagster_project.commit_exec import reward_checks
from dagster_project.mining.commits.license import APACHE_2, BSD, BSD_3, MIT, OPEN_SOURCE
from dagster_project.mining.git import GitRepo
from dagster_project.storage.lake import Lake

from . import exploits
from ._sql import record, records, relation
from .atomic import atomic_export_dir
from .cards import render_card, size_category
from .features import dataset_info
from .report import ExportError, ExportReport, file_sizes

__all__ = [
    "DATASET",
    "SPLITS",
    "PR_TASKS",
    "SUBSETS",
    "data_file",
    "export_kernel_opt_rl",
    "exported_subsets",
    "kernel_opt_rl_stats",
    "read_snapshot",
    "snapshot_label",
    "upstream_notice_files",
]

DATASET = "kernel-opt-rl"
SUBSETS: tuple[str, ...] = ("tuned_configs", "kernel_commits")
#: The subset that regroups kernel_commits one PR per row (issue 41). It is exported when
#: ``datasets.pr_tasks`` is built, so a lake from before it still exports the two above.
PR_TASKS = "pr_tasks"
SPLITS: tuple[str, ...] = ("train", "test")

#: Rows per Arrow batch, and so per Parquet row group. kernel_commits rows carry whole
#: source files (up to a few hundred kB each); small groups keep readers' memory low and
#: let the Hub viewer page through them.
_BATCH_ROWS = 256

#: Upstream notice files are written under ``licenses/<repo>/<name>``; both parts must be
#: plain names so a bad key can never write outside the export.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

_TAGS = [
    "gpu-kernels",
    "kernel-optimization",
    "cuda",
    "triton",
    "reinforcement-learning",
    "llm-inference",
    "vllm",
    "sglang",
    "flashinfer",
    "code",
]


def data_file(subset: str, split: str) -> str:
    """Path of one subset/split Parquet file inside the export (POSIX)."""
    return f"{subset}/{split}-00000-of-00001.parquet"


# -- statistics ----------------------------------------------------------------------------
def kernel_opt_rl_stats(lake: Lake) -> dict[str, Any]:
    """Every figure the card prints, computed from the lake (read-only)."""
    with lake.connect(read_only=True) as con:
        return _stats(con)


def _stats(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    return {
        "tuned_configs": {
            **record(con, "tuned_configs_summary"),
            "by_gpu": records(con, "tuned_configs_gpus"),
            "by_kernel": records(con, "tuned_configs_kernels"),
            "by_dtype": records(con, "tuned_configs_dtypes"),
        },
        "kernel_commits": {
            **record(con, "kernel_commits_summary"),
            "by_language": records(con, "kernel_commits_languages"),
            "by_repo": records(con, "kernel_commits_repos"),
        },
        "licenses": records(con, "licenses"),
        "source_repos": [r["repo"] for r in records(con, "source_repos")],
        "gains_state": _gains_state(con),
        PR_TASKS: _pr_tasks_stats(con),
    }


def _has_table(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> bool:
    found = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = ? AND table_name = ?",
        [schema, name],
    ).fetchall()
    return bool(found[0][0])


def _pr_tasks_stats(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The pr_tasks subset's figures, with its files-per-task distribution (None: not built)."""
    if not _has_table(con, "datasets", PR_TASKS):
        return None
    return {**record(con, "pr_tasks_summary"), "by_files": records(con, "pr_tasks_files")}


def exported_subsets(stats: Mapping[str, Any]) -> tuple[str, ...]:
    """The subsets an export of these statistics writes: pr_tasks only where it is built."""
    return (*SUBSETS, PR_TASKS) if stats.get(PR_TASKS) else SUBSETS


def _gains_state(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The pr_gains asset's own account of what it read (None before it ran)."""
    have = con.execute(
        "SELECT count(*) FROM information_schema.tables "
        "WHERE table_schema = 'derived' AND table_name = 'pr_gains_state'"
    ).fetchall()[0][0]
    if not have:
        return None
    rows = records(con, "gains_state")
    return rows[0] if rows else None


# -- snapshot ------------------------------------------------------------------------------
def read_snapshot(lake: Lake) -> list[dict[str, Any]]:
    """The build snapshot from ``raw.repo_heads``: repo, head_sha, head_date, commit_count."""
    with lake.connect(read_only=True) as con:
        return records(con, "repo_heads")


def snapshot_label(snapshot: Sequence[Mapping[str, Any]]) -> str:
    """One line naming the snapshot, e.g. ``flashinfer@1a2b3c4d5e6f, sglang@…, vllm@…``."""
    return ", ".join(f"{s['repo']}@{str(s['head_sha'])[:12]}" for s in _checked_snapshot(snapshot))


def _checked_snapshot(snapshot: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for entry in snapshot:
        if not entry.get("repo") or not entry.get("head_sha"):
            raise ExportError(f"snapshot entry without repo/head_sha: {dict(entry)!r}")
        rows.append(
            {
                "repo": str(entry["repo"]),
                "head_sha": str(entry["head_sha"]),
                "head_date": None if entry.get("head_date") is None else str(entry["head_date"]),
                "commit_count": entry.get("commit_count"),
            }
        )
    return sorted(rows, key=lambda r: r["repo"])


# -- upstream notices --------------------------------------------------------------------
#: Root-level files that carry an upstream project's licence terms and attribution notices.
NOTICE_FILE_NAMES: tuple[str, ...] = (
    "LICENSE",
    "LICENSE.txt",
    "LICENSE.md",
    "NOTICE",
    "NOTICE.txt",
    "NOTICE.md",
    "COPYING",
)


def upstream_notice_files(repo: GitRepo, ref: str = "HEAD") -> dict[str, bytes]:
    """The licence and notice files at the root of ``repo`` at ``ref`` (name → bytes), the
    value of one ``licenses`` entry. Read from git objects, so bare and blobless clones work
    (a blobless clone fetches the few blobs on demand)."""
    entries = [
        (path, oid)
        for _mode, kind, oid, path in repo.ls_tree(ref, NOTICE_FILE_NAMES)
        if kind == "blob" and "/" not in path
    ]
    blobs = repo.read_blobs(oid for _path, oid in entries)
    return {path: blobs[oid] for path, oid in entries}


# -- export --------------------------------------------------------------------------------
def export_kernel_opt_rl(
    lake: Lake,
    out_dir: Path,
    *,
    reward_module: str,
    licenses: Mapping[str, Mapping[str, bytes]],
    snapshot: Sequence[Mapping[str, Any]],
    repo_id: str | None = None,
) -> ExportReport:
    """Write the kernel-opt-rl export to ``out_dir``, replacing any previous one atomically.

    ``reward_module`` is the text of ``code/reward.py`` (see ``rewards.render_reward_module``);
    ``licenses`` maps repo → {file name → bytes} of the upstream LICENSE/NOTICE files, and
    every repo whose code is exported must have a LICENSE; ``snapshot`` lists the repo heads
    the lake was mined at (``read_snapshot``). ``repo_id`` only changes the loading snippet
    in the card (a local path is shown when it is None).
    """
    _check_reward_module(reward_module)
    heads = _checked_snapshot(snapshot)
    with lake.connect(read_only=True) as con:
        stats = _stats(con)
        if not stats["tuned_configs"]["rows"] and not stats["kernel_commits"]["rows"]:
            raise ExportError("the lake has no kernel-opt-rl rows; nothing to export")
        _check_licenses(licenses, stats["source_repos"])
        stats["snapshot"] = heads
        with atomic_export_dir(Path(out_dir)) as tmp:
            rows = {}
            schemas: dict[str, pa.Schema] = {}
            for subset in exported_subsets(stats):
                for split in SPLITS:
                    rel_path = data_file(subset, split)
                    rows[rel_path], schemas[subset] = _write_parquet(
                        con, f"{subset}_rows", split, tmp / rel_path
                    )
            _check_counts(rows, stats)
            code = tmp / "code" / "reward.py"
            code.parent.mkdir(parents=True)
            code.write_text(reward_module, encoding="utf-8")
            license_files = _write_licenses(tmp / "licenses", licenses)
            data_bytes = sum(f.stat().st_size for f in tmp.rglob("*.parquet"))
            readme = render_card(
                "kernel_opt_rl.md.j2",
                _front_matter(stats, schemas),
                {
                    "s": stats,
                    "tc": stats["tuned_configs"],
                    "kc": stats["kernel_commits"],
                    "pt": stats[PR_TASKS],
                    "snapshot": heads,
                    "license_files": license_files,
                    "load_path": repo_id or f"./{DATASET}",
                    "data_bytes": data_bytes,
                    "data_file": data_file,
                    **exploits.card_context(),
                    **reward_checks.card_context(),
                },
            )
            (tmp / "README.md").write_text(readme, encoding="utf-8")
            sizes = file_sizes(tmp)
    return ExportReport(dataset=DATASET, out_dir=Path(out_dir), rows=rows, sizes=sizes, stats=stats)


def _front_matter(stats: Mapping[str, Any], schemas: Mapping[str, pa.Schema]) -> dict[str, Any]:
    total = stats["tuned_configs"]["rows"] + stats["kernel_commits"]["rows"]
    return {
        "license": "apache-2.0",
        "pretty_name": "Kernel-Opt RL",
        "language": ["en", "code"],
        "task_categories": ["text-generation", "reinforcement-learning"],
        "tags": list(_TAGS),
        "size_categories": [size_category(total)],
        "configs": [
            {
                "config_name": subset,
                "data_files": [
                    {"split": split, "path": data_file(subset, split)} for split in SPLITS
                ],
            }
            for subset in schemas
        ],
        # Declared schemas (features.py): the Hub viewer and `datasets` need not infer them.
        "dataset_info": [dataset_info(subset, schemas[subset]) for subset in schemas],
    }


def _write_parquet(
    con: duckdb.DuckDBPyConnection, query: str, split: str, path: Path
) -> tuple[int, pa.Schema]:
    """Stream one split of one subset into a Parquet file; returns its row count and schema."""
    reader = relation(con, query, {"split": split}).to_arrow_reader(_BATCH_ROWS)
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with pq.ParquetWriter(path, reader.schema, compression="zstd") as writer:
        for batch in reader:
            if batch.num_rows:
                writer.write_batch(batch)
                written += batch.num_rows
    return written, reader.schema


def _check_counts(rows: Mapping[str, int], stats: Mapping[str, Any]) -> None:
    """The files must hold exactly the rows the card counts; rows whose split is neither
    train nor test would silently vanish otherwise."""
    for subset in exported_subsets(stats):
        s = stats[subset]
        for split in SPLITS:
            if rows[data_file(subset, split)] != s[split]:
                raise ExportError(
                    f"{subset}/{split}: wrote {rows[data_file(subset, split)]} rows, "
                    f"lake has {s[split]}"
                )
        if s["train"] + s["test"] != s["rows"]:
            raise ExportError(
                f"{subset}: {s['rows'] - s['train'] - s['test']} rows "
                "have a split other than train/test"
            )


def _check_reward_module(text: str) -> None:
    if not text.strip():
        raise ExportError("reward_module is empty: code/reward.py would ship without rewards")
    try:
        compile(text, "code/reward.py", "exec")
    except SyntaxError as exc:
        raise ExportError(f"reward_module does not parse: {exc.msg} (line {exc.lineno})") from exc


def _check_licenses(licenses: Mapping[str, Mapping[str, bytes]], repos: Sequence[str]) -> None:
    """Apache-2.0 §4(a)/(d): redistributing the code means shipping its LICENSE (and NOTICE)."""
    for repo, files in licenses.items():
        for name in (repo, *files):
            if not _SAFE_NAME.match(name):
                raise ExportError(f"unsafe licence path component {name!r}")
    missing = [
        r for r in repos if not any(n.upper().startswith("LICENSE") for n in licenses.get(r, {}))
    ]
    if missing:
        raise ExportError(
            f"no upstream LICENSE for {', '.join(missing)}: Apache-2.0 §4 requires it"
        )


def _write_licenses(root: Path, licenses: Mapping[str, Mapping[str, bytes]]) -> list[str]:
    written = []
    for repo in sorted(licenses):
        for name in sorted(licenses[repo]):
            path = root / repo / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(bytes(licenses[repo][name]))
            written.append(f"licenses/{repo}/{name}")
    return written


# -- gaps to the card (``kernelhouse stats kernel-opt-rl``) ----------------------------------
#: The kernels the card lists for tuned_configs, and the month its clones end.
CARD_KERNELS: tuple[str, ...] = (
    "fused_moe_kernel",
    "fused_moe_kernel_gptq_awq",
    "_w8a8_triton_block_scaled_mm",
    "_w8a8_block_fp8_matmul",
    "_w8a8_block_int8_matmul",
    "_selective_scan_update_kernel",
)
CARD_SNAPSHOT_END = "2026-10"


def card_gap_lines(lake: Lake, card: Mapping[str, float] | None = None) -> list[str]:
    """Why our figures differ from the card's, one sentence per cause, from the lake.

    ``card`` maps the card-comparison metrics (``sql/analysis/card_kernel_opt_rl.sql``)
    to the card's figures; the causes come from the raw tables: a card kernel with no
    rows (no file, unparsed files, no source), files skipped as malformed and rows the
    engine never loads, kernel files dropped by reason, each repo's snapshot date against
    the card's, the temporal cut-off with any repo whose test split is empty, and licence
    counts against the card's.
    """
    card = dict(card or {})
    with lake.connect(read_only=True) as con:
        kernels = records(con, "card_gaps_kernels", {"kernels": list(CARD_KERNELS)})
        files = records(con, "card_gaps_config_files")
        found = con.execute(
            "SELECT value FROM derived.build_properties WHERE key = ?",
            ["kernel_commits.split_cutoff"],
        ).fetchall()
        cutoff = found[0][0] if found else None
        repos = records(con, "card_gaps_commits", {"cutoff": cutoff})
        excluded = records(con, "card_gaps_exclusions")
        licenses = records(con, "licenses")
    return [
        *_kernel_gaps(kernels),
        *_tuned_config_gaps(files, repos, card),
        *_commit_gaps(repos, excluded, card),
        *_cutoff_gaps(cutoff, repos),
        *_licence_gaps(licenses, excluded, card),
    ]


Rows = list[dict[str, Any]]


def _kernel_gaps(kernels: Rows) -> list[str]:
    """Each card kernel with no rows, and why: no file, only malformed files, or files
    that gave nothing; and whether its source was found."""
    lines = []
    for k in kernels:
        if k["rows"]:
            continue
        if not k["files"]:
            why = "no config file at the snapshot names it"
        elif k["unparsed_files"] == k["files"]:
            why = f"all {k['files']} of its config files are malformed (raw.config_files)"
        else:
            why = "its files are present but gave no rows"
        src = "" if k["sources"] else "; its source was not found at the snapshot"
        lines.append(f"missing kernel {k['kernel']}: {why}{src}")
    return lines


def _tuned_config_gaps(files: Rows, repos: Rows, card: Mapping[str, float]) -> list[str]:
    """Config files skipped as malformed, rows the engine never loads, and the rows the
    card has beyond our snapshot."""
    lines = []
    bad = [f for f in files if f["parse_status"] != "ok"]
    if bad:
        shown = ", ".join(f"{f['repo']} {f['files']} {f['parse_status']}" for f in bad)
        lines.append(
            f"tuned_configs: config files skipped with a reason in raw.config_files: {shown}"
        )
    not_loaded = [f for f in files if f["not_loaded_files"]]
    for f in not_loaded:
        lines.append(
            f"tuned_configs: {f['repo']} {f['not_loaded_files']} files / "
            f"{f['not_loaded_entries']:,} rows are never loaded by the engine's own lookup "
            "(kept, loaded_at_runtime = false, see not_loaded_reason)"
        )
    ours_tc = sum(f["entries"] for f in files if f["parse_status"] == "ok")
    if card.get("tuned_configs rows") and ours_tc < card["tuned_configs rows"]:
        lines.append(
            f"tuned_configs: {card['tuned_configs rows'] - ours_tc:,.0f} rows fewer than "
            "the card: "
            f"the card's clones run to {CARD_SNAPSHOT_END}, ours to "
            + ", ".join(f"{r['repo']} {str(r['head_date'])[:10]}" for r in repos)
            + " (files added upstream since are not in our snapshot)"
        )
    return lines


def _commit_gaps(repos: Rows, excluded: Rows, card: Mapping[str, float]) -> list[str]:
    """kernel_commits rows against the card's count, with each repo's rows and perf
    commits and the kernel files the row rules dropped."""
    ours_kc = sum(r["rows"] for r in repos)
    if not (card.get("kernel_commits rows") and ours_kc != card["kernel_commits rows"]):
        return []
    diff = card["kernel_commits rows"] - ours_kc
    what = "fewer" if diff > 0 else "more"
    drops = ", ".join(f"{e['reason']} {e['files']:,}" for e in excluded[:6])
    return [
        f"kernel_commits: {abs(diff):,.0f} rows {what} than the card; "
        "per repo rows / perf commits: "
        + ", ".join(f"{r['repo']} {r['rows']:,} / {r['perf_commits']:,}" for r in repos)
        + f"; kernel files dropped by the row rules: {drops or 'none'}"
        + f"; snapshot ends before the card's {CARD_SNAPSHOT_END} where older"
    ]


def _cutoff_gaps(cutoff: Any, repos: Rows) -> list[str]:
    """The temporal cut-off of the test split, and each repo whose test split is empty."""
    if not cutoff:
        return []
    lines = [f"kernel_commits: temporal cut-off {str(cutoff)[:10]} (newest ~10% of rows are test)"]
    for r in repos:
        if r["rows"] and not r["test_rows"]:
            newest = str(r["newest_row"])[:10]
            lines.append(
                f"kernel_commits: {r['repo']} has an empty test split: its newest row "
                f"({newest}) is before the cut-off "
                f"(its snapshot ends {str(r['head_date'])[:10]})"
            )
    return lines


def _licence_gaps(licenses: Rows, excluded: Rows, card: Mapping[str, float]) -> list[str]:
    """kernel_commits rows per licence against the card's, licences the card does not
    list, and the files excluded as not open source."""
    ours_lic: dict[str, Any] = {}
    for row in licenses:
        if row["subset"] == "kernel_commits":
            ours_lic[row["license"]] = ours_lic.get(row["license"], 0) + row["rows"]
    # The card counts licences in three families (BSD-3-Clause and plain BSD are one);
    # the ids are the allow-list's own (mining/commits/license.py).
    card_lic = {
        APACHE_2: card.get("Apache-2.0 rows"),
        BSD: card.get("BSD rows"),
        MIT: card.get("MIT rows"),
    }
    ours_grouped = {
        APACHE_2: ours_lic.get(APACHE_2, 0),
        BSD: ours_lic.get(BSD_3, 0) + ours_lic.get(BSD, 0),
        MIT: ours_lic.get(MIT, 0),
    }
    parts = [
        f"{k} {ours_grouped[k]:,} (card {v:,.0f})" for k, v in card_lic.items() if v is not None
    ]
    other = {k: v for k, v in ours_lic.items() if k not in OPEN_SOURCE}
    if not (parts or other):
        return []
    non_oss = (
        ", ".join(
            f"{e['reason']} {e['files']}" for e in excluded if e["reason"].startswith("license_")
        )
        or "none"
    )
    extra = (
        ""
        if not other
        else "; not on the card: " + ", ".join(f"{k} {v:,}" for k, v in sorted(other.items()))
    )
    return [
        f"kernel_commits licences: {', '.join(parts)}{extra}; non-OSS files excluded: {non_oss}"
    ]
