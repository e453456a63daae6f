"""Materialise the asset graph (or a selection) in stages, from the CLI or a script.

Dagster's ``materialize`` runs one partition key at a time, and our graph mixes three
partitionings (none, repo, simulated shard). ``plan_stages`` orders the selected assets
topologically and cuts them into stages that share one partitions definition; each stage
runs once (unpartitioned) or once per key. Runs go to the persistent instance under
``KERNELHOUSE_HOME/dagster`` so the UI and ``kernelhouse status`` see them. A failed
asset stops only what depends on it: everything else still builds.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from dagster_project.home import damaged_now, exclusive_build, run_tags

# A run's result: in process (``dg.materialize``) or launched elsewhere (``launch``).
Result = dg.ExecuteInProcessResult | dg.JobExecutionResult  # or a RunSummary (LocalRuns)
# Starts a run of (asset keys, partition key) elsewhere; returns a wait for its result.
Launch = Callable[[list[dg.AssetKey], str | None], Callable[[], Result]]

# The CLI prints its own progress; Dagster's DEBUG event stream would drown it.
QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@dataclass
class Stage:
    keys: list[dg.AssetKey]
    partitions_def: dg.PartitionsDefinition | None
    partition_keys: list[str | None]

    @property
    def label(self) -> str:
        names = ", ".join(k.to_user_string() for k in self.keys)
        return names if len(names) < 70 else names[:67] + "..."


@dataclass
class BuildOutcome:
    rows: dict[str, int] = field(default_factory=dict)
    runs: list[tuple[str, str | None, bool, str]] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    checks_failed: list[str] = field(default_factory=list)
    fresh: list[str] = field(default_factory=list)  # refresh: up to date, not run
    reasons: dict[str, str] = field(default_factory=dict)  # refresh: why each one ran
    rows_by_run: dict[str, int] = field(default_factory=dict)  # per asset[partition]
    notes: list[str] = field(default_factory=list)  # what the start swept (home.py)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.skipped


def _pdef_id(pdef: dg.PartitionsDefinition | None) -> str:
    if pdef is None:
        return ""
    return repr(sorted(pdef.get_partition_keys()))


def normalise_selection(selection: str) -> str:
    """Accept plain asset names as well as Dagster's selection syntax:
    ``a,b`` → ``key:a or key:b``; ``tuned_configs+`` → ``key:tuned_configs+``."""
    parts = [p.strip() for p in selection.split(",") if p.strip()]
    out = []
    for part in parts:
        bare = part.strip("+*")
        if bare.isidentifier() and " " not in part:
            prefix, suffix = part[: part.index(bare)], part[part.index(bare) + len(bare):]
            out.append(f"{prefix}key:{bare}{suffix}")
        else:
            out.append(f"({part})")
    return " or ".join(out)


def plan_stages(defs: dg.Definitions, selection: str | None) -> list[Stage]:
    """Topological stages of the selected assets, grouped by partitions definition."""
    graph = defs.resolve_asset_graph()
    if selection:
        keys = dg.AssetSelection.from_string(normalise_selection(selection)).resolve(graph)
    else:
        keys = {k for k in graph.get_all_asset_keys() if graph.get(k).is_materializable}
    keys = {k for k in keys if graph.get(k).is_materializable}
    parents = {k: {p for p in graph.get(k).parent_keys if p in keys} for k in keys}
    done: set[dg.AssetKey] = set()
    stages: list[Stage] = []
    while len(done) < len(keys):
        ready = sorted(
            (k for k in keys - done if parents[k] <= done), key=lambda k: k.to_user_string()
        )
        if not ready:
            raise RuntimeError("cycle in the asset graph")
        # Prefer continuing the partitioning of the previous stage, else unpartitioned.
        pdef = graph.get(ready[0]).partitions_def
        group: list[dg.AssetKey] = []
        frontier = set(ready)
        while frontier:
            pick = [k for k in sorted(frontier, key=lambda k: k.to_user_string())
                    if _pdef_id(graph.get(k).partitions_def) == _pdef_id(pdef)]
            if not pick:
                break
            group += pick
            done |= set(pick)
            frontier = {k for k in keys - done if parents[k] <= done}
        part_keys: list[str | None] = list(pdef.get_partition_keys()) if pdef else [None]
        stages.append(Stage(group, pdef, part_keys))
    return stages


# Assets that observe the outside world (a git remote, the Hub, the GitHub API): a
# refresh runs them whenever their source answers, and their content data versions
# decide what else must run.
OBSERVERS = frozenset({"repo_clone", "moe_model_shapes", "pr_bodies"})


def _unreachable(name: str) -> str | None:
    """Why an observer has nothing to observe right now (its service does not answer),
    else None. A git source is always tried: an unreachable one is a build error."""
    if name == "moe_model_shapes":
        from dagster_project.mining.hub import hub_reachable

        return None if hub_reachable() else "the Hugging Face Hub is unreachable (or HF_HUB_OFFLINE=1)"
    if name == "pr_bodies":
        from dagster_project.github.sync import api_reachable
        from dagster_project.settings import load_settings

        url = load_settings().github_api_url
        return None if api_reachable(url, timeout_s=2.0) else f"the GitHub API ({url or 'api.github.com'}) is unreachable"
    return None


# -- partitions in parallel on this machine ---------------------------------------------
def default_workers() -> int:
    """Processes a build uses for the partitions of one stage: every core."""
    return max(1, os.cpu_count() or 1)


@dataclass
class RunSummary:
    """What ``run_build`` reads from a run that ran in another process: the same three
    views as an ``ExecuteInProcessResult`` (the events are Dagster's own, pickled)."""

    run_id: str
    success: bool
    all_events: list[Any]

    def get_asset_materialization_events(self) -> list[Any]:
        return [e for e in self.all_events if e.is_step_materialization]

    def get_asset_check_evaluations(self) -> list[Any]:
        return [
            e.event_specific_data
            for e in self.all_events
            if e.event_type_value == "ASSET_CHECK_EVALUATION"
        ]


def _run_in_worker(
    key_paths: list[list[str]], partition_key: str | None, run_config: dict[str, Any] | None,
    tags: dict[str, str],
) -> RunSummary:
    """In a worker process: one in-process Dagster run of these assets for one partition,
    against the same persistent instance (DAGSTER_HOME) as the build."""
    from dagster_project.definitions import _base_definitions

    defs = _base_definitions()  # built once per worker process
    result = dg.materialize(
        list(defs.assets or []) + list(defs.asset_checks or []),
        instance=dg.DagsterInstance.get(),
        resources=defs.resources or {},
        partition_key=partition_key,
        selection=[dg.AssetKey(p) for p in key_paths],
        raise_on_error=False,
        run_config=run_config,
        tags=tags,
    )
    return RunSummary(result.run_id, result.success, list(result.all_events))


def _warm_worker() -> None:
    from dagster_project.definitions import _base_definitions

    _base_definitions()


class LocalRuns:
    """``run_build``'s ``launch`` for one machine: the partitions of a stage run as
    separate Dagster runs in ``workers`` processes at once (every core by default).

    Dagster runs one partition per run, so its multiprocess executor (which spreads the
    steps of *one* run) cannot run shards side by side; a pool of runs can. Processes, not
    threads: the simulator is pure Python, and Dagster's run machinery is not thread-safe.
    Spawned, not forked: the parent holds DuckDB and sqlite handles. Partition writers
    write Parquet files of their own; the few DuckDB writes (views, small tables) wait
    for the single writer lock (``Lake.connect``), so they are serialised. Unpartitioned
    stages run in this process, where their own progress reports reach the CLI; the
    workers are stopped before one runs (``run_build`` has collected the previous stage's
    runs by then), so they hold no memory while the parent works alone, and started again
    for the next partitioned stage."""

    def __init__(self, workers: int, *, run_config: dict[str, Any] | None, tags: dict[str, str]) -> None:
        self.workers = max(1, workers)
        self._run_config = run_config
        self._tags = dict(tags)
        self._pool: Any = None  # started by the first partition run of a stage

    def _start(self) -> Any:
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
            )
            # Each worker imports Dagster and builds the definitions (seconds) first.
            for _ in range(self.workers):
                self._pool.submit(_warm_worker)
        return self._pool

    def __call__(self, keys: list[dg.AssetKey], partition_key: str | None) -> Callable[[], Result]:
        if partition_key is None:
            self.close()
            summary = _run_in_worker(
                [list(k.path) for k in keys], None, self._run_config, self._tags
            )
            return lambda: summary  # type: ignore[return-value]
        future = self._start().submit(
            _run_in_worker, [list(k.path) for k in keys], partition_key, self._run_config, self._tags
        )
        return future.result  # type: ignore[return-value]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> LocalRuns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- repository sources, probed before anything runs ----------------------------------
