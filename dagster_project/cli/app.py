"""``kernelhouse``: the command line over the lake and the Dagster graph.

Every command exits non-zero on failure with a one-line reason (no traceback for
configuration mistakes); ``--debug`` shows tracebacks.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, NoReturn, cast

import typer
from rich.console import Console
from rich.table import Table

from dagster_project.settings import SettingsError, ensure_home, load_settings, validate_sources
from dagster_project.terminal import escape, safe

if TYPE_CHECKING:
    import polars as pl

    from dagster_project.execution.planner import BuildOutcome, Launch

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="kernelhouse: RL datasets for GPU-kernel optimisation, built on Dagster + DuckDB.",
    # Markdown mode reflows a docstring's wrapped lines into sentences (rich mode would
    # keep every line break and cut sentences in the middle); a blank line starts a new
    # paragraph, and the command list shows only the first one.
    rich_markup_mode="markdown",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            v = version("kernelhouse")
        except PackageNotFoundError:  # running from a source tree that was never installed
            v = "unknown (not installed)"
        from dagster_project.sim import GENERATOR_VERSION

        typer.echo(f"kernelhouse {v} (simulator {GENERATOR_VERSION})")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """kernelhouse: RL datasets for GPU-kernel optimisation, built on Dagster + DuckDB."""


console = Console(stderr=True)
out = Console()

#: The definitions a build's worker processes and Dask workers load (``module:function``,
#: ``execution.runs.load_definitions``): named here, at the top, so the run machinery in
#: ``execution/`` never imports the assembly it runs.
DEFINITIONS = "dagster_project.definitions:base_definitions"


def _fail(message: str, code: int = 1) -> NoReturn:
    """Print one error line and exit. The message often quotes user or upstream text (a
    setting's value, a path, DuckDB's error, a failed asset's reason), so it is escaped:
    rich would read ``[/prefix]`` or ``[red]`` in it as markup."""
    console.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def _prepare_instance():  # noqa: ANN202 - dagster types imported lazily
    """Point Dagster at ``KERNELHOUSE_HOME/dagster`` (telemetry off) and open it."""
    settings = load_settings()
    ensure_home(settings)
    os.environ["DAGSTER_HOME"] = str(settings.dagster_home)
    os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
    import dagster as dg

    return settings, dg.DagsterInstance.get()


def _selection(select: list[str] | None) -> str | None:
    """One selection from repeated ``--select`` options: their union (``a`` and ``b+`` give
    ``a,b+``, which ``normalise_selection`` reads as "a or b+"), so a second option adds to
    the first instead of silently replacing it."""
    parts = [s.strip() for s in select or [] if s.strip()]
    return ",".join(parts) if parts else None


def _plan(select: str | None):  # noqa: ANN202 - dagster types imported lazily
    """Shared start of `build` and `refresh`: settings, instance, Definitions and the
    staged plan of the selection; fails with one line on a bad setting, selection or
    repo source (sources are checked only when the plan fetches)."""
    try:
        settings, instance = _prepare_instance()
    except SettingsError as exc:
        _fail(str(exc))
        raise  # unreachable: _fail exits
    from dagster_project.definitions import build_definitions
    from dagster_project.execution.planner import plan_stages

    defs = build_definitions()
    try:
        stages = plan_stages(defs, select, instance)
    except Exception as exc:  # a bad selection string
        _fail(f"--select {select!r}: {exc}")
        raise
    if _observes_git(defs, stages):
        try:
            validate_sources(settings)
        except SettingsError as exc:
            _fail(str(exc))
    return settings, instance, defs, stages


def _observes_git(defs, stages) -> bool:  # noqa: ANN001
    """Whether the plan runs an asset that observes a repo source (its
    ``kernelhouse/observer`` tag is ``git``): the only reason to check or probe sources."""
    from dagster_project.execution import policy
    from dagster_project.execution.planner import observed

    graph = defs.resolve_asset_graph()
    return any(observed(graph, k) == policy.GIT for s in stages for k in s.keys)


def _offline_sources(  # noqa: ANN001
    settings, defs, stages, partitions: list[str] | None = None
) -> dict[str, str]:
    """Probe every repo source the plan clones or fetches (seconds, in parallel) and say
    once, before anything runs, which cannot be reached and how to fix it; the build then
    skips only what needs those repos."""
    from dagster_project.execution.probes import probe_sources
    from dagster_project.settings import DEFAULT_SOURCES

    if not _observes_git(defs, stages):
        return {}
    wanted = {r: src for r, src in settings.sources.items() if not partitions or r in partitions}
    offline = probe_sources(wanted)
    for repo, why in sorted(offline.items()):
        env = settings.env_name(repo)
        console.print(
            f"[bold red]offline:[/] {escape(env)}={escape(settings.sources[repo])!r} cannot be "
            f"reached ({escape(why)}). Without network, point {escape(env)} at a local clone "
            f"(a path or file:// URL); the default is {escape(DEFAULT_SOURCES[repo])}. "
            f"Assets that need {repo} are skipped; everything else builds."
        )
    return offline


def _print_notes(notes: list[str]) -> None:
    """What the build's start cleaned up after a killed build (home.py)."""
    for note in notes:
        console.print(f"[yellow]recovered[/]: {escape(note)}")


@app.command()
def build(
    select: Annotated[
        list[str] | None,
        typer.Option(
            "--select",
            "-s",
            metavar="SELECTION",
            help="Dagster asset selection, e.g. 'group:simulated' or 'tuned_configs+' "
            "(repeatable: the selections add up).",
        ),
    ] = None,
    partition: Annotated[
        list[str] | None,
        typer.Option(
            "--partition", "-p", metavar="KEY", help="Only these partition keys (repeatable)."
        ),
    ] = None,
    distributed: Annotated[
        bool,
        typer.Option(
            "--distributed",
            help="Run on Dagster's Dask executor, partitions in parallel: on "
            "KERNELHOUSE_DASK_SCHEDULER, else on a local cluster of one worker per core. "
            "The default when KERNELHOUSE_EXECUTOR=dask.",
        ),
    ] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            "-w",
            help="Processes that run the partitions of a stage side by side (default: one "
            "per core; 1 runs everything in this process).",
        ),
    ] = None,
) -> None:
    """Materialise the whole graph (or a selection) with progress and a summary."""
    from dagster_project.execution.planner import run_build
    from dagster_project.progress import BuildProgress
    from dagster_project.storage.home import BuildLocked

    selection = _selection(select)
    settings, instance, defs, stages = _plan(selection)
    offline = _offline_sources(settings, defs, stages, partition)
    started = time.monotonic()
    distributed = distributed or settings.executor == "dask"
    workers = _resolve_workers(workers)

    with contextlib.ExitStack() as stack:
        launch = _build_launch(stack, settings, instance, stages, partition, distributed, workers)
        progress = stack.enter_context(BuildProgress(console, stages, partition))
        try:
            outcome = run_build(
                defs,
                instance,
                selection,
                partitions=partition,
                on_run=progress.on_run,
                launch=launch,
                offline=offline,
            )
        except BuildLocked as exc:
            _fail(str(exc))
    _print_notes(outcome.notes)
    _print_build_summary(outcome, instance)
    _print_skipped(outcome, offline, settings)
    console.print(f"home: {escape(str(settings.home))}  ({time.monotonic() - started:.1f}s)")
    # Offline, a build that built everything the reachable sources allow has done its job:
    # exit 0 with the skipped assets and the command that completes them said above.
    if not (outcome.ok or (offline and outcome.only_offline_skips)):
        raise typer.Exit(1)


