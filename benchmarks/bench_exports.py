"""The simulated exports' batch-file writers, before and after issue 24, on one lake.

Usage::

    python benchmarks/bench_exports.py --home /tmp/kh/h24/base/home [--rounds 2] [--before 80fcd38]

``before`` is ``publish/simulated.py`` at a git revision (default 80fcd38: per-row Python,
``to_pylist`` then ``json.loads`` of the JSON-text columns and ``json.dumps`` per row);
``after`` is the current writer (Arrow record batches from DuckDB into polars'
``write_ndjson``). Both write every batch file of kernelswarm and kernelinfer from the same
read-only lake in this process, alternating; only the batch writing is timed (the rest of
an export is the same). Prints the minimum of each and the ratio before/after.
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dagster_project.publish import simulated as after  # noqa: E402
from dagster_project.storage.lake import Lake  # noqa: E402


def _module_at(rev: str):  # noqa: ANN202 - a module object
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:dagster_project/publish/simulated.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    spec = importlib.util.spec_from_loader("dagster_project.publish._simulated_before", loader=None)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "dagster_project.publish"
    sys.modules[spec.name] = mod
    exec(compile(src, f"{rev}:publish/simulated.py", "exec"), mod.__dict__)  # noqa: S102 - our own file
    return mod


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--home", type=Path, required=True, help="a KERNELHOUSE_HOME with a built lake")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--before", default="80fcd38", help="git revision of the 'before' writer")
    args = ap.parse_args()
    before = _module_at(args.before)
    lake = Lake(args.home / "lake.duckdb", str(args.home / "lake"))
    times: dict[tuple[str, str], list[float]] = {}
    for name in ("kernelswarm", "kernelinfer"):
        for rnd in range(args.rounds):
            for label, mod in (("before", before), ("after", after)):
                layout = getattr(mod, name.upper())
                out = Path(tempfile.mkdtemp(prefix=f"bench-exports-{name}-{label}-"))
                try:
                    with lake.connect(read_only=True) as con:
                        t = time.perf_counter()
                        res = mod._write_batches(con, layout, out)
                        dt = time.perf_counter() - t
                    written = res[0] if isinstance(res, tuple) else res
                    size = sum(p.stat().st_size for p in (out / "batches").iterdir())
                finally:
                    shutil.rmtree(out, ignore_errors=True)
                times.setdefault((name, label), []).append(dt)
                print(
                    f"{name:12s} {label:6s} round {rnd}: {dt:7.1f} s  "
                    f"{sum(written.values())} rows  "
                    f"{size / 1e9:.3f} GB",
                    flush=True,
                )
    for name in ("kernelswarm", "kernelinfer"):
        b, a = min(times[(name, "before")]), min(times[(name, "after")])
        print(f"{name}: before {b:.1f} s, after {a:.1f} s, before/after = {b / a:.2f}x")
    print(
        f"peak RSS of this process {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
