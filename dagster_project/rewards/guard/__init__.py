"""Shared defences every execution reward runs a candidate through (issue 37).

* ``static``   what a patch may not introduce (imports, calls, attributes, module
  writes, ``global``, spelled names), read with ``ast``: standard library only;
* ``checks``   exact output type/dtype/shape/strides, finiteness, magnitude-aware
  per-dtype tolerances, child clock vs parent wall clock: numpy only;
* ``tasks``    the guard's own tasks (inputs, float64 reference);
* ``backends`` / ``child``  the judge inside the candidate's process (numpy or torch);
* ``isolate``  the parent: candidate in its own process, secrets drawn at run time,
  snapshots judged here, where the oracle lives;
* ``configs``  the same defences for tuned-config completions around
  ``rewards.gpu.execution_reward``;
* ``patches``  SEARCH/REPLACE completions on a task's before_code, reward with "no gain".

Nothing imported here at package level needs numpy, torch or dagster.
"""

from __future__ import annotations

from .static import STATIC_RULES_VERSION, Finding, introduced, scan

#: Bumped whenever a defence changes what it accepts (stored with every suite result).
GUARD_VERSION = "1.6.1"  # 1.6.1: the judge stops reading once the child exited (a forked
#   process holding the pipe open held it until the deadline)

__all__ = ["GUARD_VERSION", "STATIC_RULES_VERSION", "Finding", "introduced", "scan"]