def _print_skipped(outcome: BuildOutcome, offline: dict[str, str], settings) -> None:  # noqa: ANN001
    """Every skipped asset with its reason, and, when only unreachable sources held the
    build back, the one command that completes the lake."""
    if not outcome.skipped:
        return
    console.print(f"[yellow]skipped[/] ({len(outcome.skipped)}):")
    for name, why in sorted(outcome.skipped.items()):
        if why.startswith("source offline:"):
            repo = name.partition("[")[2].rstrip("]")
            why = f"source offline ({settings.env_name(repo)} cannot be reached)"
        console.print(f"  {escape(name)}: {escape(why)}")
    if offline and outcome.only_offline_skips:
        sources = " ".join(f"{settings.env_name(r)}=<local clone or URL>" for r in sorted(offline))
        console.print(
            "[bold]to complete the lake[/] (runs only what is missing or stale): "
            f"{escape(sources)} kernelhouse refresh"
        )


def _resolve_workers(workers: int | None) -> int:
    """The ``--workers`` count: one per core unless given, and 1 while a fault point is
    armed; fails with one line on a count below 1."""
    from dagster_project.execution.local import default_workers

    if workers is None:
        from dagster_project.storage.lake import FAULT_VAR

        # The fault tier (tests/faults) freezes the process that reaches a fault point
        # and watches the build's own PID: with a fault point armed, run in this process.
        workers = 1 if os.environ.get(FAULT_VAR) else default_workers()
    if workers < 1:
        _fail(f"--workers {workers}: give 1 or more processes")
    return workers


