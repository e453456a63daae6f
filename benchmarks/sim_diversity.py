"""How templated is the simulated code? Diversity figures of kernelinfer assistant turns.

Issue 20 asks for code that reads as written by different engineers. This script prints,
over every assistant turn (one complete kernel source per step):

* **duplicates across sessions** — share of turns whose exact text also appears in another
  session (goal ≤ 1%);
* **distinct digit-normalised bodies** — turns with every digit run replaced by ``0``
  (parameters, shapes and line numbers then stop counting; goal ≥ 3× generator 1.6.0);
* **distinct CUDA lines** — stripped, digit-normalised lines of the CUDA turns;
* **structural styles per rung** — distinct *structure* fingerprints per (op, impl, rung):
  comments and blank lines dropped, digits normalised and every identifier that is not a
  CUDA / Triton built-in replaced by one token, so renamed variables and reworded comments
  do not count, a different loop order, reduction or staging does.

    # from the Parquet of bench_sim --keep, or generated in-process:
    python benchmarks/sim_diversity.py --dir /tmp/kh/base20/kernelinfer
    python benchmarks/sim_diversity.py --sessions 200
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_DIGITS = re.compile(r"\d+")
_CUDA_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_PY_COMMENT = re.compile(
    r"(?m)^\s*#(?!include|pragma|define|if|endif|else|elif|undef).*$|\s+#\s[^\n]*$"
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: identifiers that are part of the language / runtime, kept in structure fingerprints
_BUILTIN = re.compile(
    r"^(?:__\w+|tl|triton|torch|threadIdx|blockIdx|blockDim|gridDim|warpSize|"
    r"for|while|if|else|return|break|continue|const|constexpr|unsigned|int|float|double|"
    r"half|half2|bool|void|auto|struct|template|typename|static|inline|extern|"
    r"uint\d*_t|int\d*_t|size_t|float[24]|uint[24]|int[24]|char|long|short|"
    r"def|in|range|static_range|and|or|not|None|True|False|lambda|import|from|as|"
    r"pragma|unroll|include|define|dim3|asm|volatile|atomic\w*|min|max|fmaxf|fminf|"
    r"expf|exp2f|logf|sqrtf|rsqrtf|fabsf|abs|sum|dot|load|store|arange|zeros|where|"
    r"maximum|minimum|exp|exp2|log|sqrt|rsqrt|cdiv|program_id|num_programs|jit|"
    r"reinterpret_cast|static_cast|sizeof|cp|async|wgmma|mma|ldmatrix)$"
)


def digit_norm(text: str) -> str:
    return _DIGITS.sub("0", text)


def structure(code: str, impl: str) -> str:
    """Structure fingerprint: no comments, no names, no numbers, no layout."""
    body = _CUDA_COMMENT.sub("", code) if impl == "cuda" else _PY_COMMENT.sub("", code)
    body = _DIGITS.sub("0", body)
    body = _IDENT.sub(lambda m: m.group(0) if _BUILTIN.match(m.group(0)) else "I", body)
    return " ".join(body.split())


def _sessions_from_dir(d: Path) -> Iterator[dict[str, Any]]:
    import polars as pl

    files = sorted(d.glob("sessions_*.parquet"))
    if not files:
        raise SystemExit(f"no sessions_*.parquet under {d}")
    for f in files:
        df = pl.read_parquet(f, columns=["session_id", "op", "impl", "trace", "messages"])
        yield from df.iter_rows(named=True)


def _sessions_in_process(n: int, seed: int) -> Iterator[dict[str, Any]]:
    from dagster_project.sim.kernelinfer import generate_shard, n_shards

    for shard in range(n_shards(n)):
        yield from generate_shard(shard, seed=seed, n_sessions=n)


def turns(sessions: Iterable[dict[str, Any]]) -> Iterator[tuple[str, str, str, str, str]]:
    """(session_id, op, impl, rung tag, code) per assistant turn."""
    for s in sessions:
        trace = s["trace"]
        k = 0
        for m in s["messages"]:
            if m["role"] != "assistant":
                continue
            tag = trace[k]["tag"] if k < len(trace) else "?"
            k += 1
            yield s["session_id"], s["op"], s["impl"], tag, m["content"]


def figures(rows: Iterable[tuple[str, str, str, str, str]]) -> dict[str, Any]:
    owners: dict[int, str | None] = {}  # hash of a body -> the one session using it (None: many)
    per_turn: list[int] = []
    norm: set[int] = set()
    cuda_lines: set[int] = set()
    n_cuda_lines = 0
    rung_struct: dict[tuple[str, str, str], set[int]] = defaultdict(set)
    fp_cache: dict[int, int] = {}
    n = 0
    for sid, op, impl, tag, code in rows:
        n += 1
        h = hash(code)
        per_turn.append(h)
        if h not in owners:
            owners[h] = sid
        elif owners[h] != sid:
            owners[h] = None
        nb = digit_norm(code)
        hn = hash(nb)
        norm.add(hn)
        if impl == "cuda":
            for ln in nb.split("\n"):
                ln = ln.strip()
                if ln:
                    n_cuda_lines += 1
                    cuda_lines.add(hash(ln))
        fp = fp_cache.get(hn)
        if fp is None:
            fp = fp_cache[hn] = hash(structure(code, impl))
        rung_struct[(op, impl, tag)].add(fp)
    dup = sum(1 for h in per_turn if owners[h] is None)
    counts = [len(v) for v in rung_struct.values()]
    by_impl: dict[str, list[int]] = defaultdict(list)
    for (_, impl, _), v in rung_struct.items():
        by_impl[impl].append(len(v))
    return {
        "turns": n,
        "dup_share": dup / max(1, n),
        "dup_turns": dup,
        "distinct_norm": len(norm),
        "cuda_lines": n_cuda_lines,
        "distinct_cuda_lines": len(cuda_lines),
        "rungs": len(counts),
        "struct_median": statistics.median(counts) if counts else 0,
        "struct_min": min(counts) if counts else 0,
        "rungs_ge2": sum(1 for c in counts if c >= 2),
        "by_impl": {k: statistics.median(v) for k, v in by_impl.items()},
    }


def render_speed(n: int) -> None:
    """Render ``n`` candidates in the 1.6.0 style and in their task's author's style, in
    one process (same tasks, rungs, params; a fresh render each, no env cache)."""
    import random

    from dagster_project.sim.codegen import render_candidate
    from dagster_project.sim.kernelinfer import DEFAULT_SEED, build_tasks
    from dagster_project.sim.styles import Style
    from dagster_project.sim.variants import get_variant, iter_params, ladder

    tasks, _ = build_tasks(DEFAULT_SEED)
    rng = random.Random(0)
    cases = []
    for t in rng.sample(tasks, min(n, len(tasks))):
        op = t.spec
        v = rng.choice(ladder(op.family, t.impl))
        ps = iter_params(get_variant(op.family, t.impl, v.tag), op, t.dtype)
        if ps:
            cases.append((t, v, rng.choice(ps)))
    for t, v, p in cases:  # warm the template, evidence and parameter-range caches
        render_candidate(t.op, t.gpu, t.dtype, t.shape, v, p)
        render_candidate(t.op, t.gpu, t.dtype, t.shape, v, p, style=Style.base())
    times: dict[str, float] = {}
    for _ in range(3):  # alternate, keep each one's best: the machine is shared
        for label, style in (("1.6.0 (Style.base)", Style.base()), ("author styles", None)):
            t0 = time.perf_counter()
            for t, v, p in cases:
                render_candidate(t.op, t.gpu, t.dtype, t.shape, v, p, style=style)
            secs = time.perf_counter() - t0
            times[label] = min(times.get(label, secs), secs)
    base = times["1.6.0 (Style.base)"]
    for label, secs in times.items():
        print(
            f"  render {len(cases)} candidates, {label:20s} {secs:6.2f} s "
            f"({1e3 * secs / len(cases):.2f} ms each, {secs / base:.2f}x)"
        )


def shard_ab(rounds: int) -> None:
    """Generate shard 0 of the default build with and without authors (``env``'s renders
    forced to ``Style.base()``), alternating, best of ``rounds``: the generator's cost of
    the authors, in one process."""
    from dagster_project.sim import codegen, env
    from dagster_project.sim.kernelinfer import DEFAULT_SESSIONS, generate_shard
    from dagster_project.sim.styles import Style

    plain = codegen.render_candidate

    def base_render(*a: Any, **k: Any) -> str:
        k["style"] = Style.base()
        return plain(*a, **k)

    generate_shard(1, n_sessions=DEFAULT_SESSIONS)  # warm templates and evidence
    best: dict[str, float] = {}
    for _ in range(rounds):
        for label, fn in (("Style.base()", base_render), ("authors", plain)):
            env.render_candidate = fn  # type: ignore[assignment]
            t0 = time.perf_counter()
            generate_shard(0, n_sessions=DEFAULT_SESSIONS)
            secs = time.perf_counter() - t0
            best[label] = min(best.get(label, secs), secs)
            print(f"  shard 0 with {label:13s} {secs:6.1f} s", flush=True)
    env.render_candidate = plain  # type: ignore[assignment]
    print(f"  best: {best}; authors / base = {best['authors'] / best['Style.base()']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=str, default="", help="Parquet from bench_sim.py --keep")
    ap.add_argument("--sessions", type=int, default=0, help="generate N sessions in-process")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--baseline-distinct", type=int, default=19345, help="1.6.0 figure")
    ap.add_argument("--render-speed", type=int, default=0, help="time N renders and stop")
    ap.add_argument("--shard-ab", type=int, default=0, help="A/B shard 0, N rounds, and stop")
    ap.add_argument(
        "--base-style",
        action="store_true",
        help="A/B: generate with every render in Style.base() (the 1.6.0 text)",
    )
    args = ap.parse_args()
    if args.base_style:
        # the counterfactual of the same generator without authors: env.py calls
        # codegen.render_candidate through its module attribute
        from dagster_project.sim import codegen, env
        from dagster_project.sim.styles import Style

        plain = codegen.render_candidate

        def base_render(*a: Any, **k: Any) -> str:
            k["style"] = Style.base()
            return plain(*a, **k)

        env.render_candidate = base_render  # type: ignore[assignment]
    if args.render_speed:
        render_speed(args.render_speed)
        return
    if args.shard_ab:
        shard_ab(args.shard_ab)
        return
    t0 = time.perf_counter()
    if args.dir:
        src = _sessions_from_dir(Path(args.dir))
        where = args.dir
    else:
        from dagster_project.sim.kernelinfer import DEFAULT_SEED

        n = args.sessions or 200
        src = _sessions_in_process(n, args.seed or DEFAULT_SEED)
        where = f"{n} sessions generated in-process" + (
            " in Style.base()" if args.base_style else ""
        )
    f = figures(turns(src))
    from dagster_project.sim import GENERATOR_VERSION

    print(f"kernelinfer code diversity ({where}; this checkout's generator {GENERATOR_VERSION})")
    print(f"  assistant turns:                      {f['turns']}")
    print(
        f"  exact duplicates across sessions:     {f['dup_turns']} "
        f"({100 * f['dup_share']:.2f}%)  goal <= 1%"
    )
    ratio = f["distinct_norm"] / args.baseline_distinct
    print(
        f"  distinct digit-normalised bodies:     {f['distinct_norm']}  "
        f"({ratio:.2f}x the 1.6.0 full build's {args.baseline_distinct}; goal >= 3x at full size)"
    )
    print(f"  CUDA lines / distinct (digit-norm.):  {f['cuda_lines']} / {f['distinct_cuda_lines']}")
    print(
        f"  structural styles per (op,impl,rung): median {f['struct_median']}, "
        f"min {f['struct_min']}, "
        f"{f['rungs_ge2']}/{f['rungs']} rungs with >= 2; median by impl {f['by_impl']}"
    )
    print(f"  ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
