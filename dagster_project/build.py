"""Materialise the asset graph (or a selection) in stages, from the CLI or a script.

Dagster's ``materialize`` runs one partition key at a time, and our graph mixes three
partitionings (none, repo, simulated shard). ``plan_stages`` orders the selected assets
topologically and cuts them into stages that share one partitions definition; each stage
runs once (unpartitioned) or once per key. Runs go to the persistent instance under
``KERNELHOUSE_HOME/dagster`` so the UI and ``kernelhouse status`` see them. A failed
asset stops only what depends on it: everything else still builds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import dagster as dg

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


def run_build(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    selection: str | None = None,
    *,
    partitions: list[str] | None = None,
    on_run: Callable[[Stage, str | None, str], None] | None = None,
    quiet: bool = True,
) -> BuildOutcome:
    """Run every stage; returns row counts per asset, failures and skipped assets."""
    graph = defs.resolve_asset_graph()
    all_assets = list(defs.assets or []) + list(defs.asset_checks or [])
    resources = defs.resources or {}
    outcome = BuildOutcome()
    failed: set[tuple[dg.AssetKey, str | None]] = set()
    for stage in plan_stages(defs, selection):
        for pkey in stage.partition_keys:
            if partitions and pkey is not None and pkey not in partitions:
                continue
            blocked = {k for k in stage.keys if _is_blocked(graph, k, pkey, failed)}
            run_keys = [k for k in stage.keys if k not in blocked]
            for k in blocked:
                outcome.skipped[k.to_user_string()] = "an upstream asset failed"
            if not run_keys:
                continue
            if on_run:
                on_run(stage, pkey, "start")
            result = dg.materialize(
                all_assets,
                instance=instance,
                resources=resources,
                partition_key=pkey,
                selection=run_keys,
                raise_on_error=False,
                run_config=QUIET_RUN_CONFIG if quiet else None,
                tags={"kernelhouse/cli": "build"},
            )
            _collect(result, outcome, pkey)
            if not result.success:
                message = _failure_message(result)
                for k in _failed_keys(result, run_keys):
                    failed.add((k, pkey))
                    label = k.to_user_string() + (f"[{pkey}]" if pkey else "")
                    outcome.failed[label] = message
            if on_run:
                on_run(stage, pkey, "ok" if result.success else "failed")
    return outcome


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


def _collect(result: dg.ExecuteInProcessResult, outcome: BuildOutcome, pkey: str | None) -> None:
    for event in result.get_asset_materialization_events():
        mat = event.step_materialization_data.materialization
        name = mat.asset_key.to_user_string()
        md = mat.metadata
        rows = md.get("dagster/row_count") or md.get("rows")
        if rows is not None:
            outcome.rows[name] = outcome.rows.get(name, 0) + int(rows.value)  # type: ignore[union-attr]
        else:
            outcome.rows.setdefault(name, 0)
    for ev in result.get_asset_check_evaluations():
        if not ev.passed:
            outcome.checks_failed.append(f"{ev.asset_key.to_user_string()}:{ev.check_name}")
    outcome.runs.append((result.run_id, pkey, result.success, ""))


def _failed_keys(result: dg.ExecuteInProcessResult, run_keys: list[dg.AssetKey]) -> set[dg.AssetKey]:
    materialized = {
        e.step_materialization_data.materialization.asset_key
        for e in result.get_asset_materialization_events()
    }
    return {k for k in run_keys if k not in materialized}


def _failure_message(result: dg.ExecuteInProcessResult) -> str:
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