#: Seconds one ``git ls-remote`` may take. A refused or unresolvable host answers in
#: milliseconds; this bounds a black-holed one. All sources are probed at once.
PROBE_TIMEOUT_S = 6.0


def probe_source(source: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why ``source`` (a git URL or local path) cannot be cloned or fetched now, or None.

    A local path is checked on disk; a URL with ``git ls-remote`` (one round trip, no
    objects), with prompts off so a private URL fails instead of asking for a password.
    """
    import subprocess

    from dagster_project.mining.git import local_path_of

    path = local_path_of(source)
    if path is not None:
        if not path.exists():
            return f"{path} does not exist"
        if not ((path / "HEAD").exists() or (path / ".git").exists()):
            return f"{path} is not a git repository"
        return None
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    try:
        res = subprocess.run(
            ["git", "ls-remote", "--exit-code", source, "HEAD"],
            capture_output=True, text=True, timeout=timeout_s, env=env, check=False,
        )
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout_s:.0f} s"
    except OSError as exc:  # git itself is missing
        return f"git cannot run ({exc.strerror or exc})"
    if res.returncode == 0:
        return None
    lines = [ln.strip() for ln in (res.stderr or "").splitlines() if ln.strip()]
    return (lines[-1] if lines else f"git ls-remote exited {res.returncode}")[:200]


def probe_sources(sources: dict[str, str]) -> dict[str, str]:
    """``{repo: reason}`` for every source that cannot be reached, probed in parallel
    (threads: each probe is a subprocess), so the whole check takes one probe's time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, len(sources))) as pool:
        reasons = dict(zip(sources, pool.map(probe_source, sources.values()), strict=True))
    return {repo: why for repo, why in reasons.items() if why is not None}


@exclusive_build  # one build per home; sweeps what a killed build left (home.py)
def run_build(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    selection: str | None = None,
    *,
    partitions: list[str] | None = None,
    on_run: Callable[[Stage, str | None, str], None] | None = None,
    quiet: bool = True,
    refresh: bool = False,
    launch: Launch | None = None,
    offline: Mapping[str, str] | None = None,
) -> BuildOutcome:
    """Run every stage; returns row counts per asset, failures and skipped assets.

    With ``refresh``, an asset runs only when it observes the outside world
    (``OBSERVERS``) or Dagster calls it stale or missing: its code version changed, or an
    input's data version differs from the one recorded at its last materialisation.
    Every table-writing asset reports a content fingerprint as its data version
    (``versions.py``), so a re-run that wrote the same rows does not cascade.

    With ``launch`` (a distributed build, ``definitions.DaskRuns``), each run is started
    through it instead of in this process, and the runs of one stage's partitions are all
    in flight before their results are collected.

    ``offline`` maps repos whose source cannot be reached (``probe_sources``) to the
    reason: their ``repo_clone`` partition is not run, everything that needs it is
    skipped, and everything else builds."""
    graph = defs.resolve_asset_graph()
    all_assets = list(defs.assets or []) + list(defs.asset_checks or [])
    resources = defs.resources or {}
    outcome = BuildOutcome()
    failed: set[tuple[dg.AssetKey, str | None]] = set()
    # One stale-status resolver (it caches event-log reads) until something runs.
    resolver: list[Any] = []
    probes: dict[str, str | None] = {}
    pending: list[tuple[Stage, str | None, list[dg.AssetKey], Callable[[], Result]]] = []
    offline = dict(offline or {})

    def materialize(stage: Stage, pkey: str | None, run_keys: list[dg.AssetKey]) -> None:
        resolver.clear()
        if on_run:
            on_run(stage, pkey, "start")
        if launch is not None:
            wait = launch(run_keys, pkey)
            if refresh:  # the next wave's staleness depends on this run
                finish(stage, pkey, run_keys, wait())
            else:
                pending.append((stage, pkey, run_keys, wait))
            return
        result = dg.materialize(
            all_assets,
            instance=instance,
            resources=resources,
            partition_key=pkey,
            selection=run_keys,
            raise_on_error=False,
            run_config=QUIET_RUN_CONFIG if quiet else None,
            tags={"kernelhouse/cli": "refresh" if refresh else "build", **run_tags()},
        )
        finish(stage, pkey, run_keys, result)

    def finish(stage: Stage, pkey: str | None, run_keys: list[dg.AssetKey], result: Result) -> None:
        _collect(result, outcome, pkey)
        if not result.success:
            message = _failure_message(result)
            for k in _failed_keys(result, run_keys):
                failed.add((k, pkey))
                outcome.failed[_label(k, pkey)] = message
        if on_run:
            on_run(stage, pkey, "ok" if result.success else "failed")

    for stage in plan_stages(defs, selection):
        for pkey in stage.partition_keys:
            if partitions and pkey is not None and pkey not in partitions:
                continue
            for k in stage.keys:
                if k.to_user_string() == "repo_clone" and pkey in offline:
                    failed.add((k, pkey))
                    outcome.skipped[_label(k, pkey)] = f"source offline: {offline[pkey]}"
            blocked = {
                k for k in stage.keys
                if (k, pkey) not in failed and _is_blocked(graph, k, pkey, failed)
            }
            run_keys = [k for k in stage.keys if k not in blocked and (k, pkey) not in failed]
            for k in blocked:
                outcome.skipped[k.to_user_string()] = _blocked_reason(graph, k, offline)
            if not run_keys:
                continue
            if not refresh:
                materialize(stage, pkey, run_keys)
                continue
            # Waves: run what is stale now, then look again (a child is stale only once
            # its parent has written different data), until nothing in the stage is.
            remaining = set(run_keys)
            while remaining:
                now_blocked = {k for k in remaining if _is_blocked(graph, k, pkey, failed)}
                for k in now_blocked:
                    outcome.skipped[k.to_user_string()] = _blocked_reason(graph, k, offline)
                remaining -= now_blocked
                if not resolver:
                    resolver.append(stale_status_resolver(instance, graph))
                reasons = stale_reasons(graph, resolver[0], remaining, pkey, probes)
                # Hold back anything downstream of a stale asset: once that one ran,
                # the child may or may not be stale, and only then can Dagster tell.
                ready = sorted(
                    (k for k in reasons if not (_upstream(graph, k) & set(reasons))),
                    key=lambda k: k.to_user_string(),
                )
                if not ready:
                    break
                for k in ready:
                    outcome.reasons[_label(k, pkey)] = reasons[k]
                materialize(stage, pkey, ready)
                remaining -= set(ready)
            for k in remaining:
                outcome.fresh.append(_label(k, pkey))
        for stage_, pkey, run_keys, wait in pending:  # this stage's launched runs
            finish(stage_, pkey, run_keys, wait())
        pending.clear()
    return outcome


def _blocked_reason(graph: dg.AssetGraph, key: dg.AssetKey, offline: Mapping[str, str]) -> str:
    if offline and dg.AssetKey("repo_clone") in _upstream(graph, key):
        return f"needs the offline source(s) {', '.join(sorted(offline))}"
    return "an upstream asset failed"


def _label(key: dg.AssetKey, pkey: str | None) -> str:
    return key.to_user_string() + (f"[{pkey}]" if pkey else "")


def stale_status_resolver(instance: dg.DagsterInstance, graph: dg.AssetGraph) -> Any:
    """Dagster's own stale-status resolver, the one behind the UI's stale markers."""
    # Its constructor wants a loading context; the instance-backed one is enough
    # outside a web request.
    from dagster._core.definitions.data_version import CachingStaleStatusResolver
    from dagster._core.loader import LoadingContextForTest

    return CachingStaleStatusResolver(instance, graph, LoadingContextForTest(instance))


def stale_reasons(
    graph: dg.AssetGraph,
    resolver: Any,
    keys: set[dg.AssetKey],
    pkey: str | None,
    probes: dict[str, str | None] | None = None,
) -> dict[dg.AssetKey, str]:
    """Which of ``keys`` must run on a refresh, with the reason Dagster gives (the same
    stale/missing status and causes the UI shows)."""
    from dagster._core.definitions.data_version import StaleStatus

    out: dict[dg.AssetKey, str] = {}
    probes = {} if probes is None else probes  # one reachability probe per service and run
    damaged = damaged_now()  # views whose files are gone: never "up to date"
    for key in keys:
        name = key.to_user_string()
        if name in damaged:
            out[key] = damaged[name]
            continue
        # An observer whose service does not answer has nothing new to see: it runs
        # only by the ordinary rule (missing, or its inputs changed).
        if name in OBSERVERS and name not in probes:
            probes[name] = _unreachable(name)
        if name in OBSERVERS and probes[name] is None:
            out[key] = "observes an external source"
            continue
        part = pkey if graph.get(key).is_partitioned else None
        status = resolver.get_status(key, part)
        if status == StaleStatus.MISSING:
            out[key] = "never materialised"
        elif status == StaleStatus.STALE:
            causes = resolver.get_stale_root_causes(key, part)
            out[key] = "; ".join(
                f"{c.asset_key.to_user_string()} {c.reason}" for c in causes[:3]
            ) or "stale"
    return out


def _is_blocked(
    graph: dg.AssetGraph,
    key: dg.AssetKey,
    pkey: str | None,
    failed: set[tuple[dg.AssetKey, str | None]],
) -> bool:
    """Blocked when an upstream asset failed for this partition (same partitioning) or
    for any partition (different partitioning: the input would be incomplete)."""
    mine = _pdef_id(graph.get(key).partitions_def)
    for up in _upstream(graph, key):
        same = graph.has(up) and _pdef_id(graph.get(up).partitions_def) == mine and mine
        if (same and (up, pkey) in failed) or (not same and any(f[0] == up for f in failed)):
            return True
    return False


def _upstream(graph: dg.AssetGraph, key: dg.AssetKey) -> set[dg.AssetKey]:
    seen: set[dg.AssetKey] = set()
    todo = list(graph.get(key).parent_keys)
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        if graph.has(k):
            todo.extend(graph.get(k).parent_keys)
    return seen


def _collect(result: Result, outcome: BuildOutcome, pkey: str | None) -> None:
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        name = mat.asset_key.to_user_string()
        md = mat.metadata
        rows = md.get("dagster/row_count") or md.get("rows")
        if rows is not None:
            outcome.rows[name] = outcome.rows.get(name, 0) + int(rows.value)  # type: ignore[union-attr]
            outcome.rows_by_run[name + (f"[{pkey}]" if pkey else "")] = int(rows.value)  # type: ignore[union-attr]
        else:
            outcome.rows.setdefault(name, 0)
    for ev in result.get_asset_check_evaluations():
        if not ev.passed:
            outcome.checks_failed.append(f"{ev.asset_key.to_user_string()}:{ev.check_name}")
    outcome.runs.append((result.run_id, pkey, result.success, ""))


def _failed_keys(result: Result, run_keys: list[dg.AssetKey]) -> set[dg.AssetKey]:
    materialized = {
        e.step_materialization_data.materialization.asset_key
        for e in result.get_asset_materialization_events()
    }
    return {k for k in run_keys if k not in materialized}


def _failure_message(result: Result) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data:
            err = event.step_failure_data.error
            if err is None:
                continue
            # A dagster.Failure carries our own description (it names the setting);
            # any other error is wrapped by Dagster, so show its root cause.
            msg = err.message
            if err.cls_name != "Failure":
                cause = err.cause
                while cause is not None:
                    msg = cause.message or msg
                    cause = cause.cause
            msg = " ".join(msg.split())
            return msg.split(": ", 1)[1][:500] if msg.startswith("dagster.") else msg[:500]
    return "run failed"
