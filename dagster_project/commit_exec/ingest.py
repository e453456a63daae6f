"""Device results (the runner's JSON lines) -> compact Parquet batches shipped in the
package, and the batches -> the frames the lake holds.

A batch is two files under ``commit_exec/data/``: ``<batch>.runs.parquet`` (one row per
kernel_commits row run: status, equivalence, both scopes' speedups with 95% CIs, the
toolchain stamp) and ``<batch>.shapes.parquet`` (one row per shape: role, oracle checks,
medians, speedup, CI, Mann-Whitney p, the raw samples). The row-level speedup of a scope
is the geometric mean over the row's named and random shapes of before/after medians, with
a bootstrap CI over all of them (``device.stats``); the control shape is reported, never
averaged in. Ingestion needs no GPU: a fresh build reads the shipped batches.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from .device import stats
from .device.judge import JUDGE_VERSION, judge

#: Where shipped batches live.
DATA_DIR = Path(__file__).parent / "data"

RUN_SCHEMA: dict[str, Any] = {
    "batch": pl.String,
    "id": pl.String,
    "repo": pl.String,
    "sha": pl.String,
    "path": pl.String,
    "spec": pl.String,
    "status": pl.String,
    "error": pl.String,
    "equivalent": pl.Boolean,
    "shapes_checked": pl.Int64,
    "graph_speedup": pl.Float64,
    "graph_ci_lo": pl.Float64,
    "graph_ci_hi": pl.Float64,
    "host_speedup": pl.Float64,
    "host_ci_lo": pl.Float64,
    "host_ci_hi": pl.Float64,
    "graph_significant": pl.Boolean,
    "host_significant": pl.Boolean,
    "heldout_graph_speedup": pl.Float64,
    "control_graph_speedup": pl.Float64,
    "control_graph_ci_lo": pl.Float64,
    "control_graph_ci_hi": pl.Float64,
    "control_kind": pl.String,
    "gpu": pl.String,
    "driver": pl.String,
    "cuda": pl.String,
    "torch": pl.String,
    "triton": pl.String,
    "harness_version": pl.String,
    "judge_version": pl.String,
    "seconds": pl.Float64,
    "label_version": pl.String,  # stats.LABEL_VERSION: the rule the row's speedups follow
}

SHAPE_SCHEMA: dict[str, Any] = {
    "batch": pl.String,
    "id": pl.String,
    "role": pl.String,
    "shape": pl.String,
    "equivalent": pl.Boolean,
    "max_abs_err": pl.Float64,
    "why": pl.String,
    "before_matches_reference": pl.Boolean,
    "after_matches_reference": pl.Boolean,
    "scope": pl.String,
    "before_us": pl.Float64,
    "after_us": pl.Float64,
    "speedup": pl.Float64,
    "ci_lo": pl.Float64,
    "ci_hi": pl.Float64,
    "p": pl.Float64,
    "sets": pl.Int64,
    "block_size": pl.Int64,  # harness >= 6: samples per block (stats.block_interval); else null
    "samples_before": pl.List(pl.Float64),
    "samples_after": pl.List(pl.Float64),
    "error": pl.String,
}

SCOPES = stats.SCOPES
#: A scope's recorded figures copied into the shapes table.
TIMING_FIELDS = ("before_us", "after_us", "speedup", "ci_lo", "ci_hi", "p", "block_size")

#: Statuses the equivalence rule decides (re-applied on ingestion to the recorded checks).
JUDGED = frozenset({"executed", "not_equivalent", "reference_mismatch"})

#: Known bugs of our own harness, by (spec, harness version), each of which can only make a
#: row fail falsely (too strict a comparison): a row that failed under one says nothing about
#: the commit, so its status becomes ``harness_error`` with the note; rows that passed stand.
HARNESS_BUGS: dict[tuple[str, str], str] = {
    ("vllm_silu_mul_fp8_quant_deep_gemm", "1"): (
        "harness 1 zeroed the undefined rows past each expert's count by multiplying, and "
        "inf * 0 is NaN: rows differed where the kernel never wrote (fixed in harness 2)"
    ),
    ("vllm_per_token_group_quant_fp8", "1"): (
        "harness 1's fp8 tolerance had no absolute part, so a value one e4m3 subnormal step "
        "(2^-9) from the reference failed (1 element in 29M; fixed in harness 2)"
    ),
}


def _scope_rows(batch: str, rid: str, shape: dict[str, Any]) -> list[dict[str, Any]]:
    base = {
        "batch": batch,
        "id": rid,
        "role": shape["role"],
        "shape": shape["shape"],
        "equivalent": shape.get("equivalent"),
        "max_abs_err": (shape.get("after_vs_before") or {}).get("max_abs_err"),
        "why": (shape.get("after_vs_before") or {}).get("why") or None,
        "before_matches_reference": (shape.get("before_vs_reference") or {}).get("ok"),
        "after_matches_reference": (shape.get("after_vs_reference") or {}).get("ok"),
    }
    timing = shape.get("timing")
    if not timing:
        return [{**base, "scope": None}]
    out = []
    for scope in SCOPES:
        t = _current_interval(timing.get(scope) or {})
        out.append(
            {
                **base,
                "scope": scope,
                "sets": timing.get("sets"),
                "error": t.get("error"),
                **{k: t.get(k) for k in TIMING_FIELDS},
                "samples_before": t.get("samples_before"),
                "samples_after": t.get("samples_after"),
            }
        )
    return out


def _current_interval(t: dict[str, Any]) -> dict[str, Any]:
    """A harness-6 scope's speedup and interval recomputed from its samples by today's
    ``stats`` (the device wrote the figures of the rule it ran): a shipped batch's per-shape
    figures and its row figures follow one rule. Older scopes are kept as recorded."""
    if "block_size" not in t or "samples_before" not in t:
        return t
    speedup, lo, hi = stats.scope_interval([t])
    return {**t, "speedup": speedup, "ci_lo": lo, "ci_hi": hi}


def _row_speedup(shapes: list[dict[str, Any]], scope: str, roles: tuple[str, ...]) -> tuple:
    timings = [
        s["timing"][scope]
        for s in shapes
        if s["role"] in roles and "speedup" in (s.get("timing") or {}).get(scope, {})
    ]
    if not timings:
        return None, None, None
    return stats.scope_interval(timings, seed=len(timings))


#: Why an out-of-memory error in a shared checking phase is not a verdict on the row.
SHARED_OOM = (
    "out of memory while the warm-up's checking processes shared the card (another row's "
    "allocation held it): says nothing about this row; its single-process run decides"
)


def _is_oom(error: str | None) -> bool:
    return bool(error) and "out of memory" in str(error).lower()


def _status(res: dict[str, Any], shared_check: bool = False) -> tuple[str, bool | None, str | None]:
    """(status, equivalent, error) under the current rule and the known harness bugs.

    ``shared_check``: the line comes from the warm-up, where eight checking processes share
    one GPU (``benchmarks/device/commit_exec.sh``); a CUDA out-of-memory there is the
    harness's doing, so it becomes ``harness_error``. Its other verdicts stand: each shape
    was checked on the GPU exactly as in the timed run, only not timed."""
    status, equivalent, error = res.get("status"), res.get("equivalent"), res.get("error")
    if shared_check and status == "run_error" and _is_oom(error):
        return "harness_error", None, SHARED_OOM
    if status in JUDGED and res.get("shapes"):
        status, equivalent = judge(res["shapes"])
    bug = HARNESS_BUGS.get((res.get("spec") or "", str(res.get("harness_version"))))
    if bug and status in JUDGED and status != "executed":
        return "harness_error", None, bug
    return str(status), equivalent, error


def run_record(batch: str, res: dict[str, Any], shared_check: bool = False) -> dict[str, Any]:
    """One runner line -> one runs row."""
    shapes = res.get("shapes", [])
    chain = res.get("toolchain", {})
    status, equivalent, error = _status(res, shared_check)
    row: dict[str, Any] = {
        "batch": batch,
        **{k: res.get(k) for k in ("id", "repo", "sha", "path", "spec")},
        "status": status,
        "error": error,
        "equivalent": equivalent,
        "judge_version": JUDGE_VERSION,
        "label_version": stats.LABEL_VERSION,
        "shapes_checked": len([s for s in shapes if s["role"] != "control_aa"]),
        **{k: chain.get(k) for k in ("gpu", "driver", "cuda", "torch", "triton")},
        "harness_version": res.get("harness_version"),
        "seconds": res.get("seconds"),
    }
    for scope in SCOPES:
        sp, lo, hi = _row_speedup(shapes, scope, stats.LABEL_ROLES)
        row.update({f"{scope}_speedup": sp, f"{scope}_ci_lo": lo, f"{scope}_ci_hi": hi})
        row[f"{scope}_significant"] = None if lo is None else stats.significant(lo, hi)
    row["heldout_graph_speedup"] = _row_speedup(shapes, "graph", ("random",))[0]
    control = [s for s in shapes if s["role"] in ("control", "control_aa")]
    if control:
        sp, lo, hi = _row_speedup(control, "graph", (control[0]["role"],))
        row.update(
            control_graph_speedup=sp,
            control_graph_ci_lo=lo,
            control_graph_ci_hi=hi,
            control_kind="path" if control[0]["role"] == "control" else "before_vs_before",
        )
    return row


def frames(
    batch: str, lines: Iterable[str], shared_check: bool = False
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(runs, shapes) of one batch from the runner's JSON lines (blank lines skipped)."""
    runs, shapes = [], []
    for line in lines:
        if not line.strip():
            continue
        res = json.loads(line)
        runs.append(run_record(batch, res, shared_check))
        for shape in res.get("shapes", []):
            shapes.extend(_scope_rows(batch, res["id"], shape))
    return (
        pl.DataFrame(runs, schema=RUN_SCHEMA),
        pl.DataFrame(shapes, schema=SHAPE_SCHEMA),
    )


