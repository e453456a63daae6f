"""Exports of the simulated datasets, kernelinfer and kernelswarm, in their cards' layouts.

Layout (the same for both; ``<rows>`` is ``sessions`` or ``episodes``)::

    README.md               card: YAML front matter (configs + declared features), statistics
    batches/batch_NNN.jsonl 100 rows per file
    <rows>.jsonl            every batch concatenated, in batch order
    tasks_holdout.jsonl     held-out task specs (no solutions, no prompts)
    stats.json              the aggregate figures the card prints

Rows have the cards' field names, in the cards' order, and one fixed schema, declared in
the card's ``dataset_info`` (``features.py``), so ``datasets`` and the Hub viewer read every
file the same way at any size. Two choices make that schema fixed:

* **Maps whose keys depend on the row are JSON text** — ``shape`` (its dimension names
  depend on the op: ``{"M", "N", "K"}`` for a GEMM, ``{"B", "Hq", "Hkv", "D", "Skv",
  "page"}`` for paged decode; 41 ops use ~40 names) and each trace step's / message's
  ``params`` (per-variant tunables; a plan message holds a per-agent split). As objects,
  their keys differ from file to file, which is what made ``load_dataset`` fail on the
  kernelswarm export (each batch holds 1-2 ops). The alternative, one struct with every
  key nullable, would give every row ~35 null dimensions that read like "unknown" values
  and would change the schema whenever the simulator gains an op. JSON text keeps exactly
  the keys a row has, loads with every ``datasets`` version and every JSON reader, and is
  what the lake already stores, so the export does not decode and re-encode it:
  ``json.loads(row["shape"])`` gives the card's object back.
* **Every message has every key**: kernelswarm message kinds carry different fields (a
  dispatch has a recipient, a result a reward); a key a kind does not use is ``null``
  rather than absent, so a reader never sees a message shape it did not see first.

Writing streams: the small list of (id, batch) pairs is read first, then each batch is
queried on its own and streamed from DuckDB as Arrow record batches into polars'
NDJSON writer (no Python object per row; sessions carry whole kernel sources on every
step); the merged file is a byte copy of the batches. Everything is written into a
temporary folder and swapped in at the end (``atomic_export_dir``), so a failure leaves
the previous export as it was.
"""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import duckdb
import polars as pl
import pyarrow as pa

from dagster_project import progress
from dagster_project.gains.policy import wilson_lower
from dagster_project.settings import KERNELINFER_DEFAULT_SEED
from dagster_project.sim import label_policy
from dagster_project.sim.feedback import ATOL, RTOL
from dagster_project.sim.kernelinfer import CARD_STATS as KERNELINFER_CARD
from dagster_project.sim.kernelswarm import CARD_STATS as KERNELSWARM_CARD
from dagster_project.sim.measured import read_timing_model_summary
from dagster_project.sim.online import ONLINE_GPUS, read_online, tier_stats
from dagster_project.sim.swarm import reward_rule
from dagster_project.sim.tasks import HOLDOUT_SHARE, HOLDOUT_VERSION
from dagster_project.storage.lake import Lake

from ._sql import record, records, relation
from .atomic import atomic_export_dir
from .cards import render_card, size_category
from .features import dataset_info
from .report import ExportError, ExportReport, file_sizes

__all__ = [
    "BATCH_SIZE",
    "KERNELINFER",
    "KERNELSWARM",
    "CompileValidation",
    "SimLayout",
    "export_kernelinfer",
    "export_kernelswarm",
    "kernelinfer_stats",
    "kernelswarm_stats",
]

#: Rows per batch file, as both cards describe.
BATCH_SIZE = 100

#: Rows per Arrow batch while streaming one batch file (a session can be several MB).
_READ_ROWS = 16

HOLDOUT_FILE = "tasks_holdout.jsonl"
STATS_FILE = "stats.json"

