"""The GPU-side half of commit execution: loader, comparison, statistics, runner. Imports
only the standard library, torch and triton (and ``commit_exec.specs``)."""