def _build_launch(  # noqa: ANN001
    stack: contextlib.ExitStack,
    settings,
    instance,
    stages,
    partition: list[str] | None,
    distributed: bool,
    workers: int,
) -> Launch | None:
    """How `build` launches its runs: on the Dask cluster when distributed, in a pool of
    worker processes when some stage has more than one run to share out, else in this
    process (None). The launcher stays open on ``stack`` for the whole build."""
    from dagster_project.execution.local import LocalRuns
    from dagster_project.execution.planner import QUIET_RUN_CONFIG
    from dagster_project.storage.home import run_tags

    if distributed:
        return _dask_launch(stack, settings, instance)
    runs_per_stage = [
        sum(1 for k in s.partition_keys if k is None or not partition or k in partition)
        for s in stages
    ]
    if workers > 1 and max(runs_per_stage, default=0) > 1:
        return stack.enter_context(
            LocalRuns(
                workers,
                definitions=DEFINITIONS,
                run_config=QUIET_RUN_CONFIG,
                tags={"kernelhouse/cli": "build", **run_tags()},
            )
        )
    return None


def _dask_launch(stack: contextlib.ExitStack, settings, instance) -> Launch:  # noqa: ANN001
    """Open the Dask cluster (``KERNELHOUSE_DASK_SCHEDULER`` or a local one), say which,
    and launch runs on it; fails with one line when no cluster can be had."""
    from dagster_project.execution.distributed import DaskRuns, DistributedError, dask_cluster
    from dagster_project.execution.planner import QUIET_RUN_CONFIG
    from dagster_project.storage.home import run_tags

    try:
        cluster = stack.enter_context(
            dask_cluster(settings.dask_scheduler, definitions=DEFINITIONS)
        )
    except DistributedError as exc:
        _fail(str(exc))
    where = "local cluster" if cluster.started_here else "KERNELHOUSE_DASK_SCHEDULER"
    console.print(
        f"distributed: Dask scheduler {cluster.address} ({where}, {cluster.threads} worker threads)"
    )
    return stack.enter_context(
        DaskRuns(
            instance,
            cluster.address,
            cluster.threads,
            definitions=DEFINITIONS,
            run_config=QUIET_RUN_CONFIG,
            tags={"kernelhouse/cli": "build", **run_tags()},
        )
    )


def _print_build_summary(outcome: BuildOutcome, instance) -> None:  # noqa: ANN001
    """The table of assets built, failed or skipped, then each failure's reason, the
    gains note when PR gains were built, and the checks that failed."""
    table = Table(title="kernelhouse build", show_lines=False)
    table.add_column("asset")
    table.add_column("rows", justify="right")
    table.add_column("status")
    for name in sorted(
        set(outcome.rows) | {k.split("[")[0] for k in outcome.failed} | set(outcome.skipped)
    ):
        failed = [k for k in outcome.failed if k.split("[")[0] == name]
        status = (
            "[red]failed[/]"
            if failed
            else ("[yellow]skipped[/]" if name in outcome.skipped else "[green]ok[/]")
        )
        table.add_row(escape(name), _fmt_num(outcome.rows.get(name, 0)), status)
    out.print(table)
    for name, msg in outcome.failed.items():
        console.print(f"[red]{escape(name)}[/]: {escape(msg)}")
    if "pr_gains" in outcome.rows:
        from dagster_project.cli.status import gains_note

        note = gains_note(instance)
        if note:
            console.print(f"[yellow]gains:[/] {escape(note)}")
    for name in outcome.checks_failed:
        console.print(f"[yellow]check failed[/]: {escape(name)}")


