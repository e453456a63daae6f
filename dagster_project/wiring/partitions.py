"""Partition definitions: the units of parallelism (one repo; one simulated shard)."""

from __future__ import annotations

import dagster as dg

from dagster_project.settings import REPOS

repo_partitions = dg.StaticPartitionsDefinition(list(REPOS))

# Shard counts of the default builds (100 sessions / episodes per shard, as the cards).
KERNELINFER_SHARDS = 19  # 1,899 sessions
KERNELSWARM_SHARDS = 24  # 2,400 episodes

kernelinfer_shards = dg.StaticPartitionsDefinition([f"{i:03d}" for i in range(KERNELINFER_SHARDS)])
kernelswarm_shards = dg.StaticPartitionsDefinition([f"{i:03d}" for i in range(KERNELSWARM_SHARDS)])


def shards_needed(n_items: int, shard_size: int = 100) -> int:
    """How many shards ``n_items`` sessions / episodes fill."""
    return -(-n_items // shard_size)


def shard_partitions(
    n_items: int, default_shards: int, shard_size: int = 100
) -> dg.StaticPartitionsDefinition:
    """Shard keys for a build of ``n_items`` sessions / episodes: as many as it needs
    (ten times the data is ten times the shards, each a unit of parallel work), never
    fewer than the default build's, so shards left by a larger earlier build are still
    addressed and get cleaned up."""
    n = max(default_shards, shards_needed(n_items, shard_size))
    return dg.StaticPartitionsDefinition([f"{i:03d}" for i in range(n)])