#: The online measured tier's config and folder in the kernelinfer export (issue 36, 36w):
#: its own rows file and statistics, so the default config's files stay as they were.
ONLINE_CONFIG = "measured_online"
ONLINE_FILE = f"{ONLINE_CONFIG}/sessions.jsonl"
ONLINE_STATS = f"{ONLINE_CONFIG}/stats.json"


@dataclass(frozen=True)
class CompileValidation:
    """Outcome of compiling a sample of generated kernels with a real toolchain.

    The simulator never compiles anything; this is the one piece of real-world evidence a
    build can attach, and the card reports it as such (rate and sample size, nothing more).
    """

    checked: int
    compiled: int
    toolchain: str = ""

    def __post_init__(self) -> None:
        if self.checked < 0 or not 0 <= self.compiled <= self.checked:
            raise ValueError(f"compiled={self.compiled} of checked={self.checked} is not a rate")

    @property
    def rate(self) -> float | None:
        return self.compiled / self.checked if self.checked else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "compiled": self.compiled,
            "rate": self.rate,
            "toolchain": self.toolchain,
        }


@dataclass(frozen=True)
class SimLayout:
    """Everything that differs between the two simulated exports."""

    dataset: str
    pretty_name: str
    unit: str  # "sessions" | "episodes": the merged file's name and the count key in stats
    batches_query: str  # returns (id, batch) in output order
    batches_params: tuple[tuple[str, Any], ...]
    rows_query: str  # takes $ids, returns exactly `fields`
    fields: tuple[str, ...]
    json_text: tuple[str, ...]  # "col" or "col[].key": JSON text in the lake and in the file
    invalid_json_query: str  # counts rows whose `json_text` values are not JSON
    holdout_query: str
    template: str
    tags: tuple[str, ...]

    @property
    def merged(self) -> str:
        return f"{self.unit}.jsonl"


KERNELINFER = SimLayout(
    dataset="kernelinfer",
    pretty_name="kernelinfer (kernelhouse build)",
    unit="sessions",
    batches_query="kernelinfer_batches",
    batches_params=(),
    rows_query="kernelinfer_session_rows",
    fields=(
        "session_id",
        "op",
        "impl",
        "gpu",
        "arch",
        "dtype",
        "shape",
        "signature",
        "desc",
        "objective",
        "baseline_ms",
        "best",
        "speedup_label",
        "speedup_provenance",
        "speedup_unknown_reason",
        "speedup_error_scale",
        "attempts",
        "elapsed_s",
        "elapsed_hms",
        "num_steps",
        "trace",
        "messages",
    ),
    json_text=("shape", "trace[].params"),
    invalid_json_query="kernelinfer_invalid_json",
    holdout_query="kernelinfer_holdout_rows",
    template="kernelinfer.md.j2",
    tags=(
        "cuda",
        "triton",
        "kernel-optimization",
        "gpu",
        "inference",
        "llm-inference",
        "synthetic-data",
        "simulated",
    ),
)

KERNELSWARM = SimLayout(
    dataset="kernelswarm",
    pretty_name="kernelswarm (kernelhouse build)",
    unit="episodes",
    batches_query="kernelswarm_batches",
    batches_params=(("batch_size", BATCH_SIZE),),
    rows_query="kernelswarm_episode_rows",
    fields=(
        "episode_id",
        "scenario",
        "n_agents",
        "op",
        "impl",
        "gpu",
        "arch",
        "dtype",
        "shape",
        "baseline_ms",
        "best_ms",
        "speedup",
        "elapsed_s",
        "agents",
        "num_messages",
        "messages",
    ),
    json_text=("shape", "messages[].params"),
    invalid_json_query="kernelswarm_invalid_json",
    holdout_query="kernelswarm_holdout_rows",
    template="kernelswarm.md.j2",
    tags=(
        "synthetic",
        "simulated",
        "rl",
        "multi-agent",
        "cuda",
        "triton",
        "inference",
        "kernel-optimization",
    ),
)


