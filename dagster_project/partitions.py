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
