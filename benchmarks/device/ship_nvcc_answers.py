"""Compile the default build's compile-validation sample and ship nvcc's answers.

A cold ``kernelhouse build`` spends most of its first stage compiling the 48 template
instantiations of ``sim_compile_validation`` (31 nvcc runs, about 70 s on 2 cores).
nvcc's answer is a pure function of (nvcc build, flags, rendered source), so this script
compiles them once, with the real nvcc and an empty cache, and writes every answer to
``dagster_project/sim/data/verification/nvcc_answers.csv`` (``compile_check``'s shipped
answers). A build whose nvcc is the same build (``nvcc --version``) and whose templates
render the same sources then reads those answers instead of compiling; anything else
compiles as before. Run it again after a generator change that alters the sample's
sources (the build's ``answers`` metadata shows how many cases had to be compiled)::

    .venv/bin/python benchmarks/device/ship_nvcc_answers.py [--jobs 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
from pathlib import Path

from dagster_project.settings import DEFAULT_SIM_SEED
from dagster_project.sim import GENERATOR_VERSION
from dagster_project.sim.compile_check import (
    SHIPPED_ANSWERS,
    compile_sample,
    nvcc_path,
    summarize,
    toolchain_id,
    write_shipped_answers,
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=48, help="the build's default sample size")
    ap.add_argument("--seed", type=int, default=DEFAULT_SIM_SEED, help="the build's sim seed")
    ap.add_argument("--jobs", type=int, default=None, help="nvcc processes at once")
    ap.add_argument("--out", type=Path, default=SHIPPED_ANSWERS)
    args = ap.parse_args()
    nvcc = nvcc_path()
    if nvcc is None:
        print("nvcc not found: nothing to ship", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="kh-ship-nvcc-") as tmp:
        cache = Path(tmp) / "cache"
        records = compile_sample(
            args.sample, args.seed, Path(tmp) / "work", jobs=args.jobs, cache_dir=cache
        )
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        n = write_shipped_answers(cache, toolchain_id(nvcc), GENERATOR_VERSION, stamp, args.out)
    summary = summarize(records)
    print(
        f"{len(records)} cases ({summary.get('answers')}), agreement "
        f"{summary.get('agreement', 0.0):.3f}; {n} nvcc answers -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
