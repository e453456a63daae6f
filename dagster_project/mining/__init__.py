"""Mining real git history: clones, tuned-config files and perf commits (no dagster import)."""
