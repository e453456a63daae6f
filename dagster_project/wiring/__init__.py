"""Dagster wiring: resources, partitions, jobs, schedules, sensors, the quality checks'
registration and the one helper that turns domain metadata into Dagster results. The
only package besides ``execution/`` and ``cli/`` that imports dagster; ``definitions.py``
assembles it."""
