"""Kernel-optimisation session simulator: plain typed Python, no dagster import.

Modules (reusable by kernelinfer today and a multi-agent kernelswarm generator later):

* ``hardware``   the six GPUs, limits and PTX feature gates
* ``ops``        the 41 inference ops: signatures, math, shapes, FLOP/byte formulas
* ``variants``   variant ladders per family/impl with launch-parameter spaces
* ``kernels``    launch geometry, smem/register model and executed work of a candidate
* ``efficiency`` per-GPU achieved-efficiency tables (CSV, the calibration surface)
* ``timing``     roofline time (``predict_time_ms``) and benchmark noise
* ``codegen``    Jinja2 rendering of CUDA/Triton candidates and realistic slips
* ``feedback``   compiler / correctness / benchmark RESULT text
* ``env``        compile → verify → benchmark harness for one task (no policy)
* ``agent``      the engineer policy (skill-parameterised)
* ``tasks``      task specs and unique task pools with holdout splits
* ``kernelinfer`` sessions, shards, frames, invariants
* ``export``     session statistics beside the card (the JSONL export is ``publish``)
* ``compile_check`` real nvcc / ast validation of the templates

``GENERATOR_VERSION`` changes whenever generated output changes; simulated shards are
pure functions of (task, seed, version).
"""

from __future__ import annotations

from typing import Any

GENERATOR_VERSION = "1.15.0"

_LAZY = {
    "predict_time_ms": ("timing", "predict_time_ms"),
    "build_tasks": ("kernelinfer", "build_tasks"),
    "generate_shard": ("kernelinfer", "generate_shard"),
    "session_frames": ("kernelinfer", "session_frames"),
    "check_session": ("kernelinfer", "check_session"),
    "compile_sample": ("compile_check", "compile_sample"),
}

__all__ = ["GENERATOR_VERSION", *_LAZY]


def __getattr__(name: str) -> Any:
    """Convenience re-exports, imported on first use (keeps package import cheap)."""
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(f"{__name__}.{mod}"), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
