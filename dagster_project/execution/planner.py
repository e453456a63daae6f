"""Materialise the asset graph (or a selection) in stages, from the CLI or a script.

Dagster's ``materialize`` runs one partition key at a time, and our graph mixes three
partitionings (none, repo, simulated shard). ``plan_stages`` orders the selected assets
topologically and cuts them into stages that share one partitions definition; each stage
runs once (unpartitioned) or once per key. Runs go to the persistent instance under
``KERNELHOUSE_HOME/dagster`` so the UI and ``kernelhouse status`` see them. A failed
asset stops only what depends on it: everything else still builds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import dagster as dg

from dagster_project.execution import policy
from dagster_project.execution.dagster_private import stale_status_resolver
from dagster_project.execution.runs import (
    QUIET_RUN_CONFIG,
    Launch,
    Result,
    materializable,
    run_assets,
)
from dagster_project.storage.home import damaged_now, exclusive_build, run_tags

__all__ = [
    "QUIET_RUN_CONFIG",
    "BuildOutcome",
    "Launch",
    "Result",
    "Stage",
    "materializable",
    "run_build",
]


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

    @property
    def only_offline_skips(self) -> bool:
        """Nothing failed, and everything skipped was skipped only because a repo source
        could not be reached: what an offline build can do, it did."""
        return not self.failed and all(r.startswith(OFFLINE_REASONS) for r in self.skipped.values())


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
            prefix, suffix = part[: part.index(bare)], part[part.index(bare) + len(bare) :]
            out.append(f"{prefix}key:{bare}{suffix}")
        else:
            out.append(f"({part})")
    return " or ".join(out)


def plan_stages(
    defs: dg.Definitions,
    selection: str | None,
    instance: dg.DagsterInstance | None = None,
) -> list[Stage]:
    """Topological stages of the selected assets, grouped by partitions definition.

    With ``instance``, a stage of shard-sized assets (``kernelhouse/shards``) leaves out
    the shards beyond what the configured size needs that none of its assets ever
    materialised here: they hold nothing to clean up, and each would be a run that writes
    nothing (a 40-session build's 18 empty session shards and 23 empty episode shards
    cost about as much as its simulation). A shard an earlier, larger build wrote is kept,
    so its file is still dropped."""
    graph = defs.resolve_asset_graph()
    if selection:
        names = {k.to_user_string() for k in graph.get_all_asset_keys()}
        unknown = [
            bare
            for part in selection.split(",")
            if (bare := part.strip().strip("+*")).isidentifier() and bare not in names
        ]
        if unknown:  # a typo would otherwise select nothing and "build" in no time
            raise ValueError(f"no asset named {', '.join(map(repr, unknown))}")
        keys = dg.AssetSelection.from_string(normalise_selection(selection)).resolve(graph)
        if not keys:
            raise ValueError("the selection matches no asset")
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
        pdef = _next_pdef(graph, ready, stages[-1].partitions_def if stages else None)
        group: list[dg.AssetKey] = []
        frontier = set(ready)
        while frontier:
            pick = [
                k
                for k in sorted(frontier, key=lambda k: k.to_user_string())
                if _pdef_id(graph.get(k).partitions_def) == _pdef_id(pdef)
            ]
            if not pick:
                break
            group += pick
            done |= set(pick)
            frontier = {k for k in keys - done if parents[k] <= done}
        part_keys: list[str | None] = list(pdef.get_partition_keys()) if pdef else [None]
        if instance is not None and pdef is not None:
            part_keys = _needed_shards(graph, group, part_keys, instance)
        stages.append(Stage(group, pdef, part_keys))
    return stages


def _next_pdef(
    graph: dg.AssetGraph,
    ready: list[dg.AssetKey],
    previous: dg.PartitionsDefinition | None,
) -> dg.PartitionsDefinition | None:
    """The partitioning of the next stage: after a partitioned stage, another partitioned
    one when one is ready (the pool of ``local.LocalRuns`` then runs the two back to back,
    with no idle core at the seam: ``run_build`` collects a stage's runs only when a later
    stage needs them), else that of the first ready asset by name."""
    if previous is not None:
        for k in ready:
            if graph.get(k).partitions_def is not None:
                return graph.get(k).partitions_def
    return graph.get(ready[0]).partitions_def


def _needed_shards(
    graph: dg.AssetGraph,
    group: list[dg.AssetKey],
    part_keys: list[str | None],
    instance: dg.DagsterInstance,
) -> list[str | None]:
    """``part_keys`` without the shards past the configured size that no asset of the
    stage has a materialisation of (see ``plan_stages``)."""
    from dagster_project.settings import load_settings
    from dagster_project.wiring.partitions import shards_needed

    fields = {graph.get(k).tags.get(policy.SHARDS_TAG) for k in group}
    if len(fields) != 1 or None in fields:
        return part_keys  # not (all) sized by one setting: every key runs
    needed = shards_needed(getattr(load_settings(), fields.pop()))
    written: set[str] = set()
    for k in group:
        written |= set(instance.get_materialized_partitions(k))
    return [p for p in part_keys if p is None or int(p) < needed or p in written]


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

    With ``refresh``, an asset runs only when it observes the outside world (its
    ``kernelhouse/observer`` tag, ``policy.py``) and that service answers, or when Dagster
    calls it stale or missing: its code version changed, or an input's data version
    differs from the one recorded at its last materialisation.
    Every table-writing asset reports a content fingerprint as its data version
    (``versions.py``), so a re-run that wrote the same rows does not cascade.

    With ``launch`` (``local.LocalRuns``; ``distributed.DaskRuns``), each run is started
    through it instead of in this process, and the runs of one stage's partitions are all
    in flight before their results are collected.

    ``offline`` maps repos whose source cannot be reached (``probe_sources``) to the
    reason: their partition of the git-source observer (``repo_clone``) is not run,
    everything that needs it is skipped, and everything else builds."""
    build = _Build(defs, instance, on_run, quiet, refresh, launch, offline)
    for stage in plan_stages(defs, selection, instance):
        # Launched runs of earlier stages are collected only when this stage needs them
        # (it reads their assets, or it runs in this process): a partitioned stage that
        # does not depend on them starts while they finish.
        if build.pending and (stage.partitions_def is None or build.needs_pending(stage)):
            build.collect_launched()
        for pkey in stage.partition_keys:
            if partitions and pkey is not None and pkey not in partitions:
                continue
            build.run_partition(stage, pkey)
    build.collect_launched()
    return build.outcome