@app.command()
def refresh(
    select: Annotated[
        list[str] | None,
        typer.Option(
            "--select",
            "-s",
            metavar="SELECTION",
            help="Limit the refresh to a selection (default: the whole graph; repeatable: "
            "the selections add up).",
        ),
    ] = None,
) -> None:
    """Bring the lake up to date, doing only the work that changed.

    Fetch the repos, then run only assets that Dagster calls stale or missing (an input's
    data changed, or the simulator's code version did). A refresh with nothing new upstream
    runs nothing else. `kernelhouse build` rebuilds unconditionally."""
    from dagster_project.execution.planner import run_build
    from dagster_project.storage.home import BuildLocked

    selection = _selection(select)
    settings, instance, defs, stages = _plan(selection)
    offline = _offline_sources(settings, defs, stages)
    started = time.monotonic()

    def on_run(stage, pkey, state):  # noqa: ANN001
        if state == "start":
            console.print(
                f"[dim]run[/] {escape(stage.label)} {escape(f'[{pkey}]') if pkey else ''}"
            )

    try:
        outcome = run_build(defs, instance, selection, on_run=on_run, refresh=True, offline=offline)
    except BuildLocked as exc:
        _fail(str(exc))
    _print_notes(outcome.notes)
    table = Table(title="kernelhouse refresh")
    for col in ("asset", "rows", "why it ran"):
        table.add_column(col)
    for label, why in sorted(outcome.reasons.items()):
        status = "[red]failed[/]" if label in outcome.failed else escape(why)
        table.add_row(escape(label), _fmt_num(outcome.rows_by_run.get(label, 0)), status)
    out.print(table)
    for name, msg in outcome.failed.items():
        console.print(f"[red]{escape(name)}[/]: {escape(msg)}")
    for name in outcome.skipped:
        console.print(f"[yellow]skipped[/] {escape(name)}: {escape(outcome.skipped[name])}")
    for name in outcome.checks_failed:
        console.print(f"[yellow]check failed[/]: {escape(name)}")
    console.print(
        f"{len(outcome.reasons)} ran, {len(outcome.fresh)} up to date, "
        f"home: {escape(str(settings.home))}"
        f"  ({time.monotonic() - started:.1f}s)"
    )
    if not outcome.ok:
        raise typer.Exit(1)


@app.command()
def status() -> None:
    """Show what is built, with how many rows, and the latest result of every check.

    Also says which sources cannot be reached now and how many PR bodies are missing,
    then lists the configuration this run resolved (secrets only as set/unset)."""
    import dagster as dg

    from dagster_project.definitions import build_definitions
    from dagster_project.storage.lake import Lake

    try:
        settings, instance = _prepare_instance()
    except SettingsError as exc:
        _fail(str(exc))
    from dagster_project.cli.status import gains_note, pr_body_note, source_notes

    defs = build_definitions()
    failing = _print_asset_statuses(settings, instance, defs.resolve_asset_graph())
    _print_lake_tables(Lake(settings.lake_path, settings.parquet_root))
    _print_configuration(settings)
    _ = dg  # imported for its side effect of configuring the instance
    for note in source_notes(settings):
        console.print(f"[yellow]offline:[/] {escape(note)}")
    body_note = pr_body_note(instance)
    if body_note:
        console.print(escape(body_note))
    gains = gains_note(instance)
    if gains:
        console.print(f"[yellow]gains:[/] {escape(gains)}")
    if failing:
        console.print(f"[red]{failing} check(s) failing[/]")


def _print_asset_statuses(settings, instance, graph) -> int:  # noqa: ANN001
    """The status table, one row per asset with its latest checks; returns how many
    checks are failing (or errored) now."""
    from dagster_project.cli.status import asset_statuses

    table = Table(title=f"kernelhouse status — {escape(str(settings.home))}")
    for col in (
        "asset",
        "group",
        "last materialised (UTC)",
        "rows",
        "partitions",
        "checks (latest result)",
    ):
        table.add_column(col, justify="right" if col == "rows" else "left")
    failing = 0
    colours = {"passed": "green", "failed": "red", "error": "red"}
    for st in asset_statuses(instance, graph):
        failing += sum(c.bad for c in st.checks)
        checks = ", ".join(
            f"[{colours.get(c.result, 'yellow')}]{escape(c.words())}[/]" for c in st.checks
        )
        rows = _fmt_num(st.rows)
        table.add_row(escape(st.name), st.group, st.when, rows, st.partitions, checks)
    out.print(table)
    return failing


