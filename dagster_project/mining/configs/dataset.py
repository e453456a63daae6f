"""Assemble ``datasets.tuned_configs``: one row per (config file, M).

Inputs are the frames of the other modules (files, entries, attributions, kernel
sources, model shapes) plus each repo's snapshot commit; everything here is a pure
function of them, so the same inputs always give the same rows and ids.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from typing import Any

import polars as pl

from dagster_project.frames import ColumnSchema, Json, Markdown, md_table
from dagster_project.mining.configs.candidates import match_models, shape_rows
from dagster_project.mining.configs.copies import find_copies
from dagster_project.mining.configs.defaults import default_config
from dagster_project.mining.configs.names import has_low_shared_memory, is_blackwell_datacenter
from dagster_project.mining.configs.prompt import M_SLOT, prompt_template
from dagster_project.mining.configs.split import apply_deployment_split

#: Version of the tuned_configs row assembly (columns, joins). Bump it whenever mined output
#: changes: it is part of the miner version (``mining/versions.py``); a bump re-mines.
RULES_VERSION = "2"

LICENSE = "Apache-2.0"

TUNED_CONFIGS_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),
    "prompt": pl.String(),
    "best_config": pl.String(),
    "kernel": pl.String(),
    "kernel_source": pl.String(),
    "repo": pl.String(),
    "config_path": pl.String(),
    "device_name": pl.String(),
    "gpu": pl.String(),
    "dtype": pl.String(),
    "E": pl.Int64(),
    "N": pl.Int64(),
    "K": pl.Int64(),
    "block_shape": pl.List(pl.Int64()),
    "M": pl.Int64(),
    "triton_version": pl.String(),
    "candidate_models": pl.List(pl.String()),
    "default_config": pl.String(),
    "config_pr_url": pl.String(),
    "config_pr_gains": pl.String(),
    "speedup_vs_default": pl.Float64(),
    "split": pl.String(),
    "license": pl.String(),
    "snapshot_commit": pl.String(),
    # Beyond the card, kept because consumers filter and join on them.
    "family": pl.String(),
    "is_down": pl.Boolean(),
    "config_pr_number": pl.Int64(),
    # Does the engine's own lookup at the snapshot open this file (null: not modelled)?
    "loaded_at_runtime": pl.Boolean(),
    "not_loaded_reason": pl.String(),
    # The earlier file of another device this file's content is a copy of (``copies``).
    "copied_from": pl.String(),
    # The deployment the split groups by (``split.deployment_group``), kept so the
    # disjointness gate can be checked in SQL.
    "split_group": pl.String(),
}


def row_id(repo: str, config_path: str, M: int) -> str:
    """Stable id: the same (repo, path, M) keeps its id across refreshes."""
    return hashlib.sha256(f"{repo}\0{config_path}\0{M}".encode()).hexdigest()[:20]


def dtype_label(family: str | None, dtype: str | None, cache_dtype: str | None) -> str:
    """The card's dtype vocabulary: a missing MoE dtype is bf16/fp16; SSU names its cache."""
    if family == "ssu":
        return f"cache_{cache_dtype}" if cache_dtype else "unknown"
    return dtype if dtype else "bf16/fp16"


def _defaults_column(rows: pl.DataFrame) -> list[str | None]:
    """``default_config`` of every row as JSON; each distinct config is serialised once."""
    cols = (
        "repo",
        "family",
        "dtype",
        "M",
        "E",
        "N",
        "K",
        "block_shape",
        "platform",
        "low_smem",
        "blackwell",
        "dstate",
    )
    encoded: dict[tuple, str] = {}
    out: list[str | None] = []
    for repo, family, dtype, M, E, N, K, block, platform, low, bw, dstate in rows.select(
        cols
    ).rows():
        cfg = default_config(
            repo,
            family,
            dtype,
            M,
            E,
            N,
            K,
            block,
            platform=platform,
            low_smem=low,
            blackwell=bw,
            dstate=dstate,
        )
        if cfg is None:
            out.append(None)
            continue
        key = tuple(cfg.items())
        text = encoded.get(key)
        if text is None:
            text = encoded[key] = json.dumps(cfg)
        out.append(text)
    return out


