"""Lake-level glue of the gains pipeline (no dagster import): which PRs to fetch, run
the extractors over cached bodies without paying twice, and attach gains to rows.

Extraction results are keyed by (repo, PR, body sha256, extractor, extractor version,
model): a refresh re-extracts a PR only when its body, the extractor or the model
changed. The LLM extractor is primary when an endpoint is configured; the table
extractor always runs too, as the default and as a cross-check.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import polars as pl

from dagster_project.frames import ColumnSchema, Markdown
from dagster_project.gains.attribution import attribute_config_row, kernel_commit_speedups
from dagster_project.gains.extract import body_sha256, extract_pr_gains, pr_text
from dagster_project.gains.extract.choose import EXTRACTOR_VERSION
from dagster_project.gains.llm_extractor import (
    PROMPT_VERSION,
    LLMConfig,
    LLMExtractor,
    llm_cache_key,
)
from dagster_project.gains.schema import Measurement
from dagster_project.scrub import scrub_json_text, scrub_text

RUNS_SCHEMA: dict[str, pl.DataType] = {
    "run_key": pl.String(),
    "repo": pl.String(),
    "number": pl.Int64(),
    "body_sha256": pl.String(),
    "extractor": pl.String(),
    "extractor_version": pl.String(),
    "model_used": pl.String(),
    "ok": pl.Boolean(),
    "error": pl.String(),
    "n_measurements": pl.Int64(),
    "prompt_tokens": pl.Int64(),
    "completion_tokens": pl.Int64(),
    "measurements_json": pl.String(),
}


def _gains_schema() -> dict[str, pl.DataType]:
    """``derived.pr_gains`` columns, derived from the Measurement dataclass so an empty
    table still has every column the quality suite checks."""
    from dataclasses import fields
    from typing import get_type_hints

    hints = get_type_hints(Measurement)
    kinds: dict[str, pl.DataType] = {}
    for f in fields(Measurement):
        t = str(hints[f.name])
        kinds[f.name] = (
            pl.Float64()
            if "float" in t
            else pl.Int64()
            if "int" in t
            else pl.Boolean()
            if "bool" in t
            else pl.String()
        )
    return {
        "gain_id": pl.String(),
        "repo": pl.String(),
        "pr_number": pl.Int64(),
        "idx": pl.Int64(),
        "primary": pl.Boolean(),
        **{k: v for k, v in kinds.items() if k not in ("repo", "pr_number")},
        "quarantined": pl.Boolean(),
        "published_audit_pass": pl.Boolean(),
    }


def pr_numbers_needed(*frames: pl.DataFrame | None) -> pl.DataFrame:
    """Distinct (repo, number) from every frame with ``repo`` and ``pr_number`` columns."""
    parts = [
        f.select("repo", pl.col("pr_number").cast(pl.Int64).alias("number")).drop_nulls()
        for f in frames
        if f is not None and f.height and "pr_number" in f.columns
    ]
    if not parts:
        return pl.DataFrame(schema={"repo": pl.String, "number": pl.Int64})
    return pl.concat(parts).unique().sort("repo", "number")


STATE_SCHEMA: dict[str, pl.DataType] = {
    "prs_needed": pl.Int64(),
    "bodies_available": pl.Int64(),
    "bodies_unavailable": pl.Int64(),
    "extracted": pl.Boolean(),
    "reason": pl.String(),
}


def extraction_state(needed: pl.DataFrame, bodies: pl.DataFrame | None) -> dict[str, Any]:
    """Whether gains were extracted at all, in words, for status, cards and the gate.

    ``reason`` is ``"gains not extracted: 845 of 845 PR bodies unavailable"`` when no
    referenced PR has a body (offline, no token), so nothing downstream reads an empty
    gains table as "0 PRs with benchmark numbers"; it names the partial case too.
    """
    have: set[tuple[str, int]] = set()
    if bodies is not None and bodies.height and "status" in bodies.columns:
        have = {
            (r[0], int(r[1]))
            for r in bodies.filter(pl.col("status") == "ok").select("repo", "number").iter_rows()
        }
    keys = (
        {(r[0], int(r[1])) for r in needed.select("repo", "number").iter_rows()}
        if needed.height
        else set()
    )
    if not keys:
        keys = set(have)
    available = len(keys & have) if needed.height else len(have)
    unavailable = len(keys) - available
    if not keys:
        reason = "gains not extracted: no PR is referenced yet"
    elif available == 0:
        reason = f"gains not extracted: {unavailable:,} of {len(keys):,} PR bodies unavailable"
    elif unavailable:
        reason = (
            f"gains extracted from {available:,} of {len(keys):,} PR bodies "
            f"({unavailable:,} unavailable)"
        )
    else:
        reason = f"gains extracted from all {len(keys):,} PR bodies"
    return {
        "prs_needed": len(keys),
        "bodies_available": available,
        "bodies_unavailable": unavailable,
        "extracted": available > 0,
        "reason": reason,
    }


def extractor_code_version(llm_model: str | None) -> str:
    """The ``pr_gains`` asset's code version: the deterministic extractor's version, and the
    LLM prompt's version and model when an endpoint is configured. Read from the modules at
    call time, so a new extractor version marks pr_gains stale and ``refresh`` re-runs it."""
    from dagster_project import gpus
    from dagster_project.gains import llm_extractor, policy
    from dagster_project.gains.extract import choose

    # GPU names decide gains attribution (gains/mentions.py), so their version is part of it.
    version = (
        f"table-{choose.EXTRACTOR_VERSION}+gpus-{gpus.RULES_VERSION}"
        f"+quarantine-{QUARANTINE_VERSION}+policy-{policy.POLICY_VERSION}"
    )
    if llm_model:
        version += f"+llm-{llm_extractor.PROMPT_VERSION}:{llm_model}"
    return version


def _run_key(
    repo: str, number: int, sha: str, extractor: str, version: str, model: str | None
) -> str:
    return f"{repo}#{number}|{sha}|{extractor}|{version}|{model or ''}"


def extract_bodies(
    bodies: pl.DataFrame,
    previous_runs: pl.DataFrame | None,
    llm_config: LLMConfig | None,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[pl.DataFrame, int]:
    """One extraction run per (PR, extractor) whose key is not in ``previous_runs``.

    Returns (all runs: reused + new, number of new runs). A failed extraction is a run
    with ``ok = False``, empty measurements and the reason.
    """
    done = (
        {}
        if previous_runs is None or not previous_runs.height
        else {r["run_key"]: r for r in previous_runs.iter_rows(named=True)}
    )
    llm = LLMExtractor(llm_config) if llm_config else None
    secrets = [llm_config.api_key] if llm_config else []
    out: list[dict[str, Any]] = []
    new = 0
    ok_bodies = bodies.filter(pl.col("status") == "ok")
    total = ok_bodies.height
    for i, row in enumerate(ok_bodies.iter_rows(named=True)):
        text = pr_text(row["title"], row["body"])
        sha = body_sha256(text)
        plans: list[tuple[Literal["table", "llm"], str, str | None]] = [
            ("table", EXTRACTOR_VERSION, None)
        ]
        if llm_config:
            plans.append(("llm", PROMPT_VERSION, llm_config.model))
        for extractor, version, model in plans:
            key = _run_key(row["repo"], row["number"], sha, extractor, version, model)
            if key in done:
                out.append(done[key])
                continue
            res = extract_pr_gains(
                text, extractor=extractor, llm=llm, repo=row["repo"], pr_number=row["number"]
            )
            new += 1
            out.append(
                {
                    "run_key": key,
                    "repo": row["repo"],
                    "number": row["number"],
                    "body_sha256": sha,
                    "extractor": extractor,
                    "extractor_version": version,
                    "model_used": res.model_used,
                    "ok": res.ok,
                    "error": scrub_text(res.error or "", secrets) or None,
                    "n_measurements": len(res.measurements),
                    "prompt_tokens": int(res.usage.get("prompt_tokens", 0)),
                    "completion_tokens": int(res.usage.get("completion_tokens", 0)),
                    # second wall: the stored row is scrubbed as decoded JSON too
                    "measurements_json": scrub_json_text(
                        json.dumps([m.to_row() for m in res.measurements]), secrets
                    ),
                }
            )
        if on_progress:
            on_progress(i + 1, total)
    return pl.DataFrame(out, schema=RUNS_SCHEMA), new


def gains_frame(runs: pl.DataFrame) -> pl.DataFrame:
    """``derived.pr_gains``: one row per measurement, flagged ``primary`` for the
    extractor attribution uses (llm when it ran successfully for that PR, else table)."""
    rows: list[dict[str, Any]] = []
    llm_ok = {
        (r["repo"], r["number"])
        for r in runs.iter_rows(named=True)
        if r["extractor"] == "llm" and r["ok"]
    }
    for r in runs.iter_rows(named=True):
        primary = (r["extractor"] == "llm") == ((r["repo"], r["number"]) in llm_ok)
        for i, m in enumerate(json.loads(r["measurements_json"] or "[]")):
            m = _with_policy(dict(m))
            m.pop("repo", None)
            m.pop("pr_number", None)
            gain_id = f"{r['repo']}#{r['number']}:{r['extractor']}:{i}"
            rows.append(
                {
                    "gain_id": gain_id,
                    "repo": r["repo"],
                    "pr_number": r["number"],
                    "idx": i,
                    "primary": primary,
                    **m,
                }
            )
    schema = _gains_schema()
    if not rows:
        return pl.DataFrame(schema=schema)
    held = quarantined_prs(rows)
    for row in rows:
        row["quarantined"] = (row["repo"], row["pr_number"]) in held
        # the gate's column: the audit verdict of what reaches a dataset, null for the rest
        row["published_audit_pass"] = (
            bool(row.get("audit_pass")) if row["primary"] and not row["quarantined"] else None
        )
    return pl.DataFrame(rows, schema=schema)


def _with_policy(row: dict[str, Any]) -> dict[str, Any]:
    """A cached measurement with the current publication policy applied (the policy is a
    pure function of the audited fields, so a policy change needs no re-extraction)."""
    from dagster_project.gains.policy import apply_policy

    m = apply_policy(Measurement.from_dict(row))
    row.update(
        evidence_class=m.evidence_class,
        confidence=m.confidence,
        published=m.published,
        withheld_reason=m.withheld_reason,
    )
    return row


#: Version of the quarantine rule below; part of ``pr_gains``' code version.
QUARANTINE_VERSION = "1"

QUARANTINE_SCHEMA: dict[str, pl.DataType] = {
    "repo": pl.String(),
    "pr_number": pl.Int64(),
    "extractor": pl.String(),
    "values": pl.Int64(),
    "failed_values": pl.Int64(),
    "reasons": pl.String(),
    "quarantine_version": pl.String(),
}


def quarantined_prs(rows: list[dict[str, Any]]) -> set[tuple[str, int]]:
    """PRs held back whole: any value the primary extractor read from them failed the audit.

    Why per PR and not per value (issue 42): a PR body is untrusted input, and a body
    that injects values the audit rejects is not trusted for the values it passes either;
    and why quarantine rather than a failed gate: one contributor's PR once dropped the
    audit rate under the blocking gate and stopped both mined datasets. The gate measures
    the extractor on what it publishes (``published_audit_pass``), the datasets build
    without the quarantined PRs' gains, and ``derived.pr_quarantine`` says what was held
    back and why."""
    return {
        (r["repo"], r["pr_number"])
        for r in rows
        if r["primary"] and r.get("audit_pass") is not True
    }


def quarantine_frame(gains: pl.DataFrame) -> pl.DataFrame:
    """``derived.pr_quarantine``: one row per quarantined PR, with its audit reasons."""
    if not gains.height or "quarantined" not in gains.columns:
        return pl.DataFrame(schema=QUARANTINE_SCHEMA)
    held = gains.filter(pl.col("quarantined") & pl.col("primary"))
    if not held.height:
        return pl.DataFrame(schema=QUARANTINE_SCHEMA)
    out = (
        held.group_by("repo", "pr_number")
        .agg(
            pl.col("extractor").first(),
            pl.len().cast(pl.Int64).alias("values"),
            (~pl.col("audit_pass").fill_null(False)).sum().cast(pl.Int64).alias("failed_values"),
            pl.col("audit_reason")
            .filter(pl.col("audit_reason").fill_null("") != "")
            .unique()
            .sort()
            .str.join("; ")
            .alias("reasons"),
        )
        .with_columns(pl.lit(QUARANTINE_VERSION).alias("quarantine_version"))
        .sort("repo", "pr_number")
    )
    return out.select(list(QUARANTINE_SCHEMA)).cast(dict(QUARANTINE_SCHEMA.items()))


CROSSCHECK_SCHEMA: dict[str, pl.DataType] = {
    "repo": pl.String(),
    "number": pl.Int64(),
    "agree": pl.Boolean(),
    "only_table": pl.String(),
    "only_llm": pl.String(),
    "llm_audit_failed": pl.Int64(),
}


def cross_checks(runs: pl.DataFrame) -> pl.DataFrame:
    """``derived.pr_gains_crosscheck``: per PR with both a table and a successful LLM run,
    what one extractor found and the other did not (see ``llm_extractor.cross_check``)."""
    from dagster_project.gains.llm_extractor import cross_check

    by_pr: dict[tuple[str, int], dict[str, list[Measurement]]] = {}
    for r in runs.iter_rows(named=True):
        if not r["ok"]:
            continue
        ms = [Measurement.from_dict(d) for d in json.loads(r["measurements_json"] or "[]")]
        by_pr.setdefault((r["repo"], r["number"]), {})[r["extractor"]] = ms
    rows = []
    for (repo, number), got in sorted(by_pr.items()):
        if "table" not in got or "llm" not in got:
            continue
        cc = cross_check(got["table"], got["llm"])
        rows.append(
            {
                "repo": repo,
                "number": number,
                "agree": cc["agree"],
                "only_table": json.dumps(cc["only_table"]),
                "only_llm": json.dumps(cc["only_llm"]),
                "llm_audit_failed": cc["llm_audit_failed"],
            }
        )
    return (
        pl.DataFrame(rows, schema=CROSSCHECK_SCHEMA)
        if rows
        else pl.DataFrame(schema=CROSSCHECK_SCHEMA)
    )


def _gains_by_pr(pr_gains: pl.DataFrame | None) -> dict[tuple[str, int], list[Measurement]]:
    """The primary extractor's *published* measurements per PR (audited, and kept by the
    publication policy, :mod:`dagster_project.gains.policy`): the only ones that reach a
    dataset column (gains, config_pr_gains, kernel_speedup, e2e_speedup,
    speedup_vs_default). The rest stay in ``derived.pr_gains`` with ``withheld_reason``."""
    if pr_gains is None or not pr_gains.height or "primary" not in pr_gains.columns:
        return {}
    out: dict[tuple[str, int], list[Measurement]] = {}
    usable = pl.col("primary") & pl.col("audit_pass").fill_null(False)
    if "published" in pr_gains.columns:
        usable = usable & pl.col("published").fill_null(False)
    if "quarantined" in pr_gains.columns:  # a quarantined PR gives no value at all
        usable = usable & ~pl.col("quarantined").fill_null(False)
    for r in pr_gains.filter(usable).iter_rows(named=True):
        out.setdefault((r["repo"], int(r["pr_number"])), []).append(Measurement.from_dict(r))
    return out


def attach_config_gains(rows: pl.DataFrame, pr_gains: pl.DataFrame | None) -> pl.DataFrame:
    """Fill ``config_pr_gains`` (all of the PR's measurements) and ``speedup_vs_default``
    (only when unambiguous: GPU and shape match, batch size equals M, agreement ≤5%)."""
    by_pr = _gains_by_pr(pr_gains)
    if not by_pr or "config_pr_number" not in rows.columns:
        return rows
    files_per_pr = (
        rows.select("repo", "config_pr_number", "config_path")
        .unique()
        .group_by("repo", "config_pr_number")
        .len()
    )
    single = {(r[0], r[1]) for r in files_per_pr.filter(pl.col("len") == 1).iter_rows()}
    gains_col, speed_col = [], []
    for row in rows.iter_rows(named=True):
        key = (row["repo"], row["config_pr_number"])
        ms = by_pr.get(key) if row["config_pr_number"] is not None else None
        if not ms:
            gains_col.append(row.get("config_pr_gains"))
            speed_col.append(row.get("speedup_vs_default"))
            continue
        att = attribute_config_row(row, ms, implied_by_pr=key in single)
        gains_col.append(json.dumps(att["config_pr_gains"]))
        speed_col.append(att["speedup_vs_default"])
    return rows.with_columns(
        config_pr_gains=pl.Series(gains_col, dtype=pl.String),
        speedup_vs_default=pl.Series(speed_col, dtype=pl.Float64),
    )


def attach_commit_gains(
    rows: pl.DataFrame, pr_gains: pl.DataFrame | None, bodies: pl.DataFrame | None
) -> pl.DataFrame:
    """Fill ``pr_body``, ``gains``, ``kernel_speedup`` and ``e2e_speedup`` per row."""
    by_pr = _gains_by_pr(pr_gains)
    body_of: dict[tuple[str, int], str | None] = {}
    if bodies is not None and bodies.height:
        for b in bodies.filter(pl.col("status") == "ok").iter_rows(named=True):
            body_of[(b["repo"], int(b["number"]))] = b["body"]
    g_col, k_col, e_col, b_col = [], [], [], []
    for row in rows.select("repo", "pr_number").iter_rows():
        key = (row[0], int(row[1])) if row[1] is not None else None
        ms = by_pr.get(key, []) if key else []
        sp = kernel_commit_speedups(ms) if ms else {"kernel_speedup": None, "e2e_speedup": None}
        g_col.append(json.dumps([m.to_gain() for m in ms]) if key in body_of or ms else None)
        k_col.append(sp["kernel_speedup"])
        e_col.append(sp["e2e_speedup"])
        b_col.append(body_of.get(key) if key else None)
    return rows.with_columns(
        pr_body=pl.Series(b_col, dtype=pl.String),
        gains=pl.Series(g_col, dtype=pl.String),
        kernel_speedup=pl.Series(k_col, dtype=pl.Float64),
        e2e_speedup=pl.Series(e_col, dtype=pl.Float64),
    )


__all__ = [
    "RUNS_SCHEMA",
    "attach_commit_gains",
    "attach_config_gains",
    "cross_checks",
    "extract_bodies",
    "extraction_state",
    "gains_frame",
    "llm_cache_key",
    "pr_numbers_needed",
    "quarantine_frame",
    "quarantined_prs",
]


@dataclass(frozen=True)
class GainsTables:
    """What the pr_gains asset writes (``derived.pr_extractions``, ``derived.pr_gains``,
    ``derived.pr_gains_state``, ``derived.pr_gains_crosscheck``, ``derived.pr_quarantine``) and
    its metadata."""

    runs: pl.DataFrame
    gains: pl.DataFrame
    state: pl.DataFrame
    crosscheck: pl.DataFrame
    metadata: dict[str, Any]
    quarantine: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=QUARANTINE_SCHEMA))


def _speedup_plots(gains: pl.DataFrame) -> str:
    """Histograms of the primary measurements' speedups, kernel then e2e ('' if none)."""
    plots = ""
    with_speedup = gains.filter(pl.col("speedup").is_not_null() & pl.col("primary"))
    if with_speedup.height:
        from dagster_project.report import plots_markdown

        for scope in ("kernel", "e2e"):
            part = with_speedup.filter(pl.col("scope") == scope)
            if part.height:
                plots += (
                    plots_markdown(
                        part, "histogram", x="speedup", log_x=True, title=f"{scope} speedups"
                    )
                    + "\n\n"
                )
    return plots


def gains_tables(
    bodies: pl.DataFrame | None,
    needed_from: Sequence[pl.DataFrame | None],
    previous: pl.DataFrame | None,
    llm: dict[str, Any] | None,
    *,
    log: Callable[[str], None],
    warn: Callable[[str], None],
) -> GainsTables:
    """Extract the PRs the datasets need from the cached ``bodies`` (only new or changed
    bodies, extractors or models; ``previous`` runs are reused), audit, cross-check the
    extractors, and assemble the asset's metadata. ``needed_from``: the (repo, pr_number)
    frames of config attribution and kernel commit files, ``None`` where not built."""
    from dagster_project.gains.audit import audit_rate

    state = extraction_state(pr_numbers_needed(*needed_from), bodies)
    if not state["extracted"]:
        warn(state["reason"])
    llm_cfg = LLMConfig(**llm) if llm else None
    runs, new = (
        extract_bodies(
            bodies,
            previous,
            llm_cfg,
            on_progress=lambda i, n: log(f"extracted {i}/{n}") if i % 100 == 0 else None,
        )
        if bodies is not None and bodies.height
        else (pl.DataFrame(schema=RUNS_SCHEMA), 0)
    )
    gains = gains_frame(runs)
    checks = cross_checks(runs)
    # every extracted value counts (pairs and stated ratios), as in the 98.8% gate
    rate = audit_rate(gains.to_dicts()) if gains.height else None
    quarantine = quarantine_frame(gains)
    metadata: dict[str, Any] = {
        "plots": Markdown(_speedup_plots(gains) or state["reason"]),
        "gains_state": state["reason"],
        "dagster/row_count": gains.height,
        "dagster/column_schema": ColumnSchema("derived.pr_gains"),
        "new_extractions": new,
        "prs_with_gains": gains.select("repo", "pr_number").unique().height if gains.height else 0,
        "failed_extractions": int((~runs["ok"]).sum()) if runs.height else 0,
        "llm_table_disagreements": int((~checks["agree"]).sum()) if checks.height else 0,
        "audit_pass_rate": float(rate) if rate is not None else -1.0,
        "quarantined_prs": quarantine.height,
        "llm": llm["model"] if llm else "not configured (table extractor only)",
        # both token columns are integer columns: their sums are ints
        "tokens": int(
            cast(int, runs["prompt_tokens"].sum()) + cast(int, runs["completion_tokens"].sum())
        )
        if runs.height
        else 0,
    }
    return GainsTables(
        runs,
        gains,
        pl.DataFrame([state], schema=STATE_SCHEMA),
        checks,
        metadata,
        quarantine,
    )