def _print_lake_tables(lake) -> None:  # noqa: ANN001
    """The lake's tables with their row counts (nothing when the lake has none)."""
    counts = lake.row_counts()
    if counts.height:
        t2 = Table(title="lake tables")
        for col in counts.columns:
            t2.add_column(col)
        for r in counts.iter_rows():
            t2.add_row(*[_fmt_num(v) if isinstance(v, int) else escape(str(v)) for v in r])
        out.print(t2)


def _print_configuration(settings) -> None:  # noqa: ANN001
    """The resolved settings, secrets shown only as set/unset."""
    conf = Table(title="configuration (secrets shown as set/unset)")
    conf.add_column("setting")
    conf.add_column("value")
    for name, value in settings.public().items():
        conf.add_row(name, escape(str(value)))
    out.print(conf)


def _looks_like_file(arg: str) -> bool:
    """A path to a .sql file rather than SQL text (long SQL is not a file name)."""
    if arg.endswith(".sql"):
        return True
    if "\n" in arg or len(arg) > 1024:
        return False
    try:
        return Path(arg).is_file()
    except OSError:
        return False


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL text, or a path to a .sql file.")],
    fmt: Annotated[
        str, typer.Option("--format", "-f", help="table | csv | json | parquet")
    ] = "table",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write here instead of stdout (required for parquet)."),
    ] = None,
    limit: Annotated[int, typer.Option(help="Rows shown in table format.")] = 50,
) -> None:
    """Run one read-only statement on the lake and print (or write) the result.

    Only reads run: one SELECT-type statement (WITH, FROM, VALUES, DESCRIBE, SHOW and
    SUMMARIZE included) on a read-only connection that reaches no file outside the lake,
    with DuckDB's configuration locked. Anything that would change a table, view, setting
    or file is refused with the reason, and the lake is left as it was."""
    from dagster_project.storage.lake import Lake

    try:
        settings = load_settings()
    except SettingsError as exc:
        _fail(str(exc))
    text = _sql_text(query)
    lake = Lake(settings.lake_path, settings.parquet_root, object_store=settings.object_store)
    if not settings.lake_path.exists():
        _fail(
            f"no lake at {settings.lake_path} (KERNELHOUSE_HOME={settings.home}); "
            "run `kernelhouse build` first"
        )
    df = _read_only_query(lake, text)
    if fmt == "parquet":
        if output is None:
            _fail("--format parquet needs --output FILE")
        df.write_parquet(output)
        console.print(f"wrote {df.height} rows to {escape(str(output))}")
        return
    if fmt == "table":
        _print_sql_table(df, limit)
        if df.height == 0:
            from dagster_project.report.analysis import explain_empty

            why = explain_empty(lake, text)
            console.print(f"[dim]no rows{': ' + escape(why) if why else ''}[/]")
        return
    text_out = _sql_text_output(df, fmt)
    if output:
        output.write_text(text_out)
        console.print(f"wrote {df.height} rows to {escape(str(output))}")
    else:
        # to a terminal: control and escape sequences in values are shown, not obeyed
        text_out = safe(text_out)
        sys.stdout.write(text_out if text_out.endswith("\n") else text_out + "\n")


def _sql_text(query: str) -> str:
    """The statement to run: the argument itself, or the contents of the .sql file it
    names (failing with one line when that file does not exist)."""
    if not _looks_like_file(query):
        return query
    p = Path(query)
    if not p.is_file():
        _fail(f"SQL file {query} does not exist")
    return p.read_text()