def build_tuned_configs(
    files: pl.DataFrame,
    entries: pl.DataFrame,
    attributions: pl.DataFrame,
    kernels: pl.DataFrame,
    shapes: pl.DataFrame,
    snapshot: Mapping[str, str],
) -> pl.DataFrame:
    """Join the inputs into dataset rows (``TUNED_CONFIGS_SCHEMA``), by repo, path, file order.

    Only ``parse_status == 'ok'`` files contribute. ``config_pr_gains`` and
    ``speedup_vs_default`` are left null for the gains stage to fill.

    Everything but M is a property of the file, so per-file values (candidates,
    prompt template, kernel source) are computed once per file in Python and joined onto
    the entries; per-row work is a vectorised M substitution plus the default heuristic
    (each distinct result serialised once). That keeps the build a small fraction
    of the git time it sits on.
    """
    if files.is_empty() or entries.is_empty():
        return pl.DataFrame(schema=TUNED_CONFIGS_SCHEMA)
    ok = files.filter(pl.col("parse_status") == "ok")
    if ok.is_empty():
        return pl.DataFrame(schema=TUNED_CONFIGS_SCHEMA)
    sources = {(r, k): s for k, r, s in kernels.select("kernel", "repo", "source").iter_rows()}
    attr = _attribution(ok, entries, attributions)

    table = shape_rows(shapes)

    @cache
    def matches(E: int | None, N: int | None, dtype: str | None, repo: str):
        found = match_models(E, N, dtype, repo, table)
        return list(dict.fromkeys(m.model for m in found)), [m.describe() for m in found]

    per_file: dict[str, list] = {
        k: []
        for k in (
            "repo",
            "path",
            "blob_oid",
            "template",
            "kernel_source",
            "dtype_label",
            "triton_version_out",
            "candidate_models",
            "snapshot_commit",
            "platform",
            "low_smem",
            "blackwell",
        )
    }
    for f in ok.iter_rows(named=True):
        repo = f["repo"]
        names, details = (
            matches(f["E"], f["N"], f["dtype"], repo) if f["family"] == "moe" else ([], [])
        )
        source = sources.get((repo, f["kernel"]))
        tv = f["triton_version"] or f["triton_dir_version"]
        per_file["repo"].append(repo)
        per_file["path"].append(f["path"])
        per_file["blob_oid"].append(f["blob_oid"])
        per_file["template"].append(
            prompt_template(
                {**f, "kernel_source": source, "triton_version": tv, "candidate_details": details}
            )
        )
        per_file["kernel_source"].append(source)
        per_file["dtype_label"].append(dtype_label(f["family"], f["dtype"], f["cache_dtype"]))
        per_file["triton_version_out"].append(tv)
        per_file["candidate_models"].append(names)
        per_file["snapshot_commit"].append(snapshot.get(repo))
        # What the default heuristics branch on, known only through the GPU's name.
        per_file["platform"].append("rocm" if f["gpu_vendor"] == "AMD" else "cuda")
        per_file["low_smem"].append(has_low_shared_memory(f["gpu_vendor"], f["gpu_model"]))
        per_file["blackwell"].append(is_blackwell_datacenter(f["gpu_model"]))
    pf = pl.DataFrame(per_file, schema_overrides={"candidate_models": pl.List(pl.String())})

    rows = (
        entries.join(ok.drop("n_entries", "triton_version"), on=["repo", "path", "blob_oid"])
        .join(pf, on=["repo", "path", "blob_oid"])
        .join(attr, on=["repo", "path"], how="left")
        .sort(["repo", "path", "key_index"])
    )
    defaults = _defaults_column(rows)
    ids = [row_id(r, p, m) for r, p, m in rows.select("repo", "path", "M").rows()]
    out = rows.with_columns(
        id=pl.Series(ids, dtype=pl.String()),
        default_config=pl.Series(defaults, dtype=pl.String()),
        prompt=pl.col("template").str.replace_all(
            M_SLOT, pl.col("M").cast(pl.String()), literal=True
        ),
        best_config=pl.col("config_json"),
        config_path=pl.col("path"),
        dtype=pl.col("dtype_label"),
        triton_version=pl.col("triton_version_out"),
        config_pr_url=pl.col("pr_url"),
        config_pr_number=pl.col("pr_number"),
        config_pr_gains=pl.lit(None, dtype=pl.String()),
        speedup_vs_default=pl.lit(None, dtype=pl.Float64()),
        license=pl.lit(LICENSE),
        split=pl.lit(None, dtype=pl.String()),
        split_group=pl.lit(None, dtype=pl.String()),
    )
    # The split reads content_key (copies share a group), which the schema drops.
    out = apply_deployment_split(out)
    return out.select([pl.col(c).cast(t) for c, t in TUNED_CONFIGS_SCHEMA.items()])


