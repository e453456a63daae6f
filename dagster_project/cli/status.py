"""What ``kernelhouse status`` reports, as plain data (the CLI only formats it).

* rows: for a partitioned asset, the sum over its partitions of each partition's latest
  materialisation (1,899 sessions over 19 shards, not the last shard's 99);
* checks: the latest result of every check; for a partitioned asset, the latest result of
  each partition, summarised (``passed in 19 of 19 shards``);
* sources: every repo source, the GitHub API and the Hugging Face Hub, probed now, with
  what an unreachable one means for a build in words;
* PR bodies: how many referenced PRs have no cached body, from the last ``pr_bodies`` run.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from dagster_project.settings import Settings

#: Dagster's check record states, in words.
_CHECK_WORDS = {
    "SUCCEEDED": "passed",
    "FAILED": "failed",
    "EXECUTION_FAILED": "error",
    "PLANNED": "not run",
    "SKIPPED": "skipped",
}


@dataclass
class CheckStatus:
    name: str
    result: str  # passed | failed | error | not run | never
    detail: str = ""  # partitioned: "in 19 of 19 shards"

    @property
    def bad(self) -> bool:
        return self.result in ("failed", "error")

    def words(self) -> str:
        return f"{self.name}: {self.result}" + (f" {self.detail}" if self.detail else "")


@dataclass
class AssetStatus:
    name: str
    group: str
    when: str  # UTC of the latest materialisation, or "never"
    rows: int | None
    partitions: str = ""  # "19/19" for partitioned assets
    checks: list[CheckStatus] = field(default_factory=list)


def _rows_of(event: Any) -> int | None:
    if event is None or event.asset_materialization is None:
        return None
    md = event.asset_materialization.metadata
    # a partition's own rows (a shard's dagster/row_count is the whole table's)
    value = md.get("partition_rows") or md.get("dagster/row_count") or md.get("rows")
    return None if value is None else int(value.value)


def _latest(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None) -> Any:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None),
        limit=1,
    ).records
    return records[0].event_log_entry if records else None


def _check_status(
    instance: dg.DagsterInstance, check_key: dg.AssetCheckKey, partitions: list[str] | None
) -> CheckStatus:
    storage = instance.event_log_storage
    if not partitions:
        recs = storage.get_asset_check_execution_history(check_key, limit=1)
        if not recs:
            return CheckStatus(check_key.name, "never")
        return CheckStatus(
            check_key.name, _CHECK_WORDS.get(recs[0].status.value, recs[0].status.value.lower())
        )
    # The latest record of each partition (the history is newest first).
    history = storage.get_asset_check_execution_history(
        check_key, limit=max(50, 4 * len(partitions))
    )
    if not history:
        return CheckStatus(check_key.name, "never")
    words = [_CHECK_WORDS.get(r.status.value, r.status.value.lower()) for r in history]
    if any(getattr(r, "partition", None) for r in history):
        latest: dict[str, str] = {}
        for rec, word in zip(history, words, strict=True):
            if rec.partition in partitions:
                latest.setdefault(rec.partition, word)
        counts, unit = Counter(latest.values()), "shards"
    else:
        # Records without a partition (the check is evaluated by a partitioned asset's
        # run, one record per run): the latest run of each shard is the last N records.
        counts, unit = Counter(words[: len(partitions)]), "latest shard runs"
    ran = sum(counts.values())
    for word in ("error", "failed"):
        if counts.get(word):
            return CheckStatus(check_key.name, word, f"in {counts[word]} of {ran} {unit}")
    top = counts.most_common(1)[0][0]
    return CheckStatus(check_key.name, top, f"in {counts[top]} of {ran} {unit}")


def asset_statuses(instance: dg.DagsterInstance, graph: dg.AssetGraph) -> list[AssetStatus]:
    """One row per materialisable asset, sorted by name."""
    out = []
    for key in sorted(graph.get_all_asset_keys(), key=lambda k: k.to_user_string()):
        node = graph.get(key)
        if not node.is_materializable:
            continue
        pdef = node.partitions_def
        part_keys = list(pdef.get_partition_keys()) if pdef else None
        when, rows, parts = "never", None, ""
        if part_keys:
            events = [e for p in part_keys if (e := _latest(instance, key, p)) is not None]
            counts = [r for e in events if (r := _rows_of(e)) is not None]
            rows = sum(counts) if counts else None
            parts = f"{len(events)}/{len(part_keys)}"
            if events:
                when = time.strftime(
                    "%Y-%m-%d %H:%M:%S", time.gmtime(max(e.timestamp for e in events))
                )
        else:
            event = instance.get_latest_materialization_event(key)
            if event is not None and event.asset_materialization is not None:
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(event.timestamp))
                rows = _rows_of(event)
        checks = [
            _check_status(instance, ck, part_keys)
            for ck in sorted(node.check_keys, key=lambda c: c.name)
        ]
        out.append(
            AssetStatus(key.to_user_string(), node.group_name or "", when, rows, parts, checks)
        )
    return out


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def source_notes(settings: Settings) -> list[str]:
    """Sentences about every external source that cannot be reached now (empty when all
    answer): what is unreachable and what a build does without it."""
    from concurrent.futures import ThreadPoolExecutor

    from dagster_project.execution.policy import GITHUB, HUB
    from dagster_project.execution.probes import probe_sources, service_unreachable

    with ThreadPoolExecutor(max_workers=2) as pool:
        repos = pool.submit(probe_sources, dict(settings.sources))
        services = {
            name: pool.submit(service_unreachable, service)
            for name, service in (("pr_bodies", GITHUB), ("moe_model_shapes", HUB))
        }
        offline = repos.result()
        down = {name: f.result() for name, f in services.items()}
    notes = [
        f"{settings.env_name(repo)}={settings.sources[repo]!r} cannot be reached now ({why}): "
        f"a build skips {repo}'s clone and everything mined from it."
        for repo, why in sorted(offline.items())
    ]
    if down["pr_bodies"]:
        notes.append(
            f"{_sentence(down['pr_bodies'])}: PR bodies come from the cache only; "
            "PRs not cached stay without gains."
        )
    if down["moe_model_shapes"]:
        notes.append(
            f"{_sentence(down['moe_model_shapes'])}: "
            "MoE model shapes come from the checked-in snapshot."
        )
    return notes


def pr_body_note(instance: dg.DagsterInstance) -> str | None:
    """How many referenced PRs have no cached body, from the last ``pr_bodies`` run."""
    event = instance.get_latest_materialization_event(dg.AssetKey("pr_bodies"))
    if event is None or event.asset_materialization is None:
        return None
    md: dict[str, Any] = {
        k: getattr(v, "value", v) for k, v in event.asset_materialization.metadata.items()
    }
    needed, missing = md.get("needed"), md.get("still_missing")
    if needed is None or missing is None:
        return None
    if not missing:
        return f"PR bodies: all {int(needed):,} referenced PRs have a cached body."
    why = " (GitHub was unreachable at that run)" if md.get("offline") else ""
    return (
        f"PR bodies: {int(missing):,} of {int(needed):,} referenced PRs have no cached body{why}; "
        "their rows carry no extracted gains. "
        "Set GITHUB_TOKEN and run `kernelhouse refresh` online."
    )


def gains_note(instance: dg.DagsterInstance) -> str | None:
    """What the last ``pr_gains`` run read, in words, unless it read every PR body
    ("gains not extracted: 845 of 845 PR bodies unavailable")."""
    event = instance.get_latest_materialization_event(dg.AssetKey("pr_gains"))
    if event is None or event.asset_materialization is None:
        return None
    md = event.asset_materialization.metadata
    state = getattr(md.get("gains_state"), "value", md.get("gains_state"))
    if not state or str(state).startswith("gains extracted from all"):
        return None
    return str(state)
