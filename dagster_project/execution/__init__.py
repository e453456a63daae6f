"""How kernelhouse runs the asset graph: everything between ``Definitions`` and a run.

- ``policy``: the refresh policy the assets declare (automation conditions, the
  ``kernelhouse/*`` tags) and the one place those tags are resolved against settings.
- ``planner``: staged builds and refreshes (``run_build``, ``plan_stages``); reads
  policy from tags, never from asset names.
- ``local``: a stage's partitions as separate runs in a pool of spawned processes.
- ``executors``: the executor the code location uses (in-process, multiprocess, or the
  run-scoped Dask executor).
- ``distributed``: distributed builds, one Dagster run per cluster thread in flight.
- ``probes``: whether repository sources and external services answer now.
- ``dagster_private``: the only module that imports Dagster's private ``dagster._*``
  names, with the Dagster version it was checked against.

Importing this package imports nothing heavy (no Dask, no definitions).
"""