def _attribution(
    files: pl.DataFrame, entries: pl.DataFrame, attributions: pl.DataFrame
) -> pl.DataFrame:
    """Per (repo, path): ``copied_from``, ``content_key`` and the tuning PR, which for a
    copy of another device's file is the PR that tuned the values (the original's), not
    the one that copied them (``copies.find_copies``)."""
    attr = (
        attributions.select("repo", "path", "pr_url", "pr_number")
        if not attributions.is_empty()
        else pl.DataFrame(
            schema={
                "repo": pl.String(),
                "path": pl.String(),
                "pr_url": pl.String(),
                "pr_number": pl.Int64(),
            }
        )
    )
    copies = find_copies(files, entries, attributions).with_columns(
        _src=pl.coalesce("copied_from", "path")
    )
    return copies.join(attr.rename({"path": "_src"}), on=["repo", "_src"], how="left").drop("_src")


def tuned_configs_dataset(
    files: pl.DataFrame,
    entries: pl.DataFrame,
    attributions: pl.DataFrame,
    kernels: pl.DataFrame,
    shapes: pl.DataFrame,
    heads: pl.DataFrame,
    pr_gains: pl.DataFrame | None,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """``datasets.tuned_configs`` from the mined tables (``heads``: raw.repo_heads, each
    repo's snapshot commit) with documented gains attached where attribution is
    unambiguous, and the metadata the UI shows (plots, split, coverage, preview)."""
    from dagster_project.gains.pipeline import attach_config_gains

    snapshot = {r["repo"]: r["head_sha"] for r in heads.iter_rows(named=True)}
    rows = build_tuned_configs(
        files.filter(pl.col("parse_status") == "ok"),
        entries,
        attributions,
        kernels,
        shapes,
        snapshot,
    )
    rows = attach_config_gains(rows, pr_gains)
    return rows, _tuned_configs_metadata(rows)


def _tuned_configs_metadata(rows: pl.DataFrame) -> dict[str, Any]:
    """Rows per GPU and documented speedups as plots, split sizes, coverage, a preview."""
    from dagster_project.report import plots_markdown

    split = dict(rows.group_by("split").len().iter_rows())
    per_gpu = (
        rows.group_by("gpu").agg(pl.len().alias("rows")).sort("rows", descending=True).head(15)
    )
    plots = plots_markdown(per_gpu, "bar", x="gpu", y="rows", title="rows per GPU (top 15)")
    speedups = rows.filter(pl.col("speedup_vs_default").is_not_null())
    if speedups.height:
        plots += "\n\n" + plots_markdown(
            speedups,
            "histogram",
            x="speedup_vs_default",
            log_x=True,
            title="documented speedup vs default",
        )
    top_gpus = rows.group_by("gpu").len().sort("len", descending=True).head(8)
    preview = rows.select("repo", "kernel", "gpu", "dtype", "E", "N", "K", "M", "best_config")
    return {
        "plots": Markdown(plots),
        "dagster/row_count": rows.height,
        "dagster/column_schema": ColumnSchema("datasets.tuned_configs"),
        "train": split.get("train", 0),
        "test": split.get("test", 0),
        "files": rows["config_path"].n_unique(),
        "gpus": rows["gpu"].n_unique(),
        "with_speedup_vs_default": int(rows["speedup_vs_default"].is_not_null().sum()),
        "top_gpus": Json(dict(top_gpus.iter_rows())),
        "preview": Markdown(md_table(preview)),
    }
