"""The refresh policy an asset declares beside its code, and what the assembly resolves.

An asset states its policy in its own decorator: an ``automation_condition`` built here
(so the wording of each rule lives once), and ``kernelhouse/*`` tags that the build
planner and the assembly read. Nothing here or in ``planner`` looks at an asset's name.

Tags (``TAGS``):

* ``kernelhouse/observer``: the asset observes an external service (``git``: a repo
  source; ``hub``: the Hugging Face Hub; ``github``: the GitHub API). A refresh runs it
  whenever that service answers; its content data version decides what else runs.
* ``kernelhouse/code_version``: the asset's declared code version is completed when the
  definitions are built. ``sim_params``: it carries the simulator's seed and sizes, so a
  new seed marks the shards stale like a new generator does. ``mining_rules``: the rule
  versions the miner has loaded now (``mining.versions``). ``extractor``: the gains
  extractors' versions and the LLM model when one is configured (``gains.pipeline``).
  ``shipped_data``: a fingerprint of the device batches shipped in the package that the
  asset ingests (``storage/lineage.py`` ``Access.shipped``), so a new batch re-runs it.
* ``kernelhouse/partial_inputs``: ``true`` when the asset builds over whichever of its
  inputs exist (``storage/lineage.py`` ``Access.partial``: the analysis views, the
  measured configs from the shipped batches), so a build without a repo source still runs
  it instead of skipping it with everything downstream of that source.
* ``kernelhouse/shards``: the settings field that sizes the asset's shard partitions
  (``sim_sessions``, ``sim_episodes``); the declared partitions are the default build's.
"""

from __future__ import annotations

import dagster as dg

from dagster_project.settings import Settings

OBSERVER_TAG = "kernelhouse/observer"
CODE_VERSION_TAG = "kernelhouse/code_version"
SHARDS_TAG = "kernelhouse/shards"
PARTIAL_TAG = "kernelhouse/partial_inputs"
TAGS = (OBSERVER_TAG, CODE_VERSION_TAG, SHARDS_TAG, PARTIAL_TAG)

#: Observed services (values of ``kernelhouse/observer``).
GIT, HUB, GITHUB = "git", "hub", "github"
#: Values of ``kernelhouse/code_version``.
SIM_PARAMS, MINING_RULES, EXTRACTOR = "sim_params", "mining_rules", "extractor"
SHIPPED = "shipped_data"
#: Values of ``kernelhouse/shards``: settings fields that count the items to shard.
SHARD_SIZES = ("sim_sessions", "sim_episodes")


def lineage_tags(asset: str) -> dict[str, str]:
    """The tags an asset's lineage declaration (``storage/lineage.py``) implies:
    ``kernelhouse/partial_inputs`` when it builds over whichever inputs exist (the build
    planner then never skips it for a missing input); ``kernelhouse/code_version=
    shipped_data`` when it ingests batches shipped as data. Here, beside the tags' other
    values, so the Dagster glue (``wiring``) never reaches up for them."""
    from dagster_project.storage import lineage

    acc = lineage.access(asset)
    out = {PARTIAL_TAG: "true"} if acc.partial else {}
    if acc.shipped:
        out[CODE_VERSION_TAG] = SHIPPED
    return out


def observer(service: str) -> dict[str, str]:
    """Tags of an asset that observes ``service`` (``git``, ``hub`` or ``github``)."""
    if service not in (GIT, HUB, GITHUB):
        raise ValueError(f"{OBSERVER_TAG}={service!r}: not one of {GIT}, {HUB}, {GITHUB}")
    return {OBSERVER_TAG: service}


def on_inputs_changed() -> dg.AutomationCondition:
    """Mined, derived and published assets: run when an input's *data version* changed
    (or the asset is newly missing), once its inputs are present and nothing is in
    flight. Every table writer reports a content fingerprint as its data version, so a
    fetch that found the same head, or a re-parse that produced the same rows, starts
    nothing downstream (Dagster's ``eager`` would react to any new materialisation)."""
    changed = (
        dg.AutomationCondition.newly_missing()
        | dg.AutomationCondition.any_deps_match(dg.AutomationCondition.data_version_changed())
    ).since_last_handled()
    return (
        changed
        & ~dg.AutomationCondition.any_deps_missing()
        & ~dg.AutomationCondition.any_deps_in_progress()
        & ~dg.AutomationCondition.in_progress()
    ).with_label("inputs' data changed")


def on_missing_or_new_code() -> dg.AutomationCondition:
    """Simulated assets: only when missing or when the generator's code version (which
    includes its seed and sizes, ``kernelhouse/code_version=sim_params``) changed."""
    return dg.AutomationCondition.missing() | dg.AutomationCondition.code_version_changed()


def daily() -> dg.AutomationCondition:
    """Assets that observe a service with no change feed (Hub shapes, PR bodies): once a
    day, at the daily schedule's tick. (Repo sources have the schedule itself; the Hub
    push has no condition: publishing is a deliberate act.)"""
    from dagster_project.wiring.schedules import DAILY_CRON

    return (
        dg.AutomationCondition.cron_tick_passed(DAILY_CRON, "UTC")
        & ~dg.AutomationCondition.in_progress()
    ).with_label("daily")


def _shipped_version(asset: str, declared: str | None) -> str:
    """The declared code version (if any) plus the fingerprint of the shipped batches the
    asset's lineage entry names."""
    from pathlib import Path

    import dagster_project
    from dagster_project.storage import lineage
    from dagster_project.storage.versions import files_version

    root = Path(dagster_project.__file__).parent
    data = files_version(root, lineage.access(asset).shipped)
    return f"{declared}+data.{data}" if declared else f"data.{data}"


def resolve(spec: dg.AssetSpec, settings: Settings) -> dg.AssetSpec:
    """Complete what an asset's tags say depends on settings or on loaded rules: its
    code version (``kernelhouse/code_version``) and its shard keys (``kernelhouse/shards``).
    An asset without these tags is returned as declared."""
    from dagster_project.wiring import partitions

    tags = spec.tags or {}
    code_version = spec.code_version
    kind = tags.get(CODE_VERSION_TAG)
    if kind == SIM_PARAMS and code_version:
        code_version = (
            f"{code_version}+seed{settings.sim_seed}"
            f".s{settings.sim_sessions}.e{settings.sim_episodes}"
        )
    elif kind == MINING_RULES:
        from dagster_project.mining.versions import asset_code_version

        code_version = asset_code_version(spec.key.to_user_string())
    elif kind == EXTRACTOR:
        from dagster_project.gains.pipeline import extractor_code_version

        code_version = extractor_code_version(settings.llm_model if settings.llm_base_url else None)
    elif kind == SHIPPED:
        code_version = _shipped_version(spec.key.to_user_string(), spec.code_version)
    elif kind is not None:
        raise ValueError(f"{spec.key.to_user_string()}: {CODE_VERSION_TAG}={kind!r} is unknown")

    pdef = spec.partitions_def
    sized_by = tags.get(SHARDS_TAG)
    if sized_by is not None:
        if sized_by not in SHARD_SIZES or pdef is None:
            raise ValueError(
                f"{spec.key.to_user_string()}: {SHARDS_TAG}={sized_by!r} needs shard partitions "
                f"and one of {', '.join(SHARD_SIZES)}"
            )
        default_shards = len(pdef.get_partition_keys())
        pdef = partitions.shard_partitions(getattr(settings, sized_by), default_shards)
    if code_version == spec.code_version and pdef is spec.partitions_def:
        return spec
    return spec.replace_attributes(code_version=code_version, partitions_def=pdef)
