"""Which lake tables each asset reads and writes: the one declaration of lineage.

Why: an asset is stale when an input's data version changed, and Dagster knows an
input only if it is a declared dependency. Before issue 34 the dependencies were typed
by hand beside each asset and drifted from what the code read (``kernel_commits`` read
``raw.pr_bodies`` and ``raw.perf_commits``, ``tuned_configs`` read ``raw.config_files``,
none declared), so a new PR body or a lookup-rule change could leave a dataset fresh.

Now ``ASSETS`` says, per asset, the tables it reads and writes. Three things use it:

* the asset decorators: ``wiring.lineage.deps(name)`` turns the reads into the asset's
  ``deps`` (the writers of the tables it reads), so a declared read *is* a dependency;
* the lake: a ``Lake`` opened for an asset (``LakeResource.lake()`` inside a run) refuses
  to read a table of another asset that this declaration does not list
  (``UndeclaredRead``), so a new read without a declaration fails every test and build
  that runs the asset, instead of silently missing a refresh;
* the domain code that needs a list of tables (the PR numbers ``pr_gains`` extracts for).

A table may be read by many assets and is written by exactly one (``writer_of``);
``derived.quality_results`` is written by the asset checks and ``kernelhouse check``,
not by an asset (``CHECK_TABLES``). No dagster import.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

#: Lake schemas whose tables belong to some asset.
SCHEMAS = ("raw", "derived", "datasets", "sim", "analysis")

#: Tables written outside any asset: the asset checks' results (and ``kernelhouse check``).
CHECK_TABLES = ("derived.quality_results",)

#: The tables whose PR numbers need bodies and gains (tuned-config attribution and the
#: kernel_commits miner): read by ``pr_bodies`` and ``pr_gains``.
PR_NUMBER_TABLES = ("derived.config_attribution", "raw.kernel_commit_files")


@dataclass(frozen=True)
class Access:
    """The lake tables one asset reads and the ones it writes (``schema.table``)."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    #: True: the asset builds over whichever of its reads exist (it checks each one), so
    #: it runs when an input could not be built, e.g. offline (``kernelhouse/partial_inputs``).
    partial: bool = False
    #: Package folders (relative to ``dagster_project/``) of device results shipped as data
    #: that the asset ingests: their content joins the asset's code version
    #: (``execution.policy``, ``kernelhouse/code_version=shipped_data``), so a new batch
    #: makes it stale for ``kernelhouse refresh`` like a new rule version does.
    shipped: tuple[str, ...] = ()


_COMMITS_RAW = ("raw.perf_commits", "raw.mining_watermarks", "raw.kernel_commit_mined")

