"""Execution reward for tuned launch configs, measured on a real GPU.

The harness launches a ``tuned_configs`` row's *own* Triton kernel (from its
``kernel_source``) with a candidate config on realistic inputs, checks the output
against a higher-precision reference and times it; ``execution_reward`` turns that into
``t_best / t_pred``. Modules:

* ``spec``: the row and result records, config validation, statuses and reward values;
* ``source``: parse the kernel source (signature by ``ast``), shim engine imports, load;
* ``routing`` / ``quant``: MoE routing + block alignment (numpy) and fp8 scale arithmetic
  (numpy or torch, one implementation);
* ``plan``: (row, config) -> kernel launches bound by parameter name, per engine policy;
* ``neighbours``: the candidate set (tuned, default, one-step neighbours);
* ``reward``: ``execution_reward`` and its arithmetic;
* ``device``: inputs, reference, check and CUDA-graph timing (torch/triton, imported
  lazily so everything above runs on a CPU);
* ``run_batch``: the resumable batch runner used on the GPU machine.

Nothing here imports polars, duckdb or dagster: the package runs on a GPU machine that
has only numpy, torch and triton. Planning batches and ingesting results into the lake
live in ``dagster_project.rewards.measured``.
"""

from __future__ import annotations

from .neighbours import Candidate, candidates, neighbours
from .reward import RewardResult, execution_reward, reward_from
from .spec import (
    FAILED_REWARD,
    HARNESS_ERROR_REWARD,
    HARNESS_VERSION,
    STATUSES,
    ConfigError,
    Measurement,
    MeasureRow,
    normalise_config,
)

__all__ = [
    "FAILED_REWARD",
    "HARNESS_ERROR_REWARD",
    "HARNESS_VERSION",
    "STATUSES",
    "Candidate",
    "ConfigError",
    "MeasureRow",
    "Measurement",
    "RewardResult",
    "candidates",
    "execution_reward",
    "neighbours",
    "normalise_config",
    "reward_from",
]
