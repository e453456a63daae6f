"""Measure one batch of rows on a GPU, resumably:

    python -m dagster_project.rewards.gpu.run_batch IN.jsonl OUT.jsonl [--budget-s S]

``IN.jsonl`` holds one row per line (``MeasureRow`` fields, ``kernel_source``
included; optionally ``candidates``: ``[{"label", "config"}]``; else tuned, default and
the tuned config's neighbours are measured). Every (row, candidate) result is appended
to ``OUT.jsonl`` as soon as it exists, so a killed batch keeps what it measured, and a
rerun with the same files skips everything already in ``OUT.jsonl``.

Before a candidate runs its name goes to ``OUT.jsonl.attempts``. A candidate attempted
twice without a result (it crashed the process twice) is recorded as
``launch_failed`` instead of being retried forever. When a launch leaves the CUDA context
unusable the runner writes that candidate's failure and exits with
``EXIT_CONTEXT_LOST`` (75): run it in a loop (``benchmarks/device/gpu_measure_configs.sh``)
and the next process carries on from there.

With ``--workers`` > 0 every distinct kernel variant of the batch is first compiled in
parallel worker processes into Triton's on-disk cache (compiling one variant takes
seconds and a batch has hundreds); the timing pass then loads them. The whole run stops
starting new candidates at ``--budget-s``.

Only numpy, torch and triton are needed (no polars, duckdb or dagster): this module runs
on the GPU machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from .neighbours import Candidate, candidates
from .spec import HARNESS_VERSION, LAUNCH_FAILED, Measurement, MeasureRow, failed

EXIT_OK = 0
EXIT_CONTEXT_LOST = 75  # EX_TEMPFAIL: restart me
EXIT_USAGE = 2


class Measure(Protocol):
    def __call__(
        self,
        row: MeasureRow,
        cands: Sequence[Candidate],
        *,
        on_result: Callable[[Measurement], None] | None = ...,
        on_attempt: Callable[[Candidate], None] | None = ...,
        deadline: float | None = ...,
        indices: Sequence[int] | None = ...,
    ) -> list[Measurement]: ...


@dataclass
class BatchItem:
    row: MeasureRow
    cands: list[Candidate]


def read_batch(path: Path) -> list[BatchItem]:
    """The rows of a batch file and each row's candidates (explicit or generated).

    A row id appears once per batch: results are keyed by (row id, label), so the same
    row under another routing (``MeasureRow.routing``) is planned as a batch of its own
    (with its own results file)."""
    items: list[BatchItem] = []
    seen: set[str] = set()
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            row = MeasureRow.from_json(d)
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{path}:{n}: not a batch row: {exc}") from exc
        if row.id in seen:
            raise ValueError(
                f"{path}:{n}: row {row.id} is already in this batch (another routing "
                "is a batch of its own)"
            )
        seen.add(row.id)
        if d.get("candidates"):
            cands = [Candidate(str(c["label"]), dict(c["config"])) for c in d["candidates"]]
        else:
            cands = candidates(row.best_config, row.default_config)
        items.append(BatchItem(row, cands))
    return items


def read_text(path: Path) -> str:
    """A batch file's text; ``.xz`` / ``.gz`` files are decompressed (a batch embeds each
    row's kernel source, so hundreds of rows are tens of MB raw but compress ~50x with
    xz, whose window spans the repeated sources)."""
    if path.suffix == ".xz":
        import lzma

        return lzma.decompress(path.read_bytes()).decode()
    if path.suffix == ".gz":
        import gzip

        return gzip.decompress(path.read_bytes()).decode()
    return path.read_text()


def read_results(path: Path) -> list[dict[str, Any]]:
    """Result lines of ``OUT.jsonl`` (a torn last line from a kill is skipped)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _attempts_path(out_path: Path) -> Path:
    return out_path.with_name(out_path.name + ".attempts")