def _read_only_query(lake, text: str) -> pl.DataFrame:  # noqa: ANN001
    """Run ``text`` on the lake's read-only connection; a refusal, a lake error or DuckDB's
    own error for a bad query fails with its first line."""
    import polars as pl

    from dagster_project.storage.lake import LakeError, QueryRefused

    try:
        df = lake.read_only_query(text)
    except QueryRefused as exc:
        _fail(f"refused: {exc}")
    except LakeError as exc:
        _fail(str(exc).splitlines()[0])
    except Exception as exc:  # DuckDB's own error for a bad query (binder, catalog, ...)
        from dagster_project.report.analysis import explain_missing

        # A missing table says which build step creates it, not DuckDB's "Catalog Error".
        hint = explain_missing(lake, text) if "Catalog Error" in str(exc) else None
        _fail(
            hint or f"query failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        )
    assert isinstance(df, pl.DataFrame)
    return df


def _print_sql_table(df: pl.DataFrame, limit: int) -> None:
    """The first ``limit`` rows as a table on stdout, and how many were left out."""
    table = Table(show_lines=False)
    # Column names and values are the user's (or the data's): shown as text, not markup.
    for c in df.columns:
        table.add_column(escape(c), overflow="fold")
    for r in df.head(limit).iter_rows():
        table.add_row(*["" if v is None else escape(str(v)[:200]) for v in r])
    out.print(table)
    if df.height > limit:
        console.print(
            f"[dim]{_fmt_num(df.height)} rows ({limit} shown; use --format csv for all)[/]"
        )


def _sql_text_output(df: pl.DataFrame, fmt: str) -> str:
    """The result as CSV or JSON text; fails with one line on any other format."""
    if fmt == "csv":
        return df.write_csv()
    if fmt == "json":
        return json.dumps(df.to_dicts(), default=str, indent=1)
    _fail(f"--format {fmt!r}: use table, csv, json or parquet")


@app.command()
def check(
    assets: Annotated[
        list[str] | None, typer.Argument(help="Assets to check (default: every suite).")
    ] = None,
) -> None:
    """Run the Great Expectations suites on the lake, outside a materialisation.

    Exits 1 when a blocking suite fails."""
    from dagster_project.quality.suites import load_suite, suite_files
    from dagster_project.storage.lake import Lake

    settings = load_settings()
    if not settings.lake_path.exists():
        _fail(f"no lake at {settings.lake_path}; run `kernelhouse build` first")
    lake = Lake(settings.lake_path, settings.parquet_root)
    suites = [load_suite(p) for p in suite_files()]
    if assets:
        unknown = set(assets) - {s["meta"]["kernelhouse"]["asset"] for s in suites}
        if unknown:
            _fail(f"no suite for asset(s): {', '.join(sorted(unknown))}")
        suites = [s for s in suites if s["meta"]["kernelhouse"]["asset"] in assets]
    table = Table(title="kernelhouse check")
    for col in ("suite", "expectation", "column", "result", "observed", "expected"):
        table.add_column(col, overflow="fold")
    blocking_failed: list[str] = []
    for suite in suites:
        blocking_failed += _check_suite(lake, settings, suite, table)
    out.print(table)
    if blocking_failed:
        _fail("blocking check(s) failed: " + "; ".join(blocking_failed))


def _check_suite(lake, settings, suite: dict, table: Table) -> list[str]:  # noqa: ANN001
    """Run one suite (when its table exists), record its result in the lake and add its
    rows to ``table``; returns what failed in a blocking suite."""
    from dagster_project.quality.results import record
    from dagster_project.quality.suites import run_suite

    blocking_failed = []
    table_name = suite["meta"]["kernelhouse"]["table"]
    schema, _, name = table_name.partition(".")
    if not lake.table_exists(schema, name):
        table.add_row(suite["name"], "-", "-", "[yellow]no table[/]", table_name, "")
        if suite["meta"]["kernelhouse"].get("blocking"):
            blocking_failed.append(f"{suite['name']}: {table_name} missing")
        return blocking_failed
    res = run_suite(suite, settings.lake_path)
    record(lake, res)
    if res.not_evaluated:
        table.add_row(res.suite, "-", "-", "[yellow]not evaluated[/]", res.not_evaluated[:60], "")
        return blocking_failed
    for o in res.outcomes:
        verdict = (
            "[green]pass[/]"
            if o.success
            else ("[red]FAIL[/]" if res.blocking else "[yellow]warn[/]")
        )
        table.add_row(
            escape(res.suite),
            o.type.removeprefix("expect_"),
            escape(o.column or ""),
            verdict,
            escape(str(o.observed)[:60]),
            escape(str(o.expected)[:60]),
        )
        if not o.success and res.blocking:
            blocking_failed.append(f"{res.suite}: {o.type}({o.column or ''})")
    return blocking_failed


gains_app = typer.Typer(no_args_is_help=True, help="Benchmark gains extracted from PR text.")
app.add_typer(gains_app, name="gains")

from dagster_project.cli.gpu import gpu_app  # noqa: E402 - sub-app kept in its own module

app.add_typer(gpu_app, name="gpu")


@gains_app.command("extract")
def gains_extract(
    path: Annotated[
        str,
        typer.Argument(
            help="PR text file (title on the first line, then the body), or - for stdin."
        ),
    ],
    extractor: Annotated[
        str, typer.Option(help="table (deterministic) or llm (needs KERNELHOUSE_LLM_BASE_URL).")
    ] = "table",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json")] = "table",
    repo: Annotated[
        str | None,
        typer.Option(
            help="owner/name of the PR's repository, stamped on each row as the lake does."
        ),
    ] = None,
    pr_number: Annotated[
        int | None,
        typer.Option("--number", help="the PR's number, stamped on each row as the lake does."),
    ] = None,
) -> None:
    """Extract measurements from one PR text and show them with their audit flags.

    The one call the ``pr_gains`` asset makes per PR (``extract_pr_gains``), with the same
    arguments when ``--repo``/``--number`` are given: the measurements never depend on them
    (issue 40), they only stamp the rows and reach the LLM's prompt as they do in the lake."""
    from dagster_project.gains.extract import extract_pr_gains
    from dagster_project.gains.llm_extractor import LLMConfig, LLMExtractor
    from dagster_project.report.numbers import number

    if extractor not in ("table", "llm"):
        _fail(f"--extractor {extractor!r}: use table or llm")
    if path == "-":
        text = sys.stdin.read()
    else:
        p = Path(path)
        if not p.is_file():
            _fail(f"PR text file {path} does not exist")
        text = p.read_text(errors="replace")
    llm = None
    if extractor == "llm":
        cfg = LLMConfig.from_env()
        if cfg is None:
            _fail("--extractor llm needs KERNELHOUSE_LLM_BASE_URL (an OpenAI-compatible endpoint)")
        llm = LLMExtractor(cfg)
    # extractor is "table" or "llm" here: anything else failed above.
    res = extract_pr_gains(
        text,
        extractor=cast(Literal["table", "llm"], extractor),
        llm=llm,
        repo=repo,
        pr_number=pr_number,
    )
    rows = [m.to_row() for m in res.measurements]
    if fmt == "json":
        sys.stdout.write(
            json.dumps(
                {
                    "ok": res.ok,
                    "error": res.error,
                    "extractor": res.extractor,
                    "model": res.model_used,
                    "measurements": rows,
                },
                indent=1,
                default=str,
            )
            + "\n"
        )
    else:
        table = Table(title=f"{len(rows)} measurement(s) — {res.extractor} extractor")
        cols = (
            "scope",
            "metric",
            "unit",
            "hardware",
            "shape",
            "batch_size",
            "baseline",
            "optimized",
            "stated_speedup",
            "speedup",
            "audit_pass",
            "audit_reason",
        )
        for c in cols:
            table.add_column(c, overflow="fold")
        for r in rows:
            table.add_row(*[escape(number(r.get(c))) for c in cols])
        out.print(table)
    if not res.ok:
        _fail(f"extraction failed: {res.error}")


def _fmt_num(v: object) -> str:
    """A number as the one number format writes it (``report.numbers``)."""
    from dagster_project.report.numbers import number

    return number(v)


@app.command()
def stats(
    dataset: Annotated[str, typer.Argument(help="kernel-opt-rl | kernelinfer | kernelswarm")],
) -> None:
    """Our figures beside the dataset card's (SQL in sql/analysis/card_*.sql)."""
    from dagster_project.report.analysis import card_comparison, create_views, explain_missing
    from dagster_project.storage.lake import Lake, LakeError

    if dataset not in ("kernel-opt-rl", "kernelinfer", "kernelswarm"):
        _fail(f"unknown dataset {dataset!r}: use kernel-opt-rl, kernelinfer or kernelswarm")
    settings = load_settings()
    if not settings.lake_path.exists():
        _fail(f"no lake at {settings.lake_path}; run `kernelhouse build` first")
    lake = Lake(settings.lake_path, settings.parquet_root)
    create_views(lake)
    try:
        df = card_comparison(lake, dataset)
    except (LakeError, Exception) as exc:  # the view is missing until its tables exist
        view = "analysis.card_" + dataset.replace("-", "_")
        hint = explain_missing(lake, f"SELECT * FROM {view}")
        _fail(f"{dataset} is not built yet: {hint or str(exc).splitlines()[0][:160]}")
        return
    table = Table(title=f"{dataset}: ours vs the card")
    for c in ("metric", "card", "ours", "ours / card", "note"):
        table.add_column(c, overflow="fold")
    for r in df.iter_rows(named=True):
        card, ours = r.get("card"), r.get("ours")
        if "year" in str(r["metric"]):  # a year is a label: 2023, not 2,023, and no ratio
            card, ours = (None if v is None else str(int(v)) for v in (card, ours))
        ratio = (
            f"{ours / card:.2f}"
            if isinstance(card, int | float) and isinstance(ours, int | float) and card
            else ""
        )
        table.add_row(
            escape(str(r["metric"])),
            escape(_fmt_num(card)),
            escape(_fmt_num(ours)),
            ratio,
            escape(str(r.get("note") or "")),
        )
    out.print(table)
    if dataset == "kernel-opt-rl":  # every gap to the card, with its cause
        from dagster_project.publish.kernel_opt_rl import card_gap_lines

        card_figures = {
            r["metric"]: r["card"] for r in df.iter_rows(named=True) if r.get("card") is not None
        }
        try:
            gaps = card_gap_lines(lake, card_figures)
        except Exception as exc:  # noqa: BLE001 - a lake without the raw tables: say so
            gaps = [f"gaps not available ({str(exc).splitlines()[0][:160]})"]
        out.print("gaps to the card:")
        for line in gaps:
            out.print(f"  - {escape(line)}")


@app.command()
def report(
    fmt: Annotated[str, typer.Option("--format", "-f", help="html | md")] = "html",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Default: KERNELHOUSE_HOME/exports/report.<fmt>."),
    ] = None,
) -> None:
    """Write an HTML or Markdown report of the analysis views, with plots."""
    from dagster_project.report import build_report
    from dagster_project.storage.lake import Lake

    if fmt not in ("html", "md"):
        _fail(f"--format {fmt!r}: use html or md")
    settings = load_settings()
    if not settings.lake_path.exists():
        _fail(f"no lake at {settings.lake_path}; run `kernelhouse build` first")
    # fmt is "html" or "md" here: anything else failed above.
    path = build_report(
        Lake(settings.lake_path, settings.parquet_root), cast(Literal["html", "md"], fmt), output
    )
    console.print(f"wrote {escape(str(path))}")