def write_batch(
    batch: str, results: Path, dest: Path = DATA_DIR, shared_check: bool = False
) -> tuple[Path, Path]:
    """Convert a results file into the two shipped Parquet files of ``batch``."""
    runs, shapes = frames(batch, results.read_text().splitlines(), shared_check)
    dest.mkdir(parents=True, exist_ok=True)
    paths = (dest / f"{batch}.runs.parquet", dest / f"{batch}.shapes.parquet")
    runs.write_parquet(paths[0], compression="zstd")
    shapes.write_parquet(paths[1], compression="zstd")
    return paths


def _current_significance(runs: pl.DataFrame) -> pl.DataFrame:
    """A batch's ``*_significant`` flags re-decided from its stored CIs by today's rule
    (``stats.significant``, its floor ``stats.MIN_EFFECT``): a shipped batch never carries an
    older floor's verdict. Row by row through the rule itself, so it has one home (batches
    hold a few hundred rows)."""
    out = {}
    for scope in SCOPES:
        pairs = zip(runs[f"{scope}_ci_lo"].to_list(), runs[f"{scope}_ci_hi"].to_list(), strict=True)
        out[f"{scope}_significant"] = pl.Series(
            [None if lo is None or hi is None else stats.significant(lo, hi) for lo, hi in pairs],
            dtype=pl.Boolean,
        )
    return runs.with_columns(**out)


