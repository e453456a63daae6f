"""The lake IO manager on DuckDB 2.x: writes, and — what the stock polars manager cannot
do on DuckDB 2.x — loads upstream inputs, whole and per partition."""


from pathlib import Path

import dagster as dg
import polars as pl

from dagster_project.lake import Lake
from dagster_project.resources import LakeIOManager, LakeResource

parts = dg.StaticPartitionsDefinition(["a", "b"])


@dg.asset(key_prefix=["raw"])
def numbers() -> pl.DataFrame:
    return pl.DataFrame({"n": [1, 2, 3]})


@dg.asset(key_prefix=["derived"])
def doubled(numbers: pl.DataFrame) -> pl.DataFrame:
    return numbers.with_columns(n2=pl.col("n") * 2)


@dg.asset(key_prefix=["raw"], partitions_def=parts, metadata={"partition_expr": "part"})
def by_part(context: dg.AssetExecutionContext) -> pl.DataFrame:
    k = context.partition_key
    return pl.DataFrame({"part": [k, k], "v": [1, 2] if k == "a" else [10, 20]})


@dg.asset(key_prefix=["derived"], partitions_def=parts, metadata={"partition_expr": "part"})
def part_sum(by_part: pl.DataFrame) -> pl.DataFrame:
    return by_part.group_by("part").agg(pl.col("v").sum())


def _res(home: Path) -> dict:
    return {"io_manager": LakeIOManager(home=str(home)), "lake": LakeResource(home=str(home))}


def test_loads_upstream_input(tmp_path: Path) -> None:
    res = dg.materialize([numbers, doubled], resources=_res(tmp_path))
    assert res.success
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    assert lake.read_table("derived", "doubled").sort("n")["n2"].to_list() == [2, 4, 6]
    # Re-running replaces, never duplicates.
    assert dg.materialize([numbers, doubled], resources=_res(tmp_path)).success
    assert lake.read_table("derived", "doubled").height == 3


def test_partitioned_inputs_and_rewrites(tmp_path: Path) -> None:
    for key in ("a", "b", "a"):
        assert dg.materialize([by_part, part_sum], partition_key=key, resources=_res(tmp_path)).success
    lake = Lake(tmp_path / "lake.duckdb", str(tmp_path / "lake"))
    assert lake.read_table("raw", "by_part").height == 4
    sums = dict(lake.read_table("derived", "part_sum").iter_rows())
    assert sums == {"a": 3, "b": 30}
