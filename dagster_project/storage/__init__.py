"""Storage: the DuckDB lake (tables, Parquet partitions, views, the read-only SQL door),
the kernelhouse home's crash hygiene and the content fingerprints reported as data
versions. No dagster import."""