#: asset -> the tables it reads and writes. Reads of its own tables are not listed.
ASSETS: dict[str, Access] = {
    "repo_clone": Access(writes=("raw.repo_heads",)),
    "config_files": Access(reads=("raw.repo_heads",), writes=("raw.config_files",)),
    "config_entries": Access(reads=("raw.config_files",), writes=("raw.config_entries",)),
    "kernel_sources": Access(reads=("raw.repo_heads",), writes=("raw.kernel_sources",)),
    "moe_model_shapes": Access(writes=("raw.moe_model_shapes",)),
    "config_attribution": Access(
        reads=("raw.repo_heads", "raw.config_files"), writes=("derived.config_attribution",)
    ),
    "perf_commits": Access(reads=("raw.repo_heads",), writes=_COMMITS_RAW),
    "kernel_commit_files": Access(
        reads=("raw.perf_commits", "raw.kernel_commit_mined"),
        writes=("raw.kernel_commit_files", "raw.kernel_commit_excluded"),
    ),
    "pr_bodies": Access(reads=PR_NUMBER_TABLES, writes=("raw.pr_bodies",)),
    "pr_gains": Access(
        reads=("raw.pr_bodies", *PR_NUMBER_TABLES),
        writes=(
            "derived.pr_extractions",
            "derived.pr_gains",
            "derived.pr_gains_state",
            "derived.pr_gains_crosscheck",
            "derived.pr_quarantine",
        ),
    ),
    "kernel_commits": Access(
        reads=(
            "raw.kernel_commit_files",
            "raw.kernel_commit_excluded",
            "raw.perf_commits",
            "raw.pr_bodies",
            "derived.pr_gains",
            # issue 35: the label run of every executed row (the executed_commits asset)
            "derived.commit_exec_runs",
        ),
        writes=("datasets.kernel_commits", "derived.build_properties"),
    ),
    # Issue 41: kernel_commits one commit (PR) per row, all its files in one task.
    "pr_tasks": Access(reads=("datasets.kernel_commits",), writes=("datasets.pr_tasks",)),
    "tuned_configs": Access(
        reads=(
            "raw.config_files",
            "raw.config_entries",
            "derived.config_attribution",
            "raw.kernel_sources",
            "raw.moe_model_shapes",
            "raw.repo_heads",
            "derived.pr_gains",
        ),
        writes=("datasets.tuned_configs",),
    ),
    # Read only where a CUDA GPU is present and a batch is planned.
    "measured_configs": Access(
        reads=("datasets.tuned_configs", "raw.moe_model_shapes"),
        writes=("raw.measured_configs", "datasets.measured_configs"),
        partial=True,  # without a GPU: the shipped batches alone
        shipped=("data/measured",),
    ),
    # Issue 35: reads only the device batches shipped in the package (no table).
    "executed_commits": Access(
        writes=("derived.commit_exec_runs", "derived.commit_exec_shapes"),
        shipped=("commit_exec/data",),
    ),
    "sim_tasks": Access(writes=("sim.kernelinfer_tasks", "sim.kernelinfer_tasks_holdout")),
    "sim_rung_verification": Access(writes=("sim.rung_verification",)),
    "kernelinfer_sessions": Access(
        writes=("sim.kernelinfer_sessions", "sim.kernelinfer_steps"),
    ),
    "kernelswarm_episodes": Access(
        writes=(
            "sim.kernelswarm_episodes",
            "sim.kernelswarm_agents",
            "sim.kernelswarm_messages",
            "sim.kernelswarm_tasks_holdout",
        ),
    ),
    # issue 36 (36w): the online measured tier, replayed from the lists and answers shipped
    # in sim/data/measured (a new list, answer or evidence file makes it stale)
    "kernelinfer_online": Access(
        writes=("sim.kernelinfer_online_sessions", "sim.kernelinfer_online_steps"),
        shipped=("sim/data/measured",),
    ),
    "sim_compile_validation": Access(writes=("sim.compile_validation",)),
    "sim_calibration": Access(
        writes=("sim.calibration", "sim.calibration_summary", "sim.calibration_holdout")
    ),
    "analysis_views": Access(
        reads=(
            "datasets.tuned_configs",
            "datasets.kernel_commits",
            "derived.pr_gains",
            "sim.kernelinfer_sessions",
            "sim.kernelinfer_steps",
            "sim.kernelinfer_tasks_holdout",
            "sim.kernelswarm_episodes",
            "sim.calibration",
            "datasets.measured_configs",
        ),
        writes=("analysis.*",),
        partial=True,  # a view whose tables are missing waits (report.analysis)
    ),
    "kernel_opt_rl_export": Access(
        reads=(
            "datasets.tuned_configs",
            "datasets.kernel_commits",
            "datasets.pr_tasks",
            "derived.pr_gains_state",
            "raw.repo_heads",
            "derived.quality_results",
        )
    ),
    "kernelinfer_export": Access(
        reads=(
            "sim.kernelinfer_sessions",
            "sim.kernelinfer_tasks_holdout",
            "sim.compile_validation",
            # issue 36 (36w): the measured_online config and the card's tier statistics
            "sim.kernelinfer_online_sessions",
        ),
        # issue 36: the card states the timing model's error on the shipped H100 answers
        # (sim/data/measured/h100_timing_model.json), so new answers re-export the card
        shipped=("sim/data/measured",),
    ),
    "kernelswarm_export": Access(
        reads=(
            "sim.kernelswarm_episodes",
            "sim.kernelswarm_tasks_holdout",
        )
    ),
    # Read only when a push is configured (KERNELHOUSE_HUB_REPO_PREFIX and HF_TOKEN).
    "hub_push": Access(reads=("derived.quality_results",)),
}

#: Dependencies that are no table read, the one place such an edge is declared: the Hub
#: push uploads the exports' folders; a simulated shard recomputes the task list and the
#: rung verification from the seed and the shipped evidence, the same pure functions whose
#: tables ``sim_tasks`` and ``sim_rung_verification`` write, so it follows them.
FILE_DEPS: dict[str, tuple[str, ...]] = {
    "hub_push": (
        "kernel_opt_rl_export",
        "kernelinfer_export",
        "kernelswarm_export",
        "measured_configs",
    ),
    "kernelinfer_sessions": ("sim_tasks", "sim_rung_verification"),
    "kernelswarm_episodes": ("sim_rung_verification",),
    # the online tier regenerates sessions from the default task draw and the same evidence
    "kernelinfer_online": ("sim_rung_verification",),
}


class LineageError(ValueError):
    """The declaration is inconsistent (a table with two writers, an unknown asset)."""


def _matches(pattern: str, table: str) -> bool:
    return pattern == table or (pattern.endswith(".*") and table.startswith(pattern[:-1]))


def writer_of(table: str) -> str | None:
    """The asset that writes ``table`` (None: written by checks, or by nobody)."""
    writers = [a for a, acc in ASSETS.items() if any(_matches(w, table) for w in acc.writes)]
    if len(writers) > 1:
        raise LineageError(f"{table} is written by {', '.join(writers)}: one writer per table")
    return writers[0] if writers else None


def access(asset: str) -> Access:
    """The declared access of ``asset`` (LineageError for an asset not declared)."""
    try:
        return ASSETS[asset]
    except KeyError:
        raise LineageError(
            f"asset {asset!r} has no entry in dagster_project/storage/lineage.py ASSETS"
        ) from None