def _append(path: Path, obj: dict[str, Any]) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps(obj, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


#: Planner fields of ``MeasureRow.extra`` stamped on each result: the row's dataset split
#: and documented speedup, and the exhaustive search space (name, size) of its plan line.
ROW_EXTRA_STAMPS = ("split", "documented_speedup_vs_default", "exhaustive_space", "space_size")


def row_meta(row: MeasureRow) -> dict[str, Any]:
    """The shape a row was measured at, stored with each result (MoE rows get their K,
    top-k and GEMMs from the planner, not from the lake row)."""
    from .source import source_hash

    return {
        "kernel": row.kernel,
        "repo": row.repo,
        "quant": row.quant,
        "M": row.M,
        "N": row.N,
        "K": row.K,
        "E": row.E,
        "top_k": row.top_k,
        "n_shared": row.n_shared,
        "moe_gemms": row.moe_gemms,
        "model": row.model,
        # what a shipped batch needs to stand alone (no tuned_configs join)
        "dtype": row.dtype,
        "gpu": row.gpu,
        "config_path": row.config_path,
        "block_shape": list(row.block_shape) if row.block_shape else None,
        "best_config": row.best_config,
        "default_config": row.default_config,
        "kernel_source_sha": source_hash(row.kernel_source) if row.kernel_source else None,
        # issue 38: the inputs' token-to-expert distribution, and for a row of an
        # exhaustive plan (``space.exhaustive_lines``) the search space it enumerates
        "routing": row.routing,
        **{k: row.extra[k] for k in ROW_EXTRA_STAMPS if k in row.extra},
    }


@dataclass
class BatchReport:
    measured: int = 0
    skipped_done: int = 0
    crashed: int = 0
    rows_started: int = 0
    stopped_by_budget: bool = False
    context_lost: bool = False
    precompile: dict[str, Any] = field(default_factory=dict)


def run_batch(
    in_path: Path,
    out_path: Path,
    *,
    budget_s: float | None = None,
    measure: Measure | None = None,
    env: dict[str, Any] | None = None,
    workers: int = 0,
    timing: str = "fast",
) -> BatchReport:
    """Measure every (row, candidate) of ``in_path`` not yet in ``out_path``.

    ``workers`` > 0 compiles the batch's kernel variants in that many processes while
    it is timed (``Precompiler``); ``timing`` names the ``TIMING_PRESETS`` entry used
    by the default device measurement (stored with every result)."""
    started = time.monotonic()
    deadline = started + budget_s if budget_s else None
    items = read_batch(in_path)
    done: set[tuple[Any, Any]] = {(r.get("row_id"), r.get("label")) for r in read_results(out_path)}
    report = BatchReport()
    attempts_path = _attempts_path(out_path)
    pending = _unfinished_attempts(attempts_path, done)
    if measure is None:
        measure, env = _device_measure(timing, env)
    env = env or {}

    meta = {item.row.id: row_meta(item.row) for item in items}

    def write(m: Measurement) -> None:
        _append(
            out_path,
            {
                **m.to_json(),
                "harness_version": HARNESS_VERSION,
                "measured_at": datetime.now(UTC).isoformat(),
                "env": env,
                "row": meta.get(m.row_id, {}),
            },
        )
        done.add((m.row_id, m.label))
        report.measured += 1

    _record_crashed(items, pending, write, report)
    todo = _still_to_measure(items, done, report)
    pre = Precompiler(todo, workers) if workers > 0 and todo else None
    try:
        _time_rows(todo, measure, write, attempts_path, deadline, report, pre)
    finally:
        if pre is not None:
            report.precompile = pre.close()
    if deadline is not None and time.monotonic() > deadline:
        report.stopped_by_budget = True
    return report


def _unfinished_attempts(
    attempts_path: Path, done: set[tuple[Any, Any]]
) -> Counter[tuple[Any, Any]]:
    """How often each (row id, label) without a result was attempted: the attempts file
    names a candidate before it runs, so one that crashed the process is counted."""
    pending: Counter[tuple[Any, Any]] = Counter()
    for a in read_results(attempts_path):
        key = (a.get("row_id"), a.get("label"))
        if key not in done:
            pending[key] += 1
    return pending


def _device_measure(timing: str, env: dict[str, Any] | None) -> tuple[Measure, dict[str, Any]]:
    """The default measurement (``measure_candidates`` with the ``timing`` preset) and the
    environment stored with each result (the device's, the preset, then ``env``)."""
    import functools

    from .device import TIMING_PRESETS, environment, measure_candidates

    if timing not in TIMING_PRESETS:
        raise ValueError(f"timing preset {timing!r} is not one of {sorted(TIMING_PRESETS)}")
    measure = functools.partial(measure_candidates, settings=TIMING_PRESETS[timing])
    return measure, {**environment(), "timing": timing, **(env or {})}


def _record_crashed(
    items: Sequence[BatchItem],
    pending: Counter[tuple[Any, Any]],
    write: Callable[[Measurement], None],
    report: BatchReport,
) -> None:
    """Candidates that took the process down twice are recorded, not retried."""
    for item in items:
        for i, c in enumerate(item.cands):
            if pending.get((item.row.id, c.label), 0) >= 2:
                write(
                    failed(
                        item.row.id,
                        c.label,
                        c.config,
                        LAUNCH_FAILED,
                        "the process died twice while this config ran (crash or sticky CUDA error)",
                        i,
                    )
                )
                report.crashed += 1


def _still_to_measure(
    items: Sequence[BatchItem], done: set[tuple[Any, Any]], report: BatchReport
) -> list[tuple[BatchItem, list[int]]]:
    """Each row with the indices of its candidates that have no result yet (counting
    those that have one as skipped)."""
    todo: list[tuple[BatchItem, list[int]]] = []
    for item in items:
        left = [i for i, c in enumerate(item.cands) if (item.row.id, c.label) not in done]
        report.skipped_done += len(item.cands) - len(left)
        if left:
            todo.append((item, left))
    return todo


def _time_rows(
    todo: Sequence[tuple[BatchItem, list[int]]],
    measure: Measure,
    write: Callable[[Measurement], None],
    attempts_path: Path,
    deadline: float | None,
    report: BatchReport,
    pre: Precompiler | None,
) -> None:
    for n, (item, left) in enumerate(todo):
        if deadline is not None and time.monotonic() > deadline:
            report.stopped_by_budget = True
            break
        if pre is not None:
            pre.wait_row(n, deadline)
        report.rows_started += 1
        row = item.row

        index_of = {c.label: i for i, c in enumerate(item.cands)}

        def attempt(
            c: Candidate, row_id: str = row.id, index_of: dict[str, int] = index_of
        ) -> None:
            _append(
                attempts_path, {"row_id": row_id, "label": c.label, "index": index_of.get(c.label)}
            )

        try:
            measure(
                row,
                [item.cands[i] for i in left],
                on_result=write,
                on_attempt=attempt,
                deadline=deadline,
                indices=left,
            )
        except Exception as exc:
            if type(exc).__name__ == "CudaContextLost":
                report.context_lost = True
                print(
                    f"CUDA context lost on row {row.id}: {exc}; restart to resume", file=sys.stderr
                )
                return
            raise


class Precompiler:
    """Compiles a batch's distinct kernel variants in worker processes *while* the batch
    is timed, instead of before it (harness 1.0.0 compiled first, for at most 40 % of the
    budget, and the timing pass compiled whatever was left one by one).

    Why: a batch of a few hundred rows has thousands of variants at ~1.3 s of one core
    each, so compiling them all first leaves the GPU idle for minutes, and compiling in
    the timing process serialises them. Here every variant is one task, submitted in
    the order the rows are timed, and deduplicated across the whole batch (rows that
    share a kernel source and a config, with the same integer specialisation, share
    the compiled kernel: its first row's task compiles it, later rows wait on the same
    future). The timing pass waits only for the variants of the row it is about to time;
    the workers stay ahead of it. Workers run at a lower CPU priority so the timing
    process keeps its core. Triton's on-disk cache (shared by all processes of the
    machine) carries the compiled kernels from the workers to the timing process.
    """

    def __init__(self, todo: Sequence[tuple[BatchItem, Sequence[int]]], workers: int) -> None:
        import concurrent.futures as cf
        import multiprocessing as mp

        from .plan import plan_launches
        from .routing import row_routing
        from .source import KernelSourceError, signature_of, source_hash
        from .spec import ConfigError, normalise_config

        self._cf = cf
        self.started = time.monotonic()
        self.stats: dict[str, Any] = {
            "variants": 0,
            "compiled": 0,
            "failed": 0,
            "waited_s": 0.0,
            "mode": "pipelined",
        }
        self.row_futures: list[list[Any]] = []
        self._pool = cf.ProcessPoolExecutor(
            max_workers=workers, mp_context=mp.get_context("spawn"), initializer=_lower_priority
        )
        by_key: dict[tuple, Any] = {}
        for item, left in todo:
            futs: list[Any] = []
            self.row_futures.append(futs)
            row = item.row
            if row.problem_error():
                continue
            try:
                sig = signature_of(row.kernel_source, row.kernel)
            except KernelSourceError:
                continue
            routing = row_routing(row)
            row_json = row.to_json()
            src = source_hash(row.kernel_source)
            constexprs = frozenset(p.name for p in sig.params if p.constexpr)
            for i in left:
                cfg_raw = item.cands[i].config
                try:
                    cfg, _ = normalise_config(cfg_raw)
                    launches = plan_launches(row, cfg, sig, routing)
                except (ConfigError, ValueError):
                    continue
                key = (src, row.kernel, tuple(lch.spec_key(constexprs) for lch in launches))
                fut = by_key.get(key)
                if fut is None:
                    from .device import precompile

                    try:
                        fut = self._pool.submit(precompile, [(row_json, cfg_raw)])
                    except cf.BrokenExecutor:  # a dead pool: the timing pass compiles
                        self.stats["broken"] = True
                        return
                    fut.add_done_callback(self._count)
                    by_key[key] = fut
                    self.stats["variants"] += 1
                futs.append(fut)
        self.stats["candidates"] = sum(len(left) for _, left in todo)

    def _count(self, fut: Any) -> None:
        try:
            res = fut.result()
        except BaseException:  # noqa: BLE001 - a dead worker only loses its pre-compile
            self.stats["failed"] += 1
            return
        self.stats["compiled"] += sum(r == "ok" for r in res)
        self.stats["failed"] += sum(r != "ok" for r in res)

    def wait_row(self, n: int, deadline: float | None) -> None:
        """Block until the variants of the ``n``-th row of the batch are compiled (or
        failed: the timing pass then meets and classifies the same failure)."""
        futs = [f for f in self.row_futures[n] if not f.done()] if n < len(self.row_futures) else []
        if not futs:
            return
        t0 = time.monotonic()
        timeout = None if deadline is None else max(0.0, deadline - t0)
        self._cf.wait(futs, timeout=timeout)
        self.stats["waited_s"] = round(self.stats["waited_s"] + time.monotonic() - t0, 2)

    def close(self) -> dict[str, Any]:
        self.stats["unfinished"] = sum(not f.done() for fs in self.row_futures for f in fs)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.stats["seconds"] = round(time.monotonic() - self.started, 1)
        return dict(self.stats)


def _lower_priority() -> None:
    with contextlib.suppress(OSError):
        os.nice(5)


# -- summary --------------------------------------------------------------------------


def _fmt(v: float | None, spec: str = ".1f") -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def summarise(
    items: Iterable[BatchItem], results: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per row: tuned and default time, their ratio, the fastest candidate, counts."""
    by_row: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_row.setdefault(str(r.get("row_id")), []).append(r)
    out = []
    for item in items:
        rs = by_row.get(item.row.id, [])
        ok = [r for r in rs if r.get("status") == "ok" and r.get("t_us")]
        times = {r["label"]: float(r["t_us"]) for r in ok}
        best = min(ok, key=lambda r: float(r["t_us"])) if ok else None
        t_tuned, t_default = times.get("tuned"), times.get("default")
        out.append(
            {
                "row_id": item.row.id,
                "kernel": item.row.kernel,
                "repo": item.row.repo,
                "quant": item.row.quant,
                "M": item.row.M,
                "measured": len(rs),
                "candidates": len(item.cands),
                "ok": len(ok),
                "failures": dict(Counter(r.get("status") for r in rs if r.get("status") != "ok")),
                "t_tuned_us": t_tuned,
                "t_default_us": t_default,
                "speedup_vs_default": (t_default / t_tuned) if t_tuned and t_default else None,
                "best_label": best["label"] if best else None,
                "t_best_us": float(best["t_us"]) if best else None,
                "tuned_is_best": (best is not None and best["label"] == "tuned"),
            }
        )
    return out


def format_summary(rows: Sequence[dict[str, Any]]) -> str:
    head = (
        f"{'row':10} {'kernel':22} {'repo':6} {'quant':11} {'M':>5} {'tuned_us':>9} "
        f"{'default_us':>10} {'speedup':>7} {'best':>16} {'best_us':>8} {'ok':>5} fails"
    )
    lines = [head, "-" * len(head)]
    for s in rows:
        fails = ",".join(f"{k}:{v}" for k, v in sorted(s["failures"].items())) or "-"
        lines.append(
            f"{s['row_id'][:10]:10} {s['kernel'][:22]:22} {s['repo'][:6]:6} {s['quant']:11} "
            f"{s['M']:>5} {_fmt(s['t_tuned_us']):>9} {_fmt(s['t_default_us']):>10} "
            f"{_fmt(s['speedup_vs_default'], '.2f'):>7} {str(s['best_label'])[:16]:>16} "
            f"{_fmt(s['t_best_us']):>8} {s['ok']:>2}/{s['candidates']:<2} {fails}"
        )
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in rows:
        groups.setdefault((s["kernel"], s["quant"]), []).append(s)
    lines.append("")
    lines.append(
        f"{'kernel':30} {'quant':11} {'rows':>4} {'median_speedup':>14} {'tuned_best':>10}"
    )
    for (kernel, quant), ss in sorted(groups.items()):
        sp = [s["speedup_vs_default"] for s in ss if s["speedup_vs_default"]]
        measured = [s for s in ss if s["t_tuned_us"]]
        best = sum(s["tuned_is_best"] for s in measured)
        lines.append(
            f"{kernel[:30]:30} {quant:11} {len(measured):>4} "
            f"{_fmt(statistics.median(sp) if sp else None, '.3f'):>14} "
            f"{best:>4}/{len(measured):<5}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m dagster_project.rewards.gpu.run_batch", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("in_path", type=Path)
    ap.add_argument("out_path", type=Path)
    ap.add_argument(
        "--budget-s",
        type=float,
        default=None,
        help="stop starting candidates after this many seconds",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=0,
        help="parallel pre-compile processes (0: compile while timing)",
    )
    ap.add_argument(
        "--timing",
        default="fast",
        choices=("fast", "full"),
        help="timing preset (device.TIMING_PRESETS); full = harness 1.0.0's",
    )
    args = ap.parse_args(argv)
    if not args.in_path.is_file():
        print(f"no batch file {args.in_path}", file=sys.stderr)
        return EXIT_USAGE
    args.out_path.parent.mkdir(parents=True, exist_ok=True)
    report = run_batch(
        args.in_path,
        args.out_path,
        budget_s=args.budget_s,
        workers=args.workers,
        timing=args.timing,
    )
    items = read_batch(args.in_path)
    print(format_summary(summarise(items, read_results(args.out_path))))
    print(
        f"\nmeasured {report.measured} new, {report.skipped_done} already done, "
        f"{report.crashed} crashed; rows started {report.rows_started}; "
        f"budget stop: {report.stopped_by_budget}; precompile: {report.precompile}"
    )
    return EXIT_CONTEXT_LOST if report.context_lost else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
