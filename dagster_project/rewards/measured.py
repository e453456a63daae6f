"""The CPU side of measured configs: plan GPU batches, ingest their results, build the set.

``dagster_project.rewards.gpu`` measures on a GPU machine that has neither the lake nor
polars; this module is the other half and runs where the lake is:

* ``plan_batch`` picks the next ``tuned_configs`` rows of one GPU that have no
  measurement yet, stratified over (kernel, quantisation, repo) so every batch covers
  every family, and completes each row with what the GPU side needs but the row does not
  carry: the model's hidden size (MoE file names have no K) and top-k, fused shared
  experts, which GEMMs the config governs. ``write_batch`` writes them as JSONL.
* ``ingest_results`` reads the runner's result JSONL into ``raw.measured_configs`` (one
  row per (tuned row, candidate), keyed upsert on the tuned row id; candidates of a row
  measured across several runs are merged, the newest result winning).
* ``build_measured_dataset`` rebuilds ``datasets.measured_configs`` (one row per
  measured tuned row: the partial latency table, tuned/default/best times and
  ``measured_speedup_vs_default``) from the SQL in ``sql/measured/``;
  ``export_measured`` writes it to ``exports/measured_configs/``.

Not part of the stdlib-only reward modules shipped as ``code/reward.py``: it uses polars.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from dagster_project.frames import ColumnSchema, Json, Markdown, md_table
from dagster_project.gpus import MEASURED_GPU
from dagster_project.mining.configs.candidates import match_models
from dagster_project.mining.configs.names import ConfigNameError, parse_config_name
from dagster_project.rewards.gpu.run_batch import read_results
from dagster_project.rewards.gpu.spec import MeasureRow, kernel_kind
from dagster_project.storage.lake import Lake, write_atomically
from sql import load_sql

H200 = MEASURED_GPU
#: Batch sizes tried per config file, in order of preference (each mapped to the file's
#: nearest M): decode, a mid batch, a prefill-sized batch, then fill-ins.
TARGET_M = (1, 64, 1024, 16, 256, 4096, 8, 128, 2048)

RAW_SCHEMA: dict[str, pl.DataType] = {
    "row_id": pl.String(),
    "label": pl.String(),
    "cand_index": pl.Int64(),
    "config": pl.String(),
    "status": pl.String(),
    "reason": pl.String(),
    "t_us": pl.Float64(),
    "rel_err": pl.Float64(),
    "details": pl.String(),
    "kernel": pl.String(),
    "repo": pl.String(),
    "quant": pl.String(),
    "M": pl.Int64(),
    "N": pl.Int64(),
    "K": pl.Int64(),
    "E": pl.Int64(),
    "top_k": pl.Int64(),
    "n_shared": pl.Int64(),
    "moe_gemms": pl.String(),
    "model": pl.String(),
    "device": pl.String(),
    "torch_version": pl.String(),
    "triton_version": pl.String(),
    "harness_version": pl.String(),
    "measured_at": pl.Datetime("us", "UTC"),
    "source": pl.String(),
    # harness 1.1.0: what a shipped batch needs to stand alone (no tuned_configs join),
    # and each result's noise: the p10-p90 spread of its replays over their median
    "dtype": pl.String(),
    "gpu": pl.String(),
    "config_path": pl.String(),
    "block_shape": pl.List(pl.Int64()),
    "best_config": pl.String(),
    "default_config": pl.String(),
    "documented_speedup_vs_default": pl.Float64(),
    "split": pl.String(),
    "kernel_source_sha": pl.String(),
    "spread": pl.Float64(),
    "reps": pl.Int64(),
    "timing": pl.String(),
    "driver_version": pl.String(),
    "cuda_version": pl.String(),
    # issue 38: the GPU the result was measured on (normalised from ``device``: a row of
    # one GPU measured on another is a cross-GPU transfer), and why an older result is
    # kept but no longer used for labels (``superseded``); both filled at ingestion
    "measured_on": pl.String(),
    "superseded_reason": pl.String(),
    # issue 38: the token-to-expert distribution the row's inputs were routed with
    # (``gpu.routing``; results before it are "uniform"), and for a result of an
    # exhaustive plan the tuner space it enumerates and that space's candidate count
    # (``gpu.space``; null for the tuned-config neighbourhoods)
    "routing": pl.String(),
    "exhaustive_space": pl.String(),
    "space_size": pl.Int64(),
}
#: The key of one latency table: a tuned row, the GPU it was timed on, its routing.
TABLE_KEY = ["row_id", "measured_on", "routing"]

#: Where measured batches ship with the package: ``<gpu folder>/batch-NNN.parquet``, one
#: file per device batch, RAW_SCHEMA columns (``kernelhouse gpu pack`` writes them).
SHIPPED_DIR = Path(__file__).resolve().parents[1] / "data" / "measured"
H100 = "NVIDIA H100"
GPU_FOLDERS = {H200: "h200", H100: "h100"}
#: Version of the rule that marks results as superseded (``superseded``).
SUPERSEDED_RULES = "1"


# -- planning ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelReading:
    """How an MoE shape is read as a model: hidden size, top-k, fused shared experts."""

    model: str
    how: str
    hidden: int
    top_k: int
    n_shared: int


def model_reading(
    E: int, N: int, dtype: str | None, repo: str, candidates: Sequence[str], shapes: pl.DataFrame
) -> ModelReading | None:
    """The first candidate model (in the row's order) whose shape explains (E, N).

    Plain tensor-parallel readings are preferred, then TP with fused shared experts
    (``E = experts + shared``: every token also visits the shared experts), then expert
    parallelism. Readings with shared experts replicated per rank are not used: which
    replica a token visits is not in the data.
    """
    table = shapes.filter(pl.col("model").is_in(list(candidates))) if candidates else shapes
    matches = match_models(E, N, None if dtype == "bf16/fp16" else dtype, repo, table)
    shared = dict(zip(shapes["model"], shapes["shared_experts"], strict=True))
    order = {m: i for i, m in enumerate(candidates)}

    def rank(m: Any) -> tuple[int, int]:
        how = m.how
        kind = (
            0
            if how.startswith("TP") and "shared" not in how
            else 1
            if how.startswith("TP") and "fused shared" in how
            else 2
            if how.startswith("EP") and "shared" not in how
            else 3
            if how.startswith("EP") and "fused shared" in how
            else 9
        )
        return kind, order.get(m.model, len(order))

    usable = sorted((m for m in matches if rank(m)[0] < 9), key=rank)
    if not usable:
        return None
    m = usable[0]
    n_shared = int(shared.get(m.model) or 0) if "fused shared" in m.how else 0
    return ModelReading(m.model, m.how, int(m.hidden_size), int(m.top_k), n_shared)


def _per_channel(config_path: str) -> bool:
    try:
        return parse_config_name(config_path).per_channel_quant
    except ConfigNameError:
        return False


def _uses_tma(best_config: str | None) -> bool:
    try:
        return bool(json.loads(best_config or "{}").get("USE_TMA"))
    except ValueError:
        return False


def _stable(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def measurable_rows(lake: Lake, gpu: str = H200) -> tuple[list[MeasureRow], dict[str, int]]:
    """Every row of ``gpu`` the harness can measure, completed for the GPU side, and the
    count of rows left out per reason."""
    rows = lake.query(load_sql("measured/rows_for_gpu"), {"gpu": gpu})
    shapes = lake.read_table("raw", "moe_model_shapes")
    paths = set(rows["config_path"].to_list())
    out: list[MeasureRow] = []
    skipped: dict[str, int] = {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    readings: dict[tuple, ModelReading | None] = {}
    for r in rows.iter_rows(named=True):
        kind = kernel_kind(r["kernel"])
        if kind is None:
            skip(f"kernel {r['kernel']} not launched by the harness")
            continue
        if _uses_tma(r["best_config"]):
            skip("tuned config asks for TMA descriptors")
            continue
        fields: dict[str, Any] = {
            **r,
            "per_channel_quant": _per_channel(r["config_path"]),
            "extra": {
                "split": r.get("split"),
                "documented_speedup_vs_default": r.get("speedup_vs_default"),
            },
        }
        if kind == "moe":
            key = (r["E"], r["N"], r["dtype"], r["repo"], tuple(r["candidate_models"] or ()))
            if key not in readings:
                readings[key] = model_reading(
                    r["E"], r["N"], r["dtype"], r["repo"], list(r["candidate_models"] or ()), shapes
                )
            reading = readings[key]
            if reading is None:
                skip("no candidate model: hidden size and top_k unknown")
                continue
            down_twin = r["config_path"].removesuffix(".json") + "_down.json"
            fields.update(
                K=reading.hidden,
                top_k=reading.top_k,
                n_shared=reading.n_shared,
                model=f"{reading.model} ({reading.how})",
                moe_gemms="down" if r["is_down"] else "up" if down_twin in paths else "both",
            )
        else:
            fields["moe_gemms"] = "mm"
        row = MeasureRow.from_json(fields)
        problem = row.problem_error()
        if problem:
            skip(problem)
            continue
        out.append(row)
    return out, skipped


def measured_row_ids(lake: Lake, on: str | None = None) -> set[str]:
    """Rows whose tuned config already has a result (any status) that is not superseded;
    with ``on``, only results measured on that GPU (``measured_on``)."""
    if not lake.table_exists("raw", "measured_configs"):
        return set()
    df = lake.query(
        "SELECT DISTINCT row_id FROM raw.measured_configs WHERE label = 'tuned' "
        "AND superseded_reason IS NULL AND ($on IS NULL OR measured_on = $on)",
        {"on": on},
    )
    return set(df["row_id"].to_list())


def stratum(row: MeasureRow) -> tuple[str, str, str]:
    return (row.kernel, row.quant, row.repo)


def select_batch(
    rows: Sequence[MeasureRow], exclude: set[str], n_rows: int, m_per_file: int = 3
) -> list[MeasureRow]:
    """``n_rows`` unmeasured rows, round-robin over strata; within a stratum whole config
    files in a stable pseudo-random order, ``m_per_file`` batch sizes each (``TARGET_M``).

    Deterministic: the same lake and exclusions give the same batch, and the next batch
    (with this one excluded) continues with files not measured yet before returning to
    the other batch sizes of measured ones.
    """
    by_file: dict[tuple[str, str], list[MeasureRow]] = {}
    done: dict[tuple[str, str], int] = {}
    for r in rows:
        key = (r.repo, str(r.config_path))
        if r.id in exclude:
            done[key] = done.get(key, 0) + 1
        else:
            by_file.setdefault(key, []).append(r)
    strata: dict[tuple[str, str, str], list[list[MeasureRow]]] = {}
    # Files nobody measured yet first (more shapes and models per batch), then the rest.
    for _key, file_rows in sorted(
        by_file.items(), key=lambda kv: (done.get(kv[0], 0), _stable(kv[0][1]))
    ):
        picked: list[MeasureRow] = []
        for target in TARGET_M:
            if len(picked) >= m_per_file:
                break
            near = min(file_rows, key=lambda r: (abs(r.M - target), r.M))
            if near not in picked:
                picked.append(near)
        strata.setdefault(stratum(file_rows[0]), []).append(picked)
    queues = {k: [r for group in v for r in group] for k, v in sorted(strata.items())}
    chosen: list[MeasureRow] = []
    while len(chosen) < n_rows and any(queues.values()):
        for skey in sorted(queues):
            q = queues[skey]
            take = min(len(q), m_per_file, n_rows - len(chosen))  # a whole file's picks
            chosen.extend(q[:take])
            del q[:take]
            if len(chosen) >= n_rows:
                break
    # Measure in rounds: every file's first batch size, then every second one, ... so a
    # batch cut short by its time budget still covers every stratum (and the largest,
    # slowest M come last).
    rank = {
        r.id: i for picks in (p for v in strata.values() for p in v) for i, r in enumerate(picks)
    }
    order = {r.id: n for n, r in enumerate(chosen)}
    return sorted(chosen, key=lambda r: (rank[r.id], order[r.id]))


def m_bucket(M: int) -> str:
    """Batch-size bucket of a row: decode (M <= 16), small (<= 256), prefill (> 256)."""
    return "decode" if M <= 16 else "small" if M <= 256 else "prefill"


def variant_keys(row: MeasureRow) -> set[tuple]:
    """The compiled kernels a row's candidates need (``Launch.spec_key`` with the
    kernel's constexprs by value): rows sharing keys share compiles on the GPU host."""
    from dagster_project.rewards.gpu.neighbours import candidates
    from dagster_project.rewards.gpu.plan import plan_launches
    from dagster_project.rewards.gpu.routing import row_routing
    from dagster_project.rewards.gpu.source import KernelSourceError, signature_of, source_hash
    from dagster_project.rewards.gpu.spec import ConfigError, normalise_config

    try:
        sig = _signature(row.kernel_source, row.kernel, signature_of)
    except KernelSourceError:
        return set()
    constexprs = frozenset(p.name for p in sig.params if p.constexpr)
    routing = row_routing(row)
    src = source_hash(row.kernel_source)
    keys: set[tuple] = set()
    for c in candidates(row.best_config, row.default_config):
        try:
            cfg, _ = normalise_config(c.config)
            launches = plan_launches(row, cfg, sig, routing)
        except (ConfigError, ValueError):
            continue
        keys.add((src, row.kernel, tuple(lch.spec_key(constexprs) for lch in launches)))
    return keys


_SIGS: dict[tuple[str, str], Any] = {}


def _signature(source: str, kernel: str, parse: Any) -> Any:
    key = (_stable(source), kernel)
    if key not in _SIGS:
        _SIGS[key] = parse(source, kernel)
    return _SIGS[key]


def select_for_reuse(
    rows: Sequence[MeasureRow], exclude: set[str], n_rows: int
) -> list[MeasureRow]:
    """``n_rows`` unmeasured rows, round-robin over strata of (kernel, quantisation,
    repo, M bucket); within a stratum the row needing the fewest kernels not compiled
    for an earlier pick (ties in a stable pseudo-random order).

    Why: on the GPU host compiling is the cost (a few seconds of a core per kernel
    variant, against ~0.05 s to time one candidate), and rows of one file or model
    share most of their candidates' kernels. Every stratum still gets its turn in each
    round, so a batch of any size (or one cut short by its budget: rows are written in
    pick order) is stratified; the order only decides which rows of a stratum go first.
    """
    strata: dict[tuple[str, str, str, str], list[MeasureRow]] = {}
    for r in rows:
        if r.id not in exclude:
            strata.setdefault((*stratum(r), m_bucket(r.M)), []).append(r)
    keys = {r.id: variant_keys(r) for rs in strata.values() for r in rs}
    compiled: set[tuple] = set()
    for q in strata.values():
        q.sort(key=lambda r: _stable(r.id))
    chosen: list[MeasureRow] = []
    while len(chosen) < n_rows and any(strata.values()):
        for key in sorted(strata):
            q = strata[key]
            if not q or len(chosen) >= n_rows:
                continue
            best = min(range(len(q)), key=lambda i: len(keys[q[i].id] - compiled))
            row = q.pop(best)
            compiled |= keys[row.id]
            chosen.append(row)
    return chosen


def plan_batch(
    lake: Lake, n_rows: int, *, gpu: str = H200, m_per_file: int = 3, order: str = "files"
) -> tuple[list[MeasureRow], dict[str, int]]:
    """The next batch: ``order="files"`` (``select_batch``, harness 1.0.0's plans) or
    ``"reuse"`` (``select_for_reuse``)."""
    rows, skipped = measurable_rows(lake, gpu)
    done = measured_row_ids(lake, gpu)
    if order == "reuse":
        return select_for_reuse(rows, done, n_rows), skipped
    if order != "files":
        raise ValueError(f"plan order {order!r} is not 'files' or 'reuse'")
    return select_batch(rows, done, n_rows, m_per_file), skipped


def write_batch(rows: Iterable[MeasureRow], path: Path) -> int:
    """Write the batch JSONL (atomically: a half-written batch never exists); a path
    ending in ``.xz`` is xz-compressed (``run_batch.read_batch`` reads either)."""
    lines = [json.dumps(r.to_json()) + "\n" for r in rows]
    if path.suffix == ".xz":
        import lzma

        data = lzma.compress("".join(lines).encode(), preset=6)
        write_atomically(path, lambda tmp: tmp.write_bytes(data))
    else:
        write_atomically(path, lambda tmp: tmp.write_text("".join(lines)))
    return len(lines)


def next_batch_path(folder: Path) -> Path:
    """``folder/batch-NNN.jsonl`` with the first unused number."""
    n = 1
    while (folder / f"batch-{n:03d}.jsonl").exists():
        n += 1
    return folder / f"batch-{n:03d}.jsonl"


# -- ingest --------------------------------------------------------------------------


def _result_rows(lines: Iterable[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    out = []
    for d in lines:
        if not d.get("row_id") or not d.get("label") or not d.get("status"):
            continue
        env = d.get("env") or {}
        row = d.get("row") or {}
        details = d.get("details") or {}
        cfg_text = {
            k: (json.dumps(row[k], sort_keys=True) if isinstance(row.get(k), dict) else row.get(k))
            for k in ("best_config", "default_config")
        }
        out.append(
            {
                "row_id": str(d["row_id"]),
                "label": str(d["label"]),
                "cand_index": int(d.get("index") or 0),
                "config": json.dumps(d.get("config") or {}, sort_keys=True),
                "status": str(d["status"]),
                "reason": d.get("reason") or "",
                "t_us": float(d["t_us"]) if d.get("t_us") is not None else None,
                "rel_err": float(d["rel_err"]) if d.get("rel_err") is not None else None,
                "details": json.dumps(d.get("details") or {}, sort_keys=True, default=str),
                **{
                    k: row.get(k)
                    for k in (
                        "kernel",
                        "repo",
                        "quant",
                        "M",
                        "N",
                        "K",
                        "E",
                        "top_k",
                        "n_shared",
                        "moe_gemms",
                        "model",
                    )
                },
                "device": env.get("device"),
                "torch_version": env.get("torch"),
                "triton_version": env.get("triton"),
                "harness_version": d.get("harness_version"),
                "measured_at": d.get("measured_at"),
                "source": source,
                "dtype": row.get("dtype"),
                "gpu": row.get("gpu") or env.get("device"),
                "config_path": row.get("config_path"),
                "block_shape": [int(v) for v in row["block_shape"]]
                if row.get("block_shape")
                else None,
                **cfg_text,
                "documented_speedup_vs_default": row.get("documented_speedup_vs_default"),
                "split": row.get("split"),
                "kernel_source_sha": row.get("kernel_source_sha"),
                "spread": float(details["spread"]) if details.get("spread") is not None else None,
                "reps": int(details["reps"]) if details.get("reps") is not None else None,
                "timing": env.get("timing")
                or ("full" if d.get("harness_version") == "1.0.0" else None),
                "driver_version": env.get("driver"),
                "cuda_version": env.get("cuda"),
                "routing": row.get("routing") or "uniform",
                "exhaustive_space": row.get("exhaustive_space"),
                "space_size": int(row["space_size"]) if row.get("space_size") else None,
            }
        )
    return out


def _complete_meta(
    lines: list[dict[str, Any]], batch_rows: dict[str, MeasureRow], env: dict[str, Any]
) -> list[dict[str, Any]]:
    """Fill what older result lines lack (harness 1.0.0 stored no dtype, config path,
    configs or driver) from the batch file they were measured from and from ``env``
    (facts of the device call, e.g. the driver ``nvidia-smi`` printed in it)."""
    from dagster_project.rewards.gpu.run_batch import row_meta

    out = []
    for d in lines:
        row = dict(d.get("row") or {})
        src = batch_rows.get(str(d.get("row_id")))
        if src is not None:
            for k, v in row_meta(src).items():
                if row.get(k) is None:
                    row[k] = v
        e = dict(d.get("env") or {})
        for k, v in env.items():
            e.setdefault(k, v)
        out.append({**d, "row": row, "env": e})
    return out


def read_result_files(
    paths: Sequence[Path], *, batches: Sequence[Path] = (), env: dict[str, Any] | None = None
) -> pl.DataFrame:
    """Result lines of the runner as ``RAW_SCHEMA`` rows (torn lines skipped); gzipped
    files (``.gz``) are read too. ``batches`` / ``env`` complete older lines
    (``_complete_meta``)."""
    from dagster_project.rewards.gpu.run_batch import read_batch

    batch_rows = {it.row.id: it.row for b in batches for it in read_batch(b)}
    rows: list[dict[str, Any]] = []
    for p in paths:
        lines = _read_lines(p)
        if batch_rows or env:
            lines = _complete_meta(lines, batch_rows, env or {})
        rows += _result_rows(lines, p.name.removesuffix(".gz"))
    strings = {k: (pl.String() if k == "measured_at" else v) for k, v in RAW_SCHEMA.items()}
    df = pl.DataFrame(rows, schema=strings, orient="row") if rows else pl.DataFrame(schema=strings)
    return df.with_columns(pl.col("measured_at").str.to_datetime(time_zone="UTC", strict=False))


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if path.suffix != ".gz":
        return read_results(path)
    import gzip

    out = []
    for line in gzip.decompress(path.read_bytes()).decode().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def pack_batch(
    paths: Sequence[Path],
    out: Path,
    *,
    batches: Sequence[Path] = (),
    env: dict[str, Any] | None = None,
) -> int:
    """Write device result files as one shipped batch (``SHIPPED_DIR``): compact
    Parquet (zstd) in ``RAW_SCHEMA``, versions and noise on every row. Kernel sources
    are not stored (only their hash): they are the engines' code, fetched again from
    their repositories by ``kernelhouse build``."""
    df = read_result_files(paths, batches=batches, env=env)
    if df.is_empty():
        raise ValueError("no result lines in " + ", ".join(map(str, paths)))
    df = df.with_columns(pl.lit(out.stem).alias("source"))
    write_atomically(
        out, lambda tmp: df.write_parquet(tmp, compression="zstd", compression_level=19)
    )
    return df.height


def shipped_rows(sources: Mapping[str, str], root: Path | None = None) -> list[MeasureRow]:
    """The rows of the shipped tables as ``MeasureRow`` (one per row id, its uniform
    results' fields), each with the kernel source whose hash it was measured with, taken
    from ``sources`` (hash -> source, e.g. from batch files: the shipped batches store
    only the hash); rows whose source is not there are left out. Lets a machine without
    the lake plan re-measurements of shipped rows (the exhaustive and skew plans)."""
    df = merge_results(read_shipped(shipped_batches(root)))
    first = df.filter(pl.col("routing") == "uniform").unique("row_id", keep="first").sort("row_id")
    out: list[MeasureRow] = []
    for r in first.iter_rows(named=True):
        src = sources.get(str(r["kernel_source_sha"]))
        if src is None:
            continue
        fields = {
            **r,
            "id": r["row_id"],
            "kernel_source": src,
            "per_channel_quant": r["quant"] == "fp8_channel",
            "extra": {
                "split": r["split"],
                "documented_speedup_vs_default": r["documented_speedup_vs_default"],
            },
        }
        out.append(MeasureRow.from_json(fields))
    return out


def shipped_batches(root: Path | None = None) -> list[Path]:
    """Every shipped batch file, in name order (batch-001 before batch-002, ...)."""
    base = root or SHIPPED_DIR
    return sorted(base.glob("*/batch-*.parquet"))


def read_shipped(paths: Sequence[Path]) -> pl.DataFrame:
    """Shipped batches as one RAW_SCHEMA frame, in file order (later files win a
    (row, candidate) both measured)."""
    frames = []
    for p in paths:
        try:
            df = pl.read_parquet(p)
        except Exception as exc:  # noqa: BLE001 - name the file, keep the others' data
            raise ValueError(f"shipped batch {p} is not readable Parquet: {exc}") from exc
        missing = [c for c in ("row_id", "label", "status") if c not in df.columns]
        if missing:
            raise ValueError(f"shipped batch {p} lacks column(s) {missing}")
        frames.append(_to_raw(df))
    return pl.concat(frames, how="vertical_relaxed") if frames else pl.DataFrame(schema=RAW_SCHEMA)


def _to_raw(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with exactly RAW_SCHEMA's columns (absent ones null, as older lakes and
    batches lack the 1.1.0 columns; a result without a routing was routed uniformly)."""
    # DataFrame.cast keys its mapping by column names or selectors (a str key is one).
    dtypes: Mapping[Any, pl.DataType] = RAW_SCHEMA
    return (
        df.with_columns(
            [pl.lit(None, dtype=t).alias(c) for c, t in RAW_SCHEMA.items() if c not in df.columns]
        )
        .select(list(RAW_SCHEMA))
        .cast(dtypes)
        .with_columns(pl.col("routing").fill_null("uniform"))
    )


def ingest_shipped(lake: Lake, root: Path | None = None) -> IngestReport:
    """Upsert every shipped batch into ``raw.measured_configs`` (what a fresh machine
    without a GPU has measured) and rebuild the dataset. Results ingested locally
    that are newer than a shipped one for the same (row, candidate) are kept."""
    new = read_shipped(shipped_batches(root))
    return _upsert(lake, new)


@dataclass(frozen=True)
class IngestReport:
    lines: int
    rows: int
    candidates: int
    dataset_rows: int


def ingest_results(lake: Lake, paths: Sequence[Path]) -> IngestReport:
    """Upsert result files into ``raw.measured_configs`` and rebuild the dataset."""
    return _upsert(lake, read_result_files(paths))


def measured_on(device: str | None) -> str | None:
    """The normalised GPU (``"NVIDIA H100"``) of a result's device name
    (``"NVIDIA H100 80GB HBM3"``): the name ``tuned_configs.gpu`` uses, so a result
    compares with the row's own GPU. ``"cpu"`` for the CPU interpreter (its times mean
    nothing), ``None`` when no device is named."""
    from dagster_project.mining.configs.names import normalise_gpu

    if not device:
        return None
    if device.startswith("cpu"):
        return "cpu"
    g = normalise_gpu(device)
    return f"{g.vendor} {g.model}" if g.vendor and g.model else device


def grid_mismatch(result: Mapping[str, Any], row: MeasureRow | None = None) -> str | None:
    """Why one ``ok`` result was launched on a grid the engine would not use (its stored
    ``details.grid`` against ``plan.engine_grids``), or ``None``. Results without a
    stored grid, or whose config no longer normalises, are not judged. ``row``: the
    result's row, when the caller has built it already (every result of a row has the
    same row fields)."""
    from dagster_project.rewards.gpu.plan import engine_grids
    from dagster_project.rewards.gpu.spec import ConfigError, normalise_config

    if result.get("status") != "ok":
        return None
    try:
        stored = json.loads(result.get("details") or "{}").get("grid")
        cfg, _ = normalise_config(json.loads(result.get("config") or "{}"))
    except (ValueError, ConfigError):
        return None
    if not stored:
        return None
    if row is None:
        row = MeasureRow.from_json({**result, "id": result["row_id"], "kernel_source": ""})
    expected = [list(g) for g in engine_grids(row, cfg)]
    if expected == stored:
        return None
    return (
        f"grid: harness {result.get('harness_version')} launched {stored}, the engine "
        f"launches {expected} (small-batch alignment cap; rules {SUPERSEDED_RULES})"
    )


def mark_superseded(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with ``measured_on`` filled from ``device`` and ``superseded_reason`` set on
    every candidate of a (row, GPU) table one of whose results was launched on a grid
    the engine would not use (``grid_mismatch``). Such tables stay in the lake (their
    times are what was measured) but give no labels (``sql/measured/dataset.sql``)
    until the row is measured again under harness >= 1.2.0."""
    df = with_measured_on(df)
    if "routing" not in df.columns:
        df = df.with_columns(pl.lit("uniform").alias("routing"))
    df = df.with_columns(pl.col("routing").fill_null("uniform"))
    reasons: dict[tuple[Any, Any, Any], str] = {}
    rows: dict[Any, MeasureRow] = {}
    for r in df.filter(pl.col("status") == "ok").iter_rows(named=True):
        key = (r["row_id"], r["measured_on"], r["routing"])
        if key not in reasons:
            if r["row_id"] not in rows:
                rows[r["row_id"]] = MeasureRow.from_json(
                    {**r, "id": r["row_id"], "kernel_source": ""}
                )
            why = grid_mismatch(r, rows[r["row_id"]])
            if why is not None:
                reasons[key] = why
    flagged = pl.DataFrame(
        {
            "row_id": [k[0] for k in reasons],
            "measured_on": [k[1] for k in reasons],
            "routing": [k[2] for k in reasons],
            "_why": list(reasons.values()),
        },
        schema={
            "row_id": pl.String(),
            "measured_on": pl.String(),
            "routing": pl.String(),
            "_why": pl.String(),
        },
    )
    return (
        df.join(flagged, on=TABLE_KEY, how="left", nulls_equal=True)
        .with_columns(pl.col("_why").alias("superseded_reason"))
        .drop("_why")
    )


def with_measured_on(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with ``measured_on`` filled where it is null: from ``device``, else (a
    result that names no device) the GPU its row was planned for, since a batch is
    planned for one GPU's rows (``plan_batch``)."""
    devices = {d: measured_on(d) for d in df["device"].unique().to_list()}
    return df.with_columns(
        pl.coalesce(
            pl.col("measured_on"),
            pl.col("device").replace_strict(devices, default=None, return_dtype=pl.String()),
            pl.col("gpu"),
        ).alias("measured_on")
    )


def merge_results(df: pl.DataFrame) -> pl.DataFrame:
    """Results as the lake keeps them: the newest measurement of a (row, GPU measured on,
    routing, candidate) wins (equal times: the later in ``df``), then ``mark_superseded``."""
    if "routing" not in df.columns:
        df = df.with_columns(pl.lit("uniform").alias("routing"))
    return mark_superseded(
        with_measured_on(df)
        .with_columns(pl.col("routing").fill_null("uniform"))
        .with_row_index("_order")
        .sort(["measured_at", "_order"], nulls_last=False)
        .unique([*TABLE_KEY, "label"], keep="last", maintain_order=True)
        .drop("_order")
        .sort([*TABLE_KEY, "cand_index"], nulls_last=True)
    )


def _upsert(lake: Lake, new: pl.DataFrame) -> IngestReport:
    if new.is_empty():
        return IngestReport(0, 0, 0, build_measured_dataset(lake))
    ids = new["row_id"].unique().to_list()
    frames = [new]
    if lake.table_exists("raw", "measured_configs"):
        old = lake.query(
            "SELECT * FROM raw.measured_configs WHERE row_id IN (SELECT unnest($ids))", {"ids": ids}
        )
        if old.height:
            frames.insert(0, _to_raw(old))
    merged = merge_results(pl.concat(frames, how="vertical_relaxed"))
    lake.replace_rows("raw", "measured_configs", merged, "row_id", ids)
    return IngestReport(new.height, len(ids), merged.height, build_measured_dataset(lake))


def build_measured_dataset(lake: Lake) -> int:
    """Rebuild ``datasets.measured_configs`` from ``raw.measured_configs`` (empty table,
    with the dataset's columns, when nothing has been measured yet). Writing no rows
    first creates the raw table, or adds the RAW_SCHEMA columns a lake written by an
    older version lacks (e.g. ``routing``), which the dataset SQL reads."""
    lake.replace_rows("raw", "measured_configs", pl.DataFrame(schema=RAW_SCHEMA), "row_id", [])
    df = lake.query(load_sql("measured/dataset"))
    return lake.replace_table("datasets", "measured_configs", df)


def export_measured(lake: Lake, folder: Path) -> Path:
    """``folder/measured_configs.parquet``, written to a temp name and renamed."""
    df = lake.read_table("datasets", "measured_configs")
    return write_atomically(
        folder / "measured_configs.parquet", lambda tmp: df.write_parquet(tmp, compression="zstd")
    )


def status_frame(lake: Lake, gpu: str = H200) -> pl.DataFrame:
    """Per (kernel, quant, repo): rows of the GPU, rows measured, median measured speedup
    of tuned over default, share where the tuned config is still the fastest."""
    build_needed = not lake.table_exists("datasets", "measured_configs")
    if build_needed:
        return pl.DataFrame()
    return lake.query(load_sql("measured/status"), {"gpu": gpu})


# -- a batch on this machine's GPU ---------------------------------------------------


def cuda_available() -> bool:
    """A CUDA GPU torch can use is present (False where torch is not even installed)."""
    try:
        import torch
    except ImportError:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - a broken driver is "no GPU" too
        return False


@dataclass(frozen=True)
class LocalRun:
    """One budgeted batch measured in this process: where it went and what it did."""

    batch: Path
    results: Path
    rows: int
    measured: int
    stopped_by_budget: bool
    context_lost: bool
    precompile: dict[str, Any]


def run_local_batch(
    lake: Lake,
    folder: Path,
    *,
    gpu: str = H200,
    rows: int = 24,
    budget_s: float = 900.0,
    workers: int | None = None,
) -> LocalRun | None:
    """Plan the next batch of ``rows``, measure it on this machine's GPU within
    ``budget_s``, ingest it.

    ``workers`` pre-compile processes (None: CPUs - 1, at most 12); the asset passes
    the ``KERNELHOUSE_GPU_*`` settings. Returns ``None`` when nothing is left to measure.
    Only rows of ``gpu`` are planned: measuring them on another GPU would say nothing
    about their tuning.
    """
    from dagster_project.rewards.gpu.run_batch import run_batch

    if workers is None:
        workers = max(0, min(12, (os.cpu_count() or 2) - 1))
    budget = budget_s
    batch, _ = plan_batch(lake, rows, gpu=gpu, order="reuse")
    if not batch:
        return None
    path = next_batch_path(folder)
    write_batch(batch, path)
    results = path.with_name(path.name.replace("batch-", "out-"))
    report = run_batch(path, results, budget_s=budget, workers=workers)
    ingest_results(lake, [results])
    return LocalRun(
        path,
        results,
        len(batch),
        report.measured,
        report.stopped_by_budget,
        report.context_lost,
        report.precompile,
    )


NO_GPU = (
    "skipped: no CUDA GPU here; ingest device results with `kernelhouse gpu ingest` "
    "(see benchmarks/device/gpu_measure_configs.sh)"
)


def _gpu_batch(lake: Lake, settings: Any, log: Callable[[str], None]) -> Any:
    """Measure one budgeted batch here when a GPU is present and not disabled; what to
    report as ``gpu_batch`` (text, or a ``Json`` of the batch)."""
    gpu = settings.gpu
    if gpu.disabled:
        log("KERNELHOUSE_GPU_DISABLE=1: not measuring on this machine's GPU")
        return "disabled by KERNELHOUSE_GPU_DISABLE"
    if not cuda_available():
        log(NO_GPU)
        return NO_GPU
    run = run_local_batch(
        lake, settings.home / "gpu", rows=gpu.rows, budget_s=gpu.budget_s, workers=gpu.workers
    )
    if run is None:
        log("every measurable H200 row is measured already")
        return "nothing left to measure"
    log(
        f"measured {run.measured} candidates of {run.rows} rows "
        f"({run.batch.name}); budget stop: {run.stopped_by_budget}"
    )
    return Json(
        {
            "batch": run.batch.name,
            "rows": run.rows,
            "measured": run.measured,
            "stopped_by_budget": run.stopped_by_budget,
            "context_lost": run.context_lost,
            "precompile": run.precompile,
        }
    )


def _float(value: Any) -> float:
    """``float()`` of a Series aggregate: polars types it as any Python literal, and the
    columns aggregated here are numeric."""
    return float(value)


def _share(timed: pl.DataFrame, col: str) -> float:
    return round(_float(timed[col].cast(pl.Float64).mean() or 0.0), 4) if timed.height else 0.0


def refresh_measured(lake: Lake, settings: Any, log: Callable[[str], None]) -> dict[str, Any]:
    """The measured_configs asset's work: ingest the shipped batches, measure a batch where
    a GPU is present, rebuild and export ``datasets.measured_configs``; its metadata."""
    shipped = shipped_batches()
    ingest_shipped(lake)
    run_meta: dict[str, Any] = {"shipped_batches": len(shipped)}
    run_meta["gpu_batch"] = _gpu_batch(lake, settings, log)
    rows = build_measured_dataset(lake)
    path = export_measured(lake, settings.exports_dir / "measured_configs")
    ds = lake.read_table("datasets", "measured_configs")
    status = status_frame(lake)
    timed = ds.filter(pl.col("t_tuned_us").is_not_null())
    return {
        "dagster/row_count": rows,
        "dagster/column_schema": ColumnSchema("datasets.measured_configs"),
        **run_meta,
        "rows_with_tuned_time": timed.height,
        "median_measured_speedup_vs_default": _float(
            timed["measured_speedup_vs_default"].drop_nulls().median() or 0.0
        )
        if timed.height
        else 0.0,
        "tuned_still_best_share": round(_float(timed["tuned_is_best"].mean() or 0.0), 4)
        if timed.height
        else 0.0,
        # within each row's own noise (the larger replay spread of the two timings)
        "tuned_within_noise_of_best_share": _share(timed, "tuned_within_noise_of_best"),
        "default_faster_beyond_noise_share": _share(timed, "default_faster_beyond_noise"),
        "export": str(path),
        "by_kernel": Markdown(md_table(status, n=20)) if status.height else "",
        "preview": Markdown(
            md_table(
                ds.select(
                    "kernel",
                    "repo",
                    "quant",
                    "M",
                    "t_tuned_us",
                    "t_default_us",
                    "measured_speedup_vs_default",
                    "best_label",
                )
            )
        ),
    }
