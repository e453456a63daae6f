"""Publishing: turn the lake into what RL practitioners download (no dagster import).

* ``export_kernel_opt_rl`` — Parquet per subset and split, a card whose statistics are
  computed from the lake, ``code/reward.py`` and the upstream licence files;
* ``export_kernelinfer`` / ``export_kernelswarm`` — the simulated datasets in their cards'
  JSONL layouts, with ``stats.json`` and a card that says plainly they are simulated;
* ``hub_push`` / ``plan_commit`` — one Hub commit per dataset, refused while a blocking
  check fails.

Every export is built beside its destination and swapped in whole, so a failed export
leaves the previous one untouched. Statistics queries live in ``sql/publish/``; card prose
lives in ``templates/``.
"""

from __future__ import annotations

from .hub import (
    KEEP_REMOTE,
    PublishBlocked,
    hub_push,
    local_files,
    plan_commit,
    snapshot_commit_message,
)
from .kernel_opt_rl import (
    data_file,
    export_kernel_opt_rl,
    kernel_opt_rl_stats,
    read_snapshot,
    snapshot_label,
    upstream_notice_files,
)
from .report import ExportError, ExportReport
from .simulated import (
    KERNELINFER,
    KERNELSWARM,
    CompileValidation,
    SimLayout,
    export_kernelinfer,
    export_kernelswarm,
    kernelinfer_stats,
    kernelswarm_stats,
)

__all__ = [
    "KEEP_REMOTE",
    "KERNELINFER",
    "KERNELSWARM",
    "CompileValidation",
    "ExportError",
    "ExportReport",
    "PublishBlocked",
    "SimLayout",
    "data_file",
    "export_kernel_opt_rl",
    "export_kernelinfer",
    "export_kernelswarm",
    "hub_push",
    "kernel_opt_rl_stats",
    "kernelinfer_stats",
    "kernelswarm_stats",
    "local_files",
    "plan_commit",
    "read_snapshot",
    "snapshot_commit_message",
    "snapshot_label",
    "upstream_notice_files",
]