class _Build:
    """One ``run_build``'s state: the outcome so far, the (asset, partition) pairs that
    failed or were skipped, the refresh's stale-status resolver and service probes, and
    the launched runs of the current stage that are still to be collected."""

    def __init__(
        self,
        defs: dg.Definitions,
        instance: dg.DagsterInstance,
        on_run: Callable[[Stage, str | None, str], None] | None,
        quiet: bool,
        refresh: bool,
        launch: Launch | None,
        offline: Mapping[str, str] | None,
    ) -> None:
        self.instance = instance
        self.on_run = on_run
        self.quiet = quiet
        self.refresh = refresh
        self.launch = launch
        self.graph = defs.resolve_asset_graph()
        self.all_assets = materializable(defs)
        self.resources = defs.resources or {}
        self.outcome = BuildOutcome()
        self.failed: set[tuple[dg.AssetKey, str | None]] = set()
        # One stale-status resolver (it caches event-log reads) until something runs.
        self.resolver: Any = None
        self.probes: dict[str, str | None] = {}
        self.pending: list[tuple[Stage, str | None, list[dg.AssetKey], Callable[[], Result]]] = []
        self.offline = dict(offline or {})

    def run_partition(self, stage: Stage, pkey: str | None) -> None:
        """Run one partition of a stage: skip what needs an offline source or a failed
        upstream asset, then run the rest (on a refresh, only what is stale, in waves)."""
        graph, failed, outcome = self.graph, self.failed, self.outcome
        for k in stage.keys:
            if observed(graph, k) == policy.GIT and pkey in self.offline:
                failed.add((k, pkey))
                outcome.skipped[_label(k, pkey)] = f"source offline: {self.offline[pkey]}"
        blocked = {
            k for k in stage.keys if (k, pkey) not in failed and _is_blocked(graph, k, pkey, failed)
        }
        run_keys = [k for k in stage.keys if k not in blocked and (k, pkey) not in failed]
        for k in blocked:
            outcome.skipped[k.to_user_string()] = _blocked_reason(graph, k, self.offline)
        if not run_keys:
            return
        if not self.refresh:
            self.materialize(stage, pkey, run_keys)
            return
        self._refresh_waves(stage, pkey, run_keys)

    def _refresh_waves(self, stage: Stage, pkey: str | None, run_keys: list[dg.AssetKey]) -> None:
        """Waves: run what is stale now, then look again (a child is stale only once
        its parent has written different data), until nothing in the stage is."""
        graph, outcome = self.graph, self.outcome
        remaining = set(run_keys)
        while remaining:
            now_blocked = {k for k in remaining if _is_blocked(graph, k, pkey, self.failed)}
            for k in now_blocked:
                outcome.skipped[k.to_user_string()] = _blocked_reason(graph, k, self.offline)
            remaining -= now_blocked
            if self.resolver is None:
                self.resolver = stale_status_resolver(self.instance, graph)
            reasons = stale_reasons(graph, self.resolver, remaining, pkey, self.probes)
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
            self.materialize(stage, pkey, ready)
            remaining -= set(ready)
        for k in remaining:
            outcome.fresh.append(_label(k, pkey))

    def materialize(self, stage: Stage, pkey: str | None, run_keys: list[dg.AssetKey]) -> None:
        """Run ``run_keys`` for one partition: in this process, or through ``launch``
        (collected with the stage, or at once on a refresh)."""
        self.resolver = None
        if self.on_run:
            self.on_run(stage, pkey, "start")
        if self.launch is not None:
            wait = self.launch(run_keys, pkey)
            if self.refresh:  # the next wave's staleness depends on this run
                self.finish(stage, pkey, run_keys, wait())
            else:
                self.pending.append((stage, pkey, run_keys, wait))
            return
        result = run_assets(
            self.all_assets,
            self.resources,
            self.instance,
            run_keys,
            pkey,
            run_config=QUIET_RUN_CONFIG if self.quiet else None,
            tags={"kernelhouse/cli": "refresh" if self.refresh else "build", **run_tags()},
        )
        self.finish(stage, pkey, run_keys, result)

    def finish(
        self, stage: Stage, pkey: str | None, run_keys: list[dg.AssetKey], result: Result
    ) -> None:
        """Record one run's rows, checks and failures, and report it to ``on_run``."""
        _collect(result, self.outcome, pkey)
        if not result.success:
            message = _failure_message(result)
            for k in _failed_keys(result, run_keys):
                self.failed.add((k, pkey))
                self.outcome.failed[_label(k, pkey)] = message
        if self.on_run:
            self.on_run(stage, pkey, "ok" if result.success else "failed")

    def needs_pending(self, stage: Stage) -> bool:
        """Whether an asset of ``stage`` is downstream of an asset of a launched run that
        is not collected yet (its outcome decides what runs or is skipped)."""
        pending = {k for _, _, keys, _ in self.pending for k in keys}
        return any(_upstream(self.graph, k) & pending for k in stage.keys)

    def collect_launched(self) -> None:
        """Wait for this stage's launched runs and record them, in launch order."""
        for stage_, pkey, run_keys, wait in self.pending:
            self.finish(stage_, pkey, run_keys, wait())
        self.pending.clear()


