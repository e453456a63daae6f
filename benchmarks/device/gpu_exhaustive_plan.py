"""Plan issue 38's exhaustive and skewed-routing device batches, without a GPU or a lake.

    python benchmarks/device/gpu_exhaustive_plan.py exhaustive --gpu h200 --rows 100
    python benchmarks/device/gpu_exhaustive_plan.py exhaustive --gpu h100 --rows 100
    python benchmarks/device/gpu_exhaustive_plan.py skew --gpu h200 --rows 120

Rows come from the batch files under ``.gpu/`` (``--from``; they carry the kernel sources)
and, for the H200, from the shipped tables (``measured.shipped_rows``: the rows already
measured there, their sources found by hash in those batch files).

``exhaustive``: ``--rows`` rows of the GPU, stratified over kernel family, shape and M
(``space.select_exhaustive``, ``--seed``), each with the upstream tuner's whole space
pruned only by configs that cannot launch (``space.exhaustive_space``), in the plan
format ``run_batch`` reads, split into parts of about ``--part-s`` device seconds
(``.gpu/exhaustive-<gpu>-pNN.jsonl.xz``): one device call finishes a part or is resumed
on it (``benchmarks/device/gpu_exhaustive.sh``). Prints rows, candidates, estimated
compiles and device minutes per part.

``remeasure``: ``--rows`` rows drawn uniformly at random (``random.Random(--seed)``) from the
GPU's shipped tables, each with its usual candidate table, written to
``remeasure-<gpu>-s<seed>.jsonl.xz``: the acceptance's second device session, compared with
the first by ``benchmarks/gpu_remeasure_report.py``.

``pending PLAN``: the lines of an already-planned batch whose rows the shipped tables of
``--gpu`` do not yet hold in full (no result, or fewer (row, label) results than the row
has candidates), written to ``<plan>-pending.jsonl.xz``. A call that ran out of budget is
resumed from what the package ships, so the raw results file of the call (an ignored
``.gpu/results/`` copy) is not needed once it is packed::

    python benchmarks/device/gpu_exhaustive_plan.py pending .gpu/h100-a.jsonl.xz --gpu h100

``skew``: ``--rows`` fused-MoE rows of the GPU (the same stratification, MoE families
only), written twice: ``skew-<gpu>-uniform.jsonl.xz`` (uniform routing, re-timed in the
same call) and ``skew-<gpu>-zipf.jsonl.xz`` (``routing.SKEWED``); each row's candidates
are its usual table (tuned, default, one-step neighbours), so the two tables compare
config by config.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dagster_project.rewards.gpu import space as sp  # noqa: E402
from dagster_project.rewards.gpu.neighbours import candidates  # noqa: E402
from dagster_project.rewards.gpu.routing import SKEWED  # noqa: E402
from dagster_project.rewards.gpu.source import source_hash  # noqa: E402
from dagster_project.rewards.gpu.spec import MeasureRow  # noqa: E402

GPUS = {"h200": "NVIDIA H200", "h100": "NVIDIA H100"}


def batch_rows(paths: Sequence[Path]) -> list[MeasureRow]:
    """Rows of planned batch files (``.jsonl`` or ``.jsonl.xz``)."""
    out = []
    for p in paths:
        raw = p.read_bytes()
        text = lzma.decompress(raw).decode() if p.suffix == ".xz" else raw.decode()
        out += [MeasureRow.from_json(json.loads(line)) for line in text.splitlines() if line]
    return out


def pool(gpu: str, paths: Sequence[Path]) -> list[MeasureRow]:
    """Every measurable row of ``gpu``, one per id, of a family with a tuner space: for the
    H200 the shipped tables' rows (``measured.shipped_rows``; a superseded one too: its
    plan line re-times every label of its old table), for another GPU the rows of the
    batch files."""
    from_files = batch_rows(paths)
    rows: dict[str, MeasureRow] = {}
    if gpu == GPUS["h200"]:
        from dagster_project.rewards.measured import shipped_rows

        sources = {source_hash(r.kernel_source): r.kernel_source for r in from_files}
        rows.update((r.id, r) for r in shipped_rows(sources) if r.gpu == gpu)
    else:
        rows.update((r.id, r) for r in from_files if r.gpu == gpu)
    known = sp.SPACES
    return [r for r in rows.values() if not r.problem_error() and (r.repo, str(r.kind)) in known]


def write_xz(path: Path, lines: Sequence[dict]) -> None:
    text = "".join(json.dumps(d) + "\n" for d in lines)
    path.write_bytes(lzma.compress(text.encode(), preset=6))


def coverage(rows: Sequence[MeasureRow]) -> str:
    fams = Counter(sp.family(r) for r in rows)
    lines = []
    for fam, n in sorted(fams.items()):
        of = [r for r in rows if sp.family(r) == fam]
        ms = sorted({r.M for r in of})
        shapes = len({sp.shape_of(r) for r in of})
        lines.append(f"  {'/'.join(fam):<46} rows {n:>3}  shapes {shapes:>3}  M {ms}")
    return "\n".join(lines)


def plan_exhaustive(args: argparse.Namespace) -> None:
    gpu = GPUS[args.gpu]
    rows = sp.select_exhaustive(pool(gpu, args.source), args.rows, args.seed)
    items = [(r, sp.exhaustive_space(r)) for r in sp.plan_order(rows)]
    parts = sp.split_parts(items, args.part_s)
    print(f"{gpu}: {len(rows)} rows (seed {args.seed}, space rules {sp.SPACE_RULES})")
    print(coverage(rows))
    total = sp.estimate(items)
    pruned = sum(s.pruned for _, s in items)
    aliases = sum(s.aliases for _, s in items)
    print(
        f"candidates {total.candidates} ({total.candidates / max(1, len(items)):.0f} per row; "
        f"tuner configs left out: {aliases} launched like another, {pruned} cannot launch); "
        f"compiled variants ~{total.variants}; device ~{total.device_s / 60:.1f} min "
        f"(timing {total.candidates / sp.CANDIDATES_PER_S / 60:.1f}, "
        f"compiling {total.variants / sp.COMPILES_PER_S / 60:.1f})"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    for n, part in enumerate(parts, 1):
        path = args.out / f"exhaustive-{args.gpu}-p{n:02d}.jsonl.xz"
        write_xz(path, [sp.exhaustive_line(r, s) for r, s in part])
        est = sp.estimate(part)
        print(
            f"  {path.name}: rows {est.rows:>3}  candidates {est.candidates:>6}  "
            f"variants ~{est.variants:>5}  ~{est.device_s / 60:.1f} device-min"
        )


def plan_skew(args: argparse.Namespace) -> None:
    gpu = GPUS[args.gpu]
    moe = [r for r in pool(gpu, args.source) if r.kind == "moe"]
    rows = sp.plan_order(sp.select_exhaustive(moe, args.rows, args.seed))
    args.out.mkdir(parents=True, exist_ok=True)
    n_cands = sum(len(candidates(r.best_config, r.default_config)) for r in rows)
    for name, routing in (("uniform", "uniform"), ("zipf", SKEWED)):
        path = args.out / f"skew-{args.gpu}-{name}.jsonl.xz"
        write_xz(path, [{**r.to_json(), "routing": routing} for r in rows])
        print(f"  {path.name}: {len(rows)} rows, routing {routing}, {n_cands} candidates")
    print(coverage(rows))
    print(f"device ~{2 * n_cands / sp.CANDIDATES_PER_S / 60:.1f} min for both (timing rate)")


def plan_remeasure(args: argparse.Namespace) -> None:
    """Uniformly random rows (not stratified: the check is of the tables as shipped), in id
    order before the draw so the seed alone fixes the sample."""
    import random

    gpu = GPUS[args.gpu]
    from dagster_project.rewards.measured import shipped_rows

    sources = {source_hash(r.kernel_source): r.kernel_source for r in batch_rows(args.source)}
    shipped = sorted((r for r in shipped_rows(sources) if r.gpu == gpu), key=lambda r: r.id)
    if not shipped:
        print(f"{gpu}: no shipped rows to re-measure")
        return
    rows = sp.plan_order(random.Random(args.seed).sample(shipped, min(args.rows, len(shipped))))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"remeasure-{args.gpu}-s{args.seed}.jsonl.xz"
    write_xz(path, [r.to_json() for r in rows])
    n_cands = sum(len(candidates(r.best_config, r.default_config)) for r in rows)
    print(f"  {path.name}: {len(rows)} of {len(shipped)} shipped rows, {n_cands} candidates")
    print(coverage(rows))
    print(f"device ~{n_cands / sp.CANDIDATES_PER_S / 60:.1f} min (timing rate)")


def plan_pending(args: argparse.Namespace) -> None:
    """The plan's lines not yet shipped in full for the GPU (the resume of a cut call)."""
    from dagster_project.rewards.gpu.run_batch import read_batch
    from dagster_project.rewards.measured import merge_results, read_shipped, shipped_batches

    gpu = GPUS[args.gpu]
    shipped = merge_results(read_shipped(shipped_batches(args.shipped)))
    got: dict[tuple[str, str], int] = {}
    if shipped.height:
        on = shipped.filter(pl.col("measured_on") == gpu)
        for rid, routing, n in on.group_by(["row_id", "routing"]).agg(pl.len()).iter_rows():
            got[(rid, routing)] = n
    raw = args.plan.read_bytes()
    text = lzma.decompress(raw).decode() if args.plan.suffix == ".xz" else raw.decode()
    lines = [line for line in text.splitlines() if line.strip()]
    items = read_batch(args.plan)  # one item per non-blank line, in order
    keep = [
        line
        for line, it in zip(lines, items, strict=True)
        if got.get((it.row.id, it.row.routing or "uniform"), 0) < len(it.cands)
    ]
    name = args.plan.name.removesuffix(".xz").removesuffix(".jsonl")
    path = args.out / f"{name}-pending.jsonl.xz"
    args.out.mkdir(parents=True, exist_ok=True)
    write_xz(path, [json.loads(line) for line in keep])
    print(f"  {path.name}: {len(keep)} of {len(items)} rows not yet shipped in full on {gpu}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("exhaustive", "skew", "remeasure", "pending"))
    ap.add_argument("plan", type=Path, nargs="?", help="pending: the planned batch file")
    ap.add_argument(
        "--shipped", type=Path, default=None, help="pending: shipped tables (default: the package)"
    )
    ap.add_argument("--gpu", choices=sorted(GPUS), required=True)
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--part-s", type=float, default=270.0, help="device seconds per part")
    ap.add_argument(
        "--from",
        dest="source",
        type=Path,
        nargs="*",
        default=None,
        help="planned batch files with kernel sources (default: .gpu/*.jsonl.xz)",
    )
    ap.add_argument("--out", type=Path, default=Path(".gpu"))
    args = ap.parse_args(argv)
    if args.mode == "pending":
        if args.plan is None:
            ap.error("pending needs the planned batch file")
        plan_pending(args)
        return 0
    if args.source is None:
        args.source = sorted(p for p in Path(".gpu").glob("*.jsonl.xz") if _is_source(p))
    if not args.source:
        print("no batch files with kernel sources (plan one: kernelhouse gpu plan)")
        return 2
    modes = {"exhaustive": plan_exhaustive, "skew": plan_skew, "remeasure": plan_remeasure}
    modes[args.mode](args)
    return 0


def _is_source(path: Path) -> bool:
    """A planned batch of rows, not one of this script's own plans."""
    return not path.name.startswith(("exhaustive-", "skew-", "remeasure-"))


if __name__ == "__main__":
    sys.exit(main())