@app.command()
def ui(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 3000,
) -> None:
    """Start the Dagster UI on this project, bound to 127.0.0.1, behind a Host/Origin guard
    (``cli/webguard.py``: a request for a foreign Host or Origin, as DNS rebinding sends,
    gets 403), with the Dagster daemon beside it. The webserver replaces this process, so
    its PID is the one to stop with SIGTERM; the daemon is set to die with it."""
    try:
        settings, _ = _prepare_instance()
    except SettingsError as exc:
        _fail(str(exc))
        return
    import shutil
    import subprocess

    from dagster_project.storage.home import die_with_parent

    daemon = shutil.which("dagster-daemon") or str(Path(sys.executable).with_name("dagster-daemon"))
    subprocess.Popen(  # noqa: S603 - our own executable and module
        [daemon, "run", "-m", "dagster_project.definitions"],
        preexec_fn=lambda: die_with_parent(signal.SIGTERM),  # stops cleanly with the UI
    )
    args = [sys.executable, "-m", "dagster_project.cli.webguard"]
    args += ["-m", "dagster_project.definitions", "-h", "127.0.0.1", "-p", str(port)]
    console.print(
        f"Dagster UI on http://127.0.0.1:{port}  "
        f"(DAGSTER_HOME={escape(str(settings.dagster_home))})"
    )
    os.execv(sys.executable, args)


def restore_interrupt_signals() -> None:
    """Give SIGINT its default handler back when this process inherited it ignored.

    A non-interactive shell starts background commands (``cmd &`` in a script, cron
    wrappers) with SIGINT ignored, and Dagster maps SIGTERM onto SIGINT's handler. Left
    alone, SIGTERM is then ignored too: ``kernelhouse ui`` cannot be stopped by its PID,
    and every ``tail`` Dagster starts to capture a step's logs inherits the ignored
    SIGTERM, so each step waits out two 30 s kill timeouts after it finishes.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main() -> None:
    restore_interrupt_signals()
    debug = "--debug" in sys.argv
    if debug:
        sys.argv.remove("--debug")
    try:
        app()
    except SettingsError as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}")
        sys.exit(1)
    except Exception as exc:  # one-line reason unless --debug
        if debug:
            raise
        from dagster_project.storage.home import no_space

        full = no_space(exc, Path(os.environ.get("KERNELHOUSE_HOME", "./data")))
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        message = full or f"{type(exc).__name__}: {first_line}"
        console.print(f"[bold red]error:[/] {escape(message)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
