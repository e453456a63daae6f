"""Writing a large text table into the lake: DuckDB's automatic string compression vs
the lake's settings (FSST off in ``Lake._configure``; one thread for the copy in
``Lake.replace_table``).

Reads one table of an existing lake (default ``datasets.tuned_configs``, the largest
text table: prompts that embed kernel sources), then writes it into fresh DuckDB files
with each setting, alternating, each write in a fresh process so its peak memory is its
own. Prints write seconds, the process's peak RSS, file size, a full-scan time and whether
the rows hash the same as the source. Ratios, not absolute seconds, are the result
(machines are noisy)::

    .venv/bin/python benchmarks/bench_lake_write.py --lake <home>/lake.duckdb [--rounds 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

FSST_OFF = "SET disabled_compression_methods = 'dict_fsst,fsst'"
SETTINGS = {
    "automatic (DuckDB default)": (),
    "FSST off": (FSST_OFF,),
    "lake (FSST off, 1 thread)": (FSST_OFF, "SET threads = 1"),
}
ROW_HASH = "SELECT count(*), sum(hash(t)::HUGEINT) FROM {} AS t"


@dataclass(frozen=True)
class Written:
    """One write's figures (seconds, MB; ``digest`` is ``ROW_HASH`` of the new table)."""

    wrote: float
    scanned: float
    digest: object
    peak_mb: float
    write_mb: float
    size_mb: float
    rows: int
    in_memory_mb: float


def _write(lake: str, table: str, settings: tuple[str, ...], path: str) -> Written:
    """In a fresh process: read ``table``, write it to ``path`` with ``settings``."""
    src = duckdb.connect(lake, read_only=True)
    src.execute("SET enable_progress_bar = false")
    arrow = src.sql(f"SELECT * FROM {table}").to_arrow_table()
    src.close()
    read_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    con = duckdb.connect(path)
    con.execute("SET enable_progress_bar = false")
    for setting in settings:
        con.execute(setting)
    con.register("_incoming", arrow)
    t0 = time.perf_counter()
    con.execute("BEGIN TRANSACTION")
    con.execute("CREATE TABLE x AS SELECT * FROM _incoming")
    con.execute("COMMIT")
    con.execute("CHECKPOINT")
    wrote = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    con.close()
    con = duckdb.connect(path, read_only=True)
    t0 = time.perf_counter()
    digest = con.execute(ROW_HASH.format("x")).fetchall()
    scanned = time.perf_counter() - t0
    con.close()
    return Written(
        wrote=wrote,
        scanned=scanned,
        digest=digest,
        peak_mb=peak / 1024,
        write_mb=(peak - read_peak) / 1024,
        size_mb=Path(path).stat().st_size / 1e6,
        rows=arrow.num_rows,
        in_memory_mb=arrow.nbytes / 1e6,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lake", type=Path, required=True)
    ap.add_argument("--table", default="datasets.tuned_configs")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    src = duckdb.connect(str(args.lake), read_only=True)
    want = src.execute(ROW_HASH.format(args.table)).fetchall()
    src.close()
    best: dict[str, float] = {}
    ctx = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory(prefix="kh-bench-lake-") as tmp,
        ctx.Pool(1, maxtasksperchild=1) as pool,
    ):
        for r in range(args.rounds):
            for i, (name, settings) in enumerate(SETTINGS.items()):
                path = str(Path(tmp) / f"{r}-{i}.duckdb")
                res = pool.apply(_write, (str(args.lake), args.table, settings, path))
                if not best:
                    print(f"{args.table}: {res.rows} rows, {res.in_memory_mb:.1f} MB")
                best[name] = min(best.get(name, res.wrote), res.wrote)
                print(
                    f"round {r}  {name:27s} write {res.wrote:6.2f} s  "
                    f"peak {res.peak_mb:6.0f} MB (+{res.write_mb:4.0f} writing)  "
                    f"{res.size_mb:6.1f} MB  scan {res.scanned:5.2f} s  "
                    f"same rows: {res.digest == want}"
                )
                Path(path).unlink()
    auto = best["automatic (DuckDB default)"]
    for name, s in best.items():
        print(f"write {name}: {s:.2f} s, automatic / this = {auto / s:.2f}x")


if __name__ == "__main__":
    main()