# -- statistics ----------------------------------------------------------------------------
def _by_dimension(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(str(row["dimension"]), []).append(
            {k: v for k, v in row.items() if k != "dimension"}
        )
    return out


def _kernelinfer_stats(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    summary = record(con, "kernelinfer_summary")
    statuses = {
        str(r["status"]): int(r["steps"]) for r in records(con, "kernelinfer_step_statuses")
    }
    return {
        "dataset": "kernelinfer",
        **summary,
        "step_statuses": statuses,
        "coverage": _by_dimension(records(con, "kernelinfer_coverage")),
        "rules": _shared_rules(),
        "card_comparison": card_comparison(
            "kernelinfer", KERNELINFER_CARD, _kernelinfer_ours(summary, statuses)
        ),
        # issue 36: the timing model's error on the sessions' own kernels timed on an H100
        "timing_model": read_timing_model_summary("h100"),
        # issue 36 (36o): which speedup labels the model's held-out error lets it publish
        "label_policy": _label_policy_figures(),
        # issue 36 (36p): the rows' own label columns, counted
        "labels": _label_counts(con),
    }


def _label_policy_figures() -> dict[str, Any] | None:
    """The policy's shipped figures, with the 95% Wilson lower bound of its clean test's
    within-2x share among the published labels (the held-out figure the card states)."""
    summary = label_policy.read_summary("h100")
    fresh = (summary or {}).get("fresh")
    if summary is None or not fresh or not fresh.get("published"):
        return summary
    n = int(fresh["published"])
    hits = round(float(fresh["within_2x_published"]) * n)
    return {**summary, "fresh": {**fresh, "within_2x": hits, "wilson_lower": wilson_lower(hits, n)}}


def _label_counts(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Sessions per label provenance (and reason kind), steps per ``timing``."""
    rows = records(con, "kernelinfer_label_provenance")
    totals: dict[str, int] = {}
    for r in rows:
        totals[str(r["provenance"])] = totals.get(str(r["provenance"]), 0) + int(r["sessions"])
    steps = {str(r["timing"]): int(r["steps"]) for r in records(con, "kernelinfer_step_timing")}
    return {
        "sessions": {k: totals.get(k, 0) for k in ("measured", "modelled", "unknown")},
        "by_kind": rows,
        "step_timing": steps,
        # the seed whose sessions the shipped H100 answers were asked for
        "measured_seed": KERNELINFER_DEFAULT_SEED,
    }


#: Why a figure of this build differs from the original card by more than ``CARD_TOLERANCE``
#: (the numbers themselves are computed; only the reasons are written here). A deviation
#: without a reason says so on the card rather than passing silently.
CARD_TOLERANCE = 0.05
_DEVIATION_REASONS: dict[tuple[str, str], str] = {
    ("kernelinfer", "sessions"): (
        "the build's size (KERNELHOUSE_SIM_SESSIONS) is not the card's default"
    ),
    ("kernelinfer", "steps"): "sessions × mean_steps: see both",
    ("kernelinfer", "holdout"): "the build's holdout size is not the card's default",
    ("kernelswarm", "episodes"): (
        "the build's size (KERNELHOUSE_SIM_EPISODES) is not the card's default"
    ),
    ("kernelswarm", "messages"): "episodes × mean_messages: see both",
    ("kernelinfer", "mean_steps"): (
        "since generator 1.10.0 (issue 39) the engineer stops tuning once its gains sit inside "
        "the measured noise, never resubmits a fixed failure and abandons variants measured "
        "much slower; the original card's ~95 steps were mostly tuning on noise and repeated fixes"
    ),
    ("kernelinfer", "compile_error_share"): (
        "issue 39's failure model: most mistakes are semantic bugs that compile and fail as "
        "wrong results; typed slips are rare"
    ),
    ("kernelinfer", "wrong_result_share"): (
        "issue 39's failure model (semantic bugs: races, missing barriers, tails, strides, "
        "accumulator types) fails at run time, plus variants measured wrong on a real GPU"
    ),
    ("kernelinfer", "ok_share"): (
        "follows the error shares above; runs whose output was not checked are counted "
        "apart (`unverified`)"
    ),
}


def card_comparison(
    dataset: str, card: Mapping[str, float], ours: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The original card's figures beside this build's, each with its deviation and, past
    ``CARD_TOLERANCE``, the reason (``_DEVIATION_REASONS``) or a note that none is known."""
    rows = []
    for key, want in card.items():
        got = ours.get(key)
        if got is None:
            continue
        dev = float(got) / float(want) - 1.0 if want else None
        within = dev is not None and abs(dev) <= CARD_TOLERANCE
        reason = (
            "within 5%" if within else _DEVIATION_REASONS.get((dataset, key), "not explained yet")
        )
        rows.append({"figure": key, "card": want, "build": got, "deviation": dev, "why": reason})
    return rows


def _kernelinfer_ours(summary: Mapping[str, Any], statuses: Mapping[str, int]) -> dict[str, Any]:
    total = sum(statuses.values()) or 1
    shares = {f"{k}_share": statuses.get(k, 0) / total for k in ("ok", "compile_error")}
    shares["wrong_result_share"] = statuses.get("wrong_result", 0) / total
    return {**summary, **shares, "holdout": summary.get("holdout_tasks")}


def _shared_rules() -> dict[str, Any]:
    """The rules both cards state, read from their one home (never typed into a card)."""
    return {
        "atol": ATOL,
        "rtol": RTOL,
        "holdout_share": HOLDOUT_SHARE,
        "holdout_version": HOLDOUT_VERSION,
    }


def _reward_rules() -> dict[str, Any]:
    """kernelswarm's reward constants, from ``sim/swarm/reward_rule.py``."""
    return {
        **_shared_rules(),
        "no_improvement": reward_rule.NO_IMPROVEMENT,
        "penalty": {str(k): v for k, v in reward_rule.PENALTY.items()},
    }


def _kernelswarm_stats(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    summary = record(con, "kernelswarm_summary")
    kinds = {str(r["kind"]): int(r["messages"]) for r in records(con, "kernelswarm_message_kinds")}
    return {
        "dataset": "kernelswarm",
        **summary,
        "by_scenario": records(con, "kernelswarm_scenarios"),
        "message_kinds": kinds,
        "rewards": records(con, "kernelswarm_rewards"),
        "rules": _reward_rules(),
        "card_comparison": card_comparison(
            "kernelswarm", KERNELSWARM_CARD, {**summary, "ops": summary.get("op_impls")}
        ),
        "coverage": _by_dimension(records(con, "kernelswarm_coverage")),
    }


def kernelinfer_stats(lake: Lake) -> dict[str, Any]:
    """The aggregates of ``stats.json`` / the kernelinfer card, from the lake (read-only)."""
    with lake.connect(read_only=True) as con:
        return _kernelinfer_stats(con)


def kernelswarm_stats(lake: Lake) -> dict[str, Any]:
    """The aggregates of ``stats.json`` / the kernelswarm card, from the lake (read-only)."""
    with lake.connect(read_only=True) as con:
        return _kernelswarm_stats(con)


# -- the online measured tier (issue 36, 36w) -------------------------------------------------
@dataclass(frozen=True)
class OnlineExport:
    """The measured_online config as written: its rows, their schema and its statistics."""

    rows: int
    schema: pa.Schema
    stats: dict[str, Any]


def _tier_sessions(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Lake rows in the shape ``sim.online.tier_stats`` reads (op, steps, best, statuses)."""
    return [
        {
            "op": r["op"],
            "num_steps": r["num_steps"],
            "best": r["best"],
            "trace": [{"status": st} for st in r["statuses"]],
        }
        for r in rows
    ]


def _label_figures(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """How many of a tier's sessions carry a speedup label, and its median."""
    import statistics

    labels = [float(r["speedup_label"]) for r in rows if r["speedup_label"] is not None]
    return {
        "labelled": len(labels),
        "median_label": round(statistics.median(labels), 3) if labels else None,
    }


def online_stats(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The online tier's statistics beside those of the modelled sessions of the same task
    ids (``sim.online.tier_stats`` for both, so they are the same figures), with what the
    tier replays under; None when the lake has no online tier."""
    from dagster_project.sim import GENERATOR_VERSION
    from dagster_project.sim.online_tier import ONLINE_TIER_VERSION
    from dagster_project.sim.oracle import evidence_digest

    if not record(con, "kernelinfer_online_present")["present"]:
        return None
    rows = records(con, "kernelinfer_online_tiers")
    tiers = {tier: [r for r in rows if r["tier"] == tier] for tier in (ONLINE_CONFIG, "modelled")}
    return {
        "config": ONLINE_CONFIG,
        "listed": {gpu: n for gpu in ONLINE_GPUS if (n := len(read_online(gpu)))},
        "tiers": {
            tier: {**tier_stats(_tier_sessions(got)), **_label_figures(got)}
            for tier, got in tiers.items()
        },
        "generator_version": GENERATOR_VERSION,
        "online_tier_version": ONLINE_TIER_VERSION,
        "evidence": evidence_digest(),
    }


def _write_online(con: duckdb.DuckDBPyConnection, root: Path) -> OnlineExport | None:
    """Write ``measured_online/sessions.jsonl`` and its ``stats.json`` (nothing when the
    lake has no online sessions: a config with no rows would not load)."""
    stats = online_stats(con)
    if stats is None or not stats["tiers"][ONLINE_CONFIG]["sessions"]:
        return None
    (root / ONLINE_CONFIG).mkdir()
    reader = relation(con, "kernelinfer_online_rows").to_arrow_reader(_READ_ROWS)
    with (root / ONLINE_FILE).open("wb") as fh:
        count = _write_ndjson(reader, fh)
    if count != stats["tiers"][ONLINE_CONFIG]["sessions"]:
        want = stats["tiers"][ONLINE_CONFIG]["sessions"]
        raise ExportError(f"kernelinfer: wrote {count} measured_online sessions of {want}")
    (root / ONLINE_STATS).write_text(
        json.dumps(stats, indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    return OnlineExport(count, reader.schema, stats)


# -- writers -------------------------------------------------------------------------------
def _check_json_text(con: duckdb.DuckDBPyConnection, layout: SimLayout) -> None:
    """The JSON-text columns ship as they are stored, so check them once, in SQL."""
    bad = record(con, layout.invalid_json_query)
    if bad["rows"]:
        raise ExportError(
            f"{layout.dataset}: {bad['rows']} row(s) hold text that is not JSON in "
            f"{', '.join(layout.json_text)} (first: {bad['first_id']})"
        )


def _write_ndjson(reader: pa.RecordBatchReader, fh: BinaryIO) -> int:
    """Stream Arrow record batches into ``fh`` as JSON Lines with polars' writer.

    Polars writes NaN and infinities as ``null`` (JSON has no such numbers), keeps
    non-ASCII text as UTF-8 and every struct key, null or not, in schema order."""
    count = 0
    for chunk in reader:
        if chunk.num_rows:
            frame = pl.from_arrow(chunk)
            assert isinstance(frame, pl.DataFrame)
            frame.write_ndjson(fh)
            count += chunk.num_rows
    return count


def _write_batches(
    con: duckdb.DuckDBPyConnection, layout: SimLayout, root: Path
) -> tuple[dict[str, int], pa.Schema]:
    plan = records(con, layout.batches_query, dict(layout.batches_params))
    folder = root / "batches"
    folder.mkdir()
    written: dict[str, int] = {}
    schema: pa.Schema | None = None
    n_batches = len({r["batch"] for r in plan})
    task = f"{layout.dataset} export: batch files"
    progress.report(task, 0, n_batches)
    for batch, members in itertools.groupby(plan, key=lambda r: r["batch"]):
        if batch is None or int(batch) < 0:
            raise ExportError(f"{layout.dataset}: rows without a batch/shard number")
        ids = [m["id"] for m in members]
        name = f"batches/batch_{int(batch):03d}.jsonl"
        if name in written:
            raise ExportError(
                f"{layout.dataset}: batch {batch} is not contiguous in the batch plan"
            )
        reader = relation(con, layout.rows_query, {"ids": ids}).to_arrow_reader(_READ_ROWS)
        if tuple(reader.schema.names) != layout.fields:
            raise ExportError(
                f"{layout.dataset}: row query yields {reader.schema.names}, "
                f"card wants {list(layout.fields)}"
            )
        if schema is None:
            schema = reader.schema
        elif not reader.schema.equals(schema):
            raise ExportError(
                f"{layout.dataset}: {name} has another schema than the batches before it"
            )
        with (root / name).open("wb") as fh:
            count = _write_ndjson(reader, fh)
        if count != len(ids):
            raise ExportError(
                f"{layout.dataset}: {name} has {count} rows for {len(ids)} ids (duplicate ids?)"
            )
        written[name] = count
        progress.report(task, len(written), n_batches)
    if schema is None:
        raise ExportError(f"{layout.dataset}: the batch plan is empty")
    return written, schema


def _concatenate(root: Path, parts: Iterable[str], target: str) -> None:
    """The merged file is the batch files back to back, byte for byte."""
    with (root / target).open("wb") as out:
        for part in parts:
            with (root / part).open("rb") as src:
                shutil.copyfileobj(src, out, length=1 << 20)


def _write_holdout(
    con: duckdb.DuckDBPyConnection, layout: SimLayout, path: Path
) -> tuple[int, pa.Schema]:
    reader = relation(con, layout.holdout_query).to_arrow_reader(1024)
    with path.open("wb") as fh:
        return _write_ndjson(reader, fh), reader.schema


def _provenance(
    compile_validation: CompileValidation | None, build: Mapping[str, Any] | None
) -> dict[str, Any]:
    return {
        "simulated": True,
        "generator": "kernelhouse roofline-style performance model",
        "compile_validation": compile_validation.as_dict() if compile_validation else None,
        "build": {str(k): v for k, v in (build or {}).items()},
    }


def _front_matter(
    layout: SimLayout,
    rows: int,
    schema: pa.Schema,
    holdout_schema: pa.Schema,
    online: OnlineExport | None = None,
) -> dict[str, Any]:
    meta = _base_front_matter(layout, rows, schema, holdout_schema)
    if online is not None:
        meta["configs"].append(
            {"config_name": ONLINE_CONFIG, "data_files": [{"split": "train", "path": ONLINE_FILE}]}
        )
        meta["dataset_info"].append(dataset_info(ONLINE_CONFIG, online.schema))
    return meta


def _base_front_matter(
    layout: SimLayout, rows: int, schema: pa.Schema, holdout_schema: pa.Schema
) -> dict[str, Any]:
    return {
        "license": "mit",
        "pretty_name": layout.pretty_name,
        "task_categories": ["text-generation", "reinforcement-learning"],
        "tags": list(layout.tags),
        "size_categories": [size_category(rows)],
        # Without `configs`, the Hub and `datasets` would read every .jsonl here as one
        # split: the batches, the merged copy of them and the held-out specs together.
        "configs": [
            {
                "config_name": "default",
                "data_files": [{"split": "train", "path": "batches/batch_*.jsonl"}],
                "default": True,
            },
            {
                "config_name": "tasks_holdout",
                "data_files": [{"split": "test", "path": HOLDOUT_FILE}],
            },
        ],
        # The declared schema of each config: every file is read as this, whatever rows
        # it happens to start with (see the module docstring and features.py).
        "dataset_info": [
            dataset_info("default", schema),
            dataset_info("tasks_holdout", holdout_schema),
        ],
    }


def _export(
    lake: Lake,
    out_dir: Path,
    layout: SimLayout,
    stats_of: Callable[[duckdb.DuckDBPyConnection], dict[str, Any]],
    compile_validation: CompileValidation | None,
    build: Mapping[str, Any] | None,
    repo_id: str | None,
    with_online: bool = False,
) -> ExportReport:
    with lake.connect(read_only=True) as con:
        stats = stats_of(con)
        if not stats[layout.unit]:
            raise ExportError(f"{layout.dataset}: the lake has no {layout.unit}; nothing to export")
        _check_json_text(con, layout)
        with atomic_export_dir(Path(out_dir)) as tmp:
            rows, schema = _write_batches(con, layout, tmp)
            _concatenate(tmp, list(rows), layout.merged)
            rows[layout.merged] = sum(rows.values())
            if rows[layout.merged] != stats[layout.unit]:
                raise ExportError(
                    f"{layout.dataset}: wrote {rows[layout.merged]} {layout.unit}, "
                    f"lake has {stats[layout.unit]}"
                )
            holdout = _write_holdout(con, layout, tmp / HOLDOUT_FILE)
            rows[HOLDOUT_FILE] = holdout[0]
            sizes = file_sizes(tmp)
            stats["batch_files"] = len(rows) - 2
            # The rows once (the batch files) and everything with the merged copy.
            stats["rows_bytes"] = sum(v for k, v in sizes.items() if k.startswith("batches/"))
            stats["data_bytes"] = sum(sizes.values())
            stats["provenance"] = _provenance(compile_validation, build)
            (tmp / STATS_FILE).write_text(
                json.dumps(stats, indent=2, allow_nan=False) + "\n", encoding="utf-8"
            )
            # after the default config's sizes and stats: those files stay as they were
            online = _write_online(con, tmp) if with_online else None
            if online is not None:
                rows[ONLINE_FILE] = online.rows
            readme = render_card(
                layout.template,
                _front_matter(layout, int(stats[layout.unit]), schema, holdout[1], online),
                {
                    "online": online.stats if online is not None else None,
                    "s": stats,
                    "layout": layout,
                    "cv": compile_validation,
                    "build": stats["provenance"]["build"],
                    "load_path": repo_id or f"./{layout.dataset}",
                    "batch_size": BATCH_SIZE,
                },
            )
            (tmp / "README.md").write_text(readme, encoding="utf-8")
            sizes = file_sizes(tmp)
    return ExportReport(
        dataset=layout.dataset, out_dir=Path(out_dir), rows=rows, sizes=sizes, stats=stats
    )


def export_kernelinfer(
    lake: Lake,
    out_dir: Path,
    *,
    compile_validation: CompileValidation | None = None,
    build: Mapping[str, Any] | None = None,
    repo_id: str | None = None,
) -> ExportReport:
    """Write the kernelinfer export (from ``sim.kernelinfer_sessions`` and
    ``sim.kernelinfer_tasks_holdout``) to ``out_dir``, replacing any previous one atomically.

    ``build`` holds facts about the generator run shown in the card (generator version,
    seed); ``compile_validation`` is reported verbatim when given.
    """
    return _export(
        lake,
        out_dir,
        KERNELINFER,
        _kernelinfer_stats,
        compile_validation,
        build,
        repo_id,
        with_online=True,
    )


def export_kernelswarm(
    lake: Lake,
    out_dir: Path,
    *,
    compile_validation: CompileValidation | None = None,
    build: Mapping[str, Any] | None = None,
    repo_id: str | None = None,
) -> ExportReport:
    """Write the kernelswarm export (from ``sim.kernelswarm_episodes`` and
    ``sim.kernelswarm_tasks_holdout``) to ``out_dir``, replacing any previous one atomically."""
    return _export(
        lake, out_dir, KERNELSWARM, _kernelswarm_stats, compile_validation, build, repo_id
    )
