"""Writing a large text table into the lake: DuckDB's automatic string compression vs
the lake's setting (FSST off, ``storage/lake.Lake._configure``).

Reads one table of an existing lake (default ``datasets.tuned_configs``, the largest
text table: prompts that embed kernel sources), then writes it into fresh DuckDB files
with each setting, alternating, and prints write seconds, file size, a full-scan time and
whether the rows hash the same as the source. Ratios, not absolute seconds, are the
result (machines are noisy)::

    .venv/bin/python benchmarks/bench_lake_write.py --lake <home>/lake.duckdb [--rounds 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import duckdb

SETTINGS = {
    "automatic (DuckDB default)": "",
    "lake (FSST off)": "SET disabled_compression_methods = 'dict_fsst,fsst'",
}
ROW_HASH = "SELECT count(*), sum(hash(t)::HUGEINT) FROM {} AS t"


def _write(arrow: object, setting: str, path: Path) -> tuple[float, float, object]:
    con = duckdb.connect(str(path))
    if setting:
        con.execute(setting)
    con.register("_incoming", arrow)
    t0 = time.perf_counter()
    con.execute("CREATE TABLE x AS SELECT * FROM _incoming")
    con.execute("CHECKPOINT")
    wrote = time.perf_counter() - t0
    con.close()
    con = duckdb.connect(str(path), read_only=True)
    t0 = time.perf_counter()
    digest = con.execute(ROW_HASH.format("x")).fetchall()
    scanned = time.perf_counter() - t0
    con.close()
    return wrote, scanned, digest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lake", type=Path, required=True)
    ap.add_argument("--table", default="datasets.tuned_configs")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    src = duckdb.connect(str(args.lake), read_only=True)
    arrow = src.sql(f"SELECT * FROM {args.table}").to_arrow_table()
    want = src.execute(ROW_HASH.format(args.table)).fetchall()
    src.close()
    print(f"{args.table}: {arrow.num_rows} rows, {arrow.nbytes / 1e6:.1f} MB in memory")
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="kh-bench-lake-") as tmp:
        for r in range(args.rounds):
            for name, setting in SETTINGS.items():
                path = Path(tmp) / f"{r}-{len(best)}-{name[:4]}.duckdb"
                wrote, scanned, digest = _write(arrow, setting, path)
                size = path.stat().st_size / 1e6
                best[name] = min(best.get(name, wrote), wrote)
                print(
                    f"round {r}  {name:28s} write {wrote:6.2f} s  {size:7.1f} MB  "
                    f"scan {scanned:5.2f} s  same rows: {digest == want}"
                )
                path.unlink()
    auto, lake = best.values()
    print(
        f"write: automatic {auto:.2f} s, lake {lake:.2f} s, automatic / lake = {auto / lake:.2f}x"
    )


if __name__ == "__main__":
    main()