def _current_speedups(runs: pl.DataFrame, shapes: pl.DataFrame) -> pl.DataFrame:
    """A batch's row speedups and intervals re-read from its per-shape samples by today's
    label rule (``stats.LABEL_ROLES``, ``stats.scope_interval``). Recomputing the pooled
    rule this way reproduces every stored figure of s01-s08 exactly (194 row-scopes, stop
    42), so the stored samples are the whole evidence. A row-scope without samples of those
    roles has no speedup. Slow for harness <= 5 batches (a pure-Python bootstrap per row:
    about 17 s for all of s01-s08), hence ``relabel`` stores the result once."""
    timed = shapes.filter(
        pl.col("samples_before").is_not_null() & pl.col("role").is_in(list(stats.LABEL_ROLES))
    )
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in timed.iter_rows(named=True):
        t: dict[str, Any] = {
            "samples_before": r["samples_before"],
            "samples_after": r["samples_after"],
        }
        if r.get("block_size") is not None:  # harness <= 5 batches have no such column
            t["block_size"] = r["block_size"]
        groups.setdefault((r["batch"], r["id"], r["scope"]), []).append(t)
    cols: dict[str, list[Any]] = {
        f"{s}_{k}": [] for s in SCOPES for k in ("speedup", "ci_lo", "ci_hi")
    }
    for batch, rid in runs.select("batch", "id").iter_rows():
        for scope in SCOPES:
            ts = groups.get((batch, rid, scope))
            sp, lo, hi = stats.scope_interval(ts, seed=len(ts)) if ts else (None, None, None)
            cols[f"{scope}_speedup"].append(sp)
            cols[f"{scope}_ci_lo"].append(lo)
            cols[f"{scope}_ci_hi"].append(hi)
    return runs.with_columns(
        [pl.Series(k, v, dtype=pl.Float64) for k, v in cols.items()]
        + [pl.lit(stats.LABEL_VERSION).alias("label_version")]
    )


