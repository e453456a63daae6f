"""``kernelhouse gpu``: plan GPU measurement batches, ingest their results, show progress.

The GPU machine has neither the lake nor this CLI's dependencies, so a measurement round
trip is three steps (``benchmarks/device/gpu_measure_configs.sh`` is the middle one)::

    kernelhouse gpu plan --rows 36                 # -> .gpu/batch-001.jsonl (git-ignored)
    bash benchmarks/device/gpu_measure_configs.sh .gpu/batch-001.jsonl "$OUT"   # on the GPU
    kernelhouse gpu ingest .../out-001.jsonl       # -> raw/datasets.measured_configs

Registered in ``cli/app.py`` as ``app.add_typer(gpu_app, name="gpu")``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from dagster_project.gpus import MEASURED_GPU
from dagster_project.settings import load_settings
from dagster_project.terminal import escape

gpu_app = typer.Typer(
    no_args_is_help=True, help="Execution reward on a GPU: plan batches, ingest results, status."
)
console = Console(stderr=True)
out = Console()


def _fail(message: str, code: int = 1) -> NoReturn:
    # Messages quote paths and file contents: shown as text, not rich markup (issue 22).
    console.print(f"[bold red]error:[/] {escape(message)}")
    raise typer.Exit(code)


def _lake():  # noqa: ANN202 - Lake imported lazily with the rest of the CLI
    from dagster_project.storage.lake import Lake

    settings = load_settings()
    if not settings.lake_path.exists():
        _fail(f"no lake at {settings.lake_path}; run `kernelhouse build` first")
    return settings, Lake(settings.lake_path, settings.parquet_root)


def _fmt(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}"
    return escape(str(v))  # lake values: shown, never read as markup or terminal escapes


@gpu_app.command("plan")
def plan(
    rows: Annotated[int, typer.Option("--rows", "-n", help="Rows in the batch.")] = 36,
    m_per_file: Annotated[int, typer.Option(help="Batch sizes (M) taken per config file.")] = 3,
    gpu: Annotated[str, typer.Option(help="GPU whose rows are measured.")] = MEASURED_GPU,
    output: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Batch file (default: the next .gpu/batch-NNN.jsonl; a .xz name is compressed).",
        ),
    ] = None,
    order: Annotated[
        str,
        typer.Option(
            help="'reuse': strata of (kernel, quant, repo, M bucket), rows sharing compiled "
            "kernels first; 'files': whole config files, --m-per-file each."
        ),
    ] = "reuse",
) -> None:
    """Write the next batch of unmeasured rows (stratified over kernel, quantisation, repo
    and M bucket)."""
    from dagster_project.rewards.measured import next_batch_path, plan_batch, write_batch

    if order not in ("reuse", "files"):
        _fail(f"--order must be 'reuse' or 'files', not {order!r}")
    _, lake = _lake()
    try:
        batch, skipped = plan_batch(lake, rows, gpu=gpu, m_per_file=m_per_file, order=order)
    except Exception as exc:  # noqa: BLE001 - e.g. tuned_configs not built yet
        _fail(f"planning failed: {str(exc).splitlines()[0]}")
        return
    if not batch:
        _fail(f"nothing left to measure for {gpu!r}")
    path = output or next_batch_path(Path(".gpu"))
    write_batch(batch, path)
    table = Table(title=f"{len(batch)} rows -> {escape(str(path))}")
    for c in ("id", "kernel", "repo", "quant", "GEMMs", "M", "E", "N", "K", "top_k", "model"):
        table.add_column(c, overflow="fold")
    for r in batch:
        table.add_row(
            escape(r.id[:10]),
            escape(r.kernel),
            escape(r.repo),
            escape(str(r.quant)),
            escape(str(r.moe_gemms)),
            str(r.M),
            _fmt(r.E),
            str(r.N),
            str(r.K),
            _fmt(r.routed_top_k or None),
            _fmt(r.model),
        )
    out.print(table)
    if skipped:
        console.print(
            "[dim]not measurable: "
            + "; ".join(f"{escape(str(k))} ({v})" for k, v in sorted(skipped.items()))
            + "[/]"
        )
    console.print(
        f"on the GPU machine: bash benchmarks/device/gpu_measure_configs.sh {escape(str(path))} "
        "$OUT/out.jsonl   then: kernelhouse gpu ingest <that file>"
    )


@gpu_app.command("pack")
def pack(
    paths: Annotated[
        list[Path], typer.Argument(help="Result JSONL files (.gz too) of one device batch.")
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Shipped batch, e.g. dagster_project/data/measured/h200/batch-005.parquet.",
        ),
    ],
    batch: Annotated[
        list[Path] | None,
        typer.Option(help="Batch file(s) the results came from: complete older result lines."),
    ] = None,
    driver: Annotated[
        str | None,
        typer.Option(help="Driver version of the device call, where the results lack it."),
    ] = None,
) -> None:
    """Write device results as a shipped Parquet batch (committed with the package and
    ingested by every `kernelhouse build`)."""
    from dagster_project.rewards.measured import pack_batch

    missing = [str(p) for p in [*paths, *(batch or [])] if not p.is_file()]
    if missing:
        _fail("no such file: " + ", ".join(missing))
    if out.suffix != ".parquet":
        _fail(f"--out must end in .parquet, not {out.name}")
    n = pack_batch(paths, out, batches=batch or [], env={"driver": driver} if driver else None)
    console.print(f"packed {n} results -> {escape(str(out))}")


@gpu_app.command("ingest")
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Result JSONL files written by run_batch.")],
    export: Annotated[bool, typer.Option(help="Also write exports/measured_configs/.")] = True,
) -> None:
    """Upsert device results into raw.measured_configs and rebuild datasets.measured_configs."""
    from dagster_project.rewards.measured import export_measured, ingest_results

    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        _fail("no such result file: " + ", ".join(missing))
    settings, lake = _lake()
    rep = ingest_results(lake, paths)
    console.print(
        f"ingested {rep.lines} result lines for {rep.rows} rows "
        f"({rep.candidates} candidates stored); datasets.measured_configs has "
        f"{rep.dataset_rows} rows"
    )
    if export:
        path = export_measured(lake, settings.exports_dir / "measured_configs")
        console.print(f"exported {escape(str(path))}")
    _print_status(lake, MEASURED_GPU)


def _print_status(lake, gpu: str) -> None:  # noqa: ANN001 - Lake, imported lazily
    from dagster_project.rewards.measured import status_frame

    df = status_frame(lake, gpu)
    if df.is_empty():
        console.print("nothing measured yet")
        return
    table = Table(title=f"measured configs — {escape(gpu)}")
    for c in df.columns:
        table.add_column(c, overflow="fold")
    for r in df.iter_rows():
        table.add_row(*[_fmt(v) for v in r])
    out.print(table)


@gpu_app.command("status")
def status(
    gpu: Annotated[str, typer.Option(help="GPU whose rows are reported.")] = MEASURED_GPU,
) -> None:
    """Rows measured per kernel/quantisation/repo, measured speedups, what is left."""
    from dagster_project.rewards.measured import measurable_rows, measured_row_ids

    _, lake = _lake()
    _print_status(lake, gpu)
    try:
        rows, skipped = measurable_rows(lake, gpu)
    except Exception as exc:  # noqa: BLE001
        _fail(f"cannot list rows: {str(exc).splitlines()[0]}")
        return
    done = measured_row_ids(lake, gpu)
    left = sum(r.id not in done for r in rows)
    console.print(
        f"{escape(gpu)}: {len(rows)} measurable rows, {len(rows) - left} measured, "
        f"{left} left; not measurable: {sum(skipped.values())}"
    )