#: How a skip for an unreachable source starts (its own partition; anything downstream).
OFFLINE_REASONS = ("source offline:", "needs the offline source")


def _blocked_reason(graph: dg.AssetGraph, key: dg.AssetKey, offline: Mapping[str, str]) -> str:
    if offline and any(observed(graph, up) == policy.GIT for up in _upstream(graph, key)):
        return f"needs the offline source(s) {', '.join(sorted(offline))}"
    return "an upstream asset failed"


def _label(key: dg.AssetKey, pkey: str | None) -> str:
    return key.to_user_string() + (f"[{pkey}]" if pkey else "")


def observed(graph: dg.AssetGraph, key: dg.AssetKey) -> str | None:
    """The service ``key`` observes (its ``kernelhouse/observer`` tag), else None."""
    return graph.get(key).tags.get(policy.OBSERVER_TAG) if graph.has(key) else None


def observers(defs: dg.Definitions) -> set[str]:
    """Names of the assets that observe an external service: what a refresh with nothing
    new anywhere still runs."""
    graph = defs.resolve_asset_graph()
    return {k.to_user_string() for k in graph.get_all_asset_keys() if observed(graph, k)}


def stale_reasons(
    graph: dg.AssetGraph,
    resolver: Any,
    keys: set[dg.AssetKey],
    pkey: str | None,
    probes: dict[str, str | None] | None = None,
) -> dict[dg.AssetKey, str]:
    """Which of ``keys`` must run on a refresh, with the reason Dagster gives (the same
    stale/missing status and causes the UI shows)."""
    from dagster_project.execution.dagster_private import StaleStatus
    from dagster_project.execution.probes import service_unreachable

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
        service = observed(graph, key)
        if service is not None and service not in probes:
            probes[service] = service_unreachable(service)
        if service is not None and probes[service] is None:
            out[key] = "observes an external source"
            continue
        part = pkey if graph.get(key).is_partitioned else None
        status = resolver.get_status(key, part)
        if status == StaleStatus.MISSING:
            out[key] = "never materialised"
        elif status == StaleStatus.STALE:
            causes = resolver.get_stale_root_causes(key, part)
            out[key] = (
                "; ".join(f"{c.asset_key.to_user_string()} {c.reason}" for c in causes[:3])
                or "stale"
            )
    return out


def _is_blocked(
    graph: dg.AssetGraph,
    key: dg.AssetKey,
    pkey: str | None,
    failed: set[tuple[dg.AssetKey, str | None]],
) -> bool:
    """Blocked when an upstream asset failed for this partition (same partitioning) or
    for any partition (different partitioning: the input would be incomplete). An asset
    tagged ``kernelhouse/partial_inputs`` builds over what exists and is never blocked."""
    if graph.get(key).tags.get(policy.PARTIAL_TAG) == "true":
        return False
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
        # a partition's own rows (its dagster/row_count is the whole table's)
        rows = md.get("partition_rows") or md.get("dagster/row_count") or md.get("rows")
        if rows is not None:
            count = int(cast(int, rows.value))  # a row count is an int metadata value
            outcome.rows[name] = outcome.rows.get(name, 0) + count
            outcome.rows_by_run[name + (f"[{pkey}]" if pkey else "")] = count
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
            if err.cls_name == "DagsterExecutionInterruptedError":
                return "interrupted (the build was stopped by a signal)"
            msg = " ".join(msg.split())
            # Dagster's own errors read "dagster.<Class>: <text>"; keep the text (a
            # message without one, e.g. a bare class name, is shown as it is).
            _, sep, text = msg.partition(": ")
            return (text if sep and msg.startswith("dagster.") else msg)[:500]
    return "run failed"