def _is_current(runs: pl.DataFrame) -> bool:
    return "label_version" in runs.columns and bool(
        (runs["label_version"] == stats.LABEL_VERSION).all()
    )


def relabel(dest: Path = DATA_DIR) -> list[Path]:
    """Rewrite each shipped batch whose row figures follow an older label rule with
    today's (``_current_speedups``, through a temporary file: a kill mid-write leaves the
    old batch); the per-shape file, the evidence, is never touched. Returns the batches
    rewritten. ``python -m dagster_project.commit_exec.ingest --relabel``."""
    done = []
    for p in sorted(dest.glob("*.runs.parquet")):
        runs = pl.read_parquet(p)
        if _is_current(runs):
            continue
        shapes = pl.read_parquet(p.with_name(p.name.replace(".runs.", ".shapes.")))
        tmp = p.with_suffix(".tmp")
        _current_speedups(runs, shapes).write_parquet(tmp, compression="zstd")
        tmp.replace(p)
        done.append(p)
    return done


def shipped(dest: Path = DATA_DIR) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every shipped batch, concatenated (empty frames with the schemas when none); row
    figures under today's label rule (a batch stored under an older one is re-derived from
    its samples here, ``relabel`` stores that) and significance floor."""
    shapes = {
        p.name.split(".")[0]: pl.read_parquet(p) for p in sorted(dest.glob("*.shapes.parquet"))
    }
    runs = []
    for p in sorted(dest.glob("*.runs.parquet")):
        r = pl.read_parquet(p)
        if not _is_current(r):
            r = _current_speedups(r, shapes[p.name.split(".")[0]])
        runs.append(_current_significance(r))
    return (
        pl.concat(runs, how="diagonal_relaxed") if runs else pl.DataFrame(schema=RUN_SCHEMA),
        pl.concat(list(shapes.values()), how="diagonal_relaxed")
        if shapes
        else pl.DataFrame(schema=SHAPE_SCHEMA),
    )


def main(argv: list[str]) -> int:
    """``python -m dagster_project.commit_exec.ingest BATCH RESULTS.jsonl [--shared-check]``
    (``--shared-check`` for the warm-up's ``warm.jsonl``: checked on the GPU, not timed);
    ``--relabel`` rewrites the shipped batches stored under an older label rule."""
    if argv == ["--relabel"]:
        for p in relabel():
            print("relabelled", p)
        return 0
    shared = "--shared-check" in argv
    args = [a for a in argv if a != "--shared-check"]
    for p in write_batch(args[0], Path(args[1]), shared_check=shared):
        print(p)
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