def upstream(asset: str) -> tuple[str, ...]:
    """The assets ``asset`` depends on: the writers of the tables it reads, then its file
    dependencies, in declaration order, without duplicates or itself."""
    out: list[str] = []
    for table in access(asset).reads:
        writer = writer_of(table)
        if writer is None and table not in CHECK_TABLES:
            raise LineageError(f"{asset} reads {table}, which no asset writes")
        if writer and writer != asset and writer not in out:
            out.append(writer)
    out += [a for a in FILE_DEPS.get(asset, ()) if a not in out]
    return tuple(out)


def may_read(asset: str, table: str) -> bool:
    """May ``asset`` read ``table``? Its declared reads, its own writes."""
    acc = access(asset)
    return any(_matches(t, table) for t in (*acc.reads, *acc.writes))


_TABLE_RE = re.compile(
    r'(?<![\w."])"?(' + "|".join(SCHEMAS) + r')"?\s*\.\s*"?([A-Za-z_][A-Za-z0-9_]*)"?'
)


def tables_in(sql: str) -> set[str]:
    """``schema.table`` names of the lake's schemas that a statement mentions.

    A pattern, not a parser: DuckDB's ``get_table_names`` cannot parse a statement with
    ``?`` parameters, and our statements name lake tables only as ``schema.table``. A
    mention inside a string literal counts too, which can only make the check stricter."""
    return {f"{s}.{t}" for s, t in _TABLE_RE.findall(sql)}


class UndeclaredRead(RuntimeError):
    """An asset read a table its lineage declaration does not list."""


#: asset -> every lake table it named in this process (its own included): what the
#: lineage guard test compares with the declaration, in both directions.
OBSERVED: dict[str, set[str]] = {}


def check_reads(asset: str | None, tables: Iterable[str]) -> None:
    """Raise ``UndeclaredRead`` when ``asset`` (None: not inside an asset, or an asset
    without a declaration) reads one of ``tables`` undeclared."""
    if asset is None or asset not in ASSETS:
        return
    tables = set(tables)
    OBSERVED.setdefault(asset, set()).update(tables)
    bad = sorted(t for t in tables if not may_read(asset, t))
    if bad:
        raise UndeclaredRead(
            f"asset {asset} reads {', '.join(bad)}, not declared in "
            "dagster_project/storage/lineage.py: add it to the asset's reads (which makes "
            "the table's writer a dependency)"
        )


#: The asset that clones the engine repositories: what "needs the repo sources" means.
SOURCE_ASSET = "repo_clone"


def needs_sources(asset: str) -> bool:
    """Whether ``asset`` can only be built from the engine repositories (``repo_clone``
    is upstream of it and it does not build over partial inputs)."""
    todo, seen = [asset], set()
    while todo:
        name = todo.pop()
        if name == SOURCE_ASSET:
            return True
        if name in seen or access(name).partial:
            continue
        seen.add(name)
        todo.extend(upstream(name))
    return False


SOURCES_HINT = (
    "`kernelhouse refresh` with KERNELHOUSE_VLLM_SOURCE, KERNELHOUSE_SGLANG_SOURCE and "
    "KERNELHOUSE_FLASHINFER_SOURCE set to reachable URLs or local clones"
)


def build_steps(tables: Iterable[str]) -> str:
    """Which build steps create the missing ``tables``, and the command that runs them, in
    words: what a command that reads a missing table says instead of DuckDB's "Catalog
    Error". Tables of one kind (needing the repo sources or not) share one sentence."""
    sourced: dict[str, str] = {}
    local: dict[str, str] = {}
    other: list[str] = []
    for table in dict.fromkeys(tables):
        writer = writer_of(table)
        if table in CHECK_TABLES:
            other.append(f"{table} is written by the quality checks (`kernelhouse check`)")
        elif writer is None:
            other.append(f"{table} is not a table of the lake")
        else:
            (sourced if needs_sources(writer) else local)[table] = writer
    out = []
    if sourced:
        one = len(set(sourced.values())) == 1
        out.append(
            f"{_names(sourced)} not built yet: {_steps(sourced)}; "
            f"{'it needs' if one else 'they need'} the engine repositories ({SOURCES_HINT})"
        )
    if local:
        select = ",".join(dict.fromkeys(local.values()))
        out.append(
            f"{_names(local)} not built yet: {_steps(local)} "
            f"(`kernelhouse build --select {select}`)"
        )
    return "; ".join(out + other)


def _names(tables: dict[str, str]) -> str:
    return ", ".join(tables) + (" is" if len(tables) == 1 else " are")


def _steps(tables: dict[str, str]) -> str:
    steps = list(dict.fromkeys(tables.values()))
    return (
        ("step " if len(steps) == 1 else "steps ")
        + ", ".join(steps)
        + (" creates it" if len(tables) == 1 else " create them")
    )
