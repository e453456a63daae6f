"""Issue 20's session acceptance figures, read off the kernelinfer steps alone.

Reads the Parquet that ``benchmarks/bench_sim.py --keep DIR`` writes (``--dir DIR``), or
generates ``--sessions N`` sessions in-process with the current generator, and prints:

* **causal errors**: the share of compile_error / wrong_result steps whose mistake lies in
  lines the step changed. Each step is compared with its *parent* (what the engineer
  edited: the previous step for a fix; the fastest measured code of the same rung so far
  for a tune or rebench; the previous step for a variant) and with its *intended* code
  (the clean source of the same rung and parameters: any ok/unverified step of the
  session with that rung and those parameters; the code is a pure function of them). The
  mistake is ``diff(intended, code)``; the step's edit is the lines of ``intended`` whose
  digit-normalised text ``parent`` lacks (so a parameter-only edit touches no line). A
  mistake traces when its lines lie inside the edit. The rule is
  ``dagster_project.sim.kernelinfer.error_causes`` (``check_session`` enforces it). An error
  without a textual mistake (shared memory over the cap, a missing arch feature, a rung
  measured wrong) traces when
  the step changed the rung or a parameter. Steps whose intended code never appears in
  the session (the engineer never got that configuration to run) are counted apart as
  unresolved.
* **regressions of fixed lines**: mistakes on a line (digit-normalised) that an earlier
  step of the session had already been corrected on (same rung), where the erring step
  did not rewrite that line.
* **repeated identical shared-memory overflows**: the share of overflow errors whose
  byte count already appeared in an earlier overflow of the same session.
* **unproductive tails**: the share of ok tune steps after the session's best that are
  ≥ 1.5× slower than the best; sessions with > 20% re-benchmark steps.
* **templating** (measured only; h20-code works on it): exact duplicate assistant turns
  across sessions, distinct digit-normalised bodies and CUDA lines.

    python benchmarks/sim_behaviour.py --dir /tmp/kh/base20/kernelinfer
    python benchmarks/sim_behaviour.py --sessions 80 --sample-seed 7
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RAN = ("ok", "unverified")
ERR = ("compile_error", "wrong_result")
_DIGITS = re.compile(r"\d+")


def _norm(line: str) -> str:
    return _DIGITS.sub("#", line.strip())


def load_dir(path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    steps = pl.read_parquet(sorted(path.glob("steps_*.parquet")))
    sessions = pl.read_parquet(
        sorted(path.glob("sessions_*.parquet")), columns=["session_id", "best", "num_steps"]
    )
    return steps, sessions


def generate(n: int, sample_seed: int | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``n`` sessions of the default build: the first ``n`` tasks, or with ``sample_seed``
    a ``random.Random(sample_seed).sample`` of all of them (spread over ops and GPUs)."""
    import random

    from dagster_project.sim.kernelinfer import build_tasks, session_frames, simulate_session

    tasks, _ = build_tasks()
    chosen = random.Random(sample_seed).sample(tasks, n) if sample_seed is not None else tasks[:n]
    sess = [simulate_session(t) for t in chosen]
    sdf, tdf = session_frames(sess, shard=0)
    return tdf, sdf.select("session_id", "best", "num_steps")


def session_figures(rows: list[dict[str, Any]], best: dict[str, Any] | None) -> dict[str, Any]:
    from dagster_project.sim.kernelinfer import error_causes

    f: Counter[str] = Counter()
    trace = [{**r, "params": json.loads(r["params"])} for r in rows]
    codes = [r["code"] for r in rows]
    fixed: dict[str, set[str]] = defaultdict(set)  # tag -> normalised lines once corrected
    seen_smem: set[int] = set()
    for c in error_causes(trace, codes, [r["feedback"] for r in rows]):
        r = rows[c["step"]]
        kind = "wrong" if c["status"] == "wrong_result" else "compile"
        f[f"{kind}_steps"] += 1
        f[f"{kind}_{r['kind']}"] += 1
        if c["overflow"] is not None:
            f["smem_overflows"] += 1
            f["smem_repeats"] += int(c["overflow"] in seen_smem)
            seen_smem.add(c["overflow"])
        if c["traced"] is None:
            f[f"{kind}_unresolved"] += 1
            continue
        if c["mistake"]:
            intended = c["intended"].split("\n")
            mnorm = {_norm(intended[k]) for k in c["mistake"] if 0 <= k < len(intended)}
            tagset = fixed[r["tag"]]
            if (mnorm & tagset) and not c["traced"]:
                f[f"{kind}_regressions"] += 1
            tagset |= mnorm
        f[f"{kind}_traced"] += int(c["traced"])
        if not c["traced"]:
            f[f"{kind}_untraced_{r['kind']}"] += 1
    # tails after the best
    if best and best.get("step") is not None and best.get("time_ms"):
        b, bt = best["step"], best["time_ms"]
        for r in rows[b + 1 :]:
            if r["kind"] == "tune" and r["status"] in RAN and r["time_ms"] is not None:
                f["tail_tune_ok"] += 1
                f["tail_slow"] += int(r["time_ms"] >= 1.5 * bt)
    nreb = sum(1 for r in rows if r["kind"] == "rebench")
    f["rebench_steps"] += nreb
    f["rebench_heavy"] += int(nreb > 0.2 * len(rows))
    f["rebench_max"] = nreb
    return dict(f)


def templating(steps: pl.DataFrame) -> dict[str, Any]:
    code = steps.select("session_id", "code")
    per = code.unique().group_by("code").agg(pl.col("session_id").n_unique().alias("n"))
    dup_bodies = set(per.filter(pl.col("n") > 1)["code"].to_list())
    n_turns = len(code)
    dup_turns = code.filter(pl.col("code").is_in(list(dup_bodies))).height
    norm = code["code"].str.replace_all(r"\d+", "#")
    distinct_norm = norm.n_unique()
    cuda = steps.filter(pl.col("code").str.contains("__global__"))["code"]
    cuda_lines: set[str] = set()
    total_lines = 0
    for c in cuda.to_list():
        ls = [_DIGITS.sub("#", ln.strip()) for ln in c.split("\n") if ln.strip()]
        total_lines += len(ls)
        cuda_lines.update(ls)
    return {
        "turns": n_turns,
        "dup_turns": dup_turns,
        "distinct_norm_bodies": distinct_norm,
        "cuda_lines": total_lines,
        "distinct_cuda_lines": len(cuda_lines),
    }


def measure(steps: pl.DataFrame, sessions: pl.DataFrame) -> dict[str, Any]:
    best = {s: b for s, b in zip(sessions["session_id"], sessions["best"].to_list(), strict=True)}
    tot: Counter[str] = Counter()
    rb_max = 0
    cols = ["session_id", "step", "tag", "kind", "params", "status", "time_ms", "code", "feedback"]
    for (sid,), g in (
        steps.select(cols).sort("session_id", "step").group_by("session_id", maintain_order=True)
    ):
        f = session_figures(g.to_dicts(), best.get(str(sid)))
        rb_max = max(rb_max, f.pop("rebench_max", 0))
        tot.update(f)
    out: dict[str, Any] = dict(tot)
    out["rebench_max"] = rb_max
    out["sessions"] = sessions.height
    out["steps"] = steps.height
    out.update(templating(steps))
    return out


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


def report(m: dict[str, Any]) -> str:
    g = m.get
    out = [f"sessions {m['sessions']}  steps {m['steps']}"]
    for kind, label in (("wrong", "wrong_result"), ("compile", "compile_error")):
        n = g(f"{kind}_steps", 0)
        res = n - g(f"{kind}_unresolved", 0)
        by = {
            k.split("_untraced_")[1]: v for k, v in m.items() if k.startswith(f"{kind}_untraced_")
        }
        by_step = dict(
            (k.split("_", 1)[1], v)
            for k, v in m.items()
            if k.startswith(kind + "_")
            and k.split("_", 1)[1] in ("baseline", "variant", "tune", "fix", "rebench")
        )
        out.append(
            f"{label}: {n} steps, traced to lines/config the step changed: "
            f"{g(f'{kind}_traced', 0)}/{res} = {_pct(g(f'{kind}_traced', 0), res)} "
            f"(unresolved {g(f'{kind}_unresolved', 0)}; untraced by kind {by}; "
            f"by kind {by_step})"
        )
    out.append(
        f"regressions of fixed lines: {g('wrong_regressions', 0) + g('compile_regressions', 0)} "
        f"(wrong_result {g('wrong_regressions', 0)}, compile_error {g('compile_regressions', 0)})"
    )
    out.append(
        f"repeated identical smem overflow: {g('smem_repeats', 0)}/{g('smem_overflows', 0)} = "
        f"{_pct(g('smem_repeats', 0), g('smem_overflows', 0))}  (goal <= 5%)"
    )
    out.append(
        f"ok tune steps after the best >= 1.5x slower: "
        f"{g('tail_slow', 0)}/{g('tail_tune_ok', 0)} = "
        f"{_pct(g('tail_slow', 0), g('tail_tune_ok', 0))}  (goal <= 10%)"
    )
    out.append(
        f"sessions with > 20% rebench steps: {g('rebench_heavy', 0)}  (goal 0; max rebench steps "
        f"in a session {g('rebench_max', 0)}; "
        f"rebench share {_pct(g('rebench_steps', 0), m['steps'])})"
    )
    out.append(
        f"assistant turns duplicated in another session: {g('dup_turns')}/{g('turns')} = "
        f"{_pct(g('dup_turns', 0), g('turns', 0))}; distinct digit-normalised bodies "
        f"{g('distinct_norm_bodies')}; CUDA lines {g('cuda_lines')} from "
        f"{g('distinct_cuda_lines')} distinct"
    )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, help="Parquet from bench_sim.py --keep DIR")
    ap.add_argument("--sessions", type=int, help="generate this many sessions in-process")
    ap.add_argument("--sample-seed", type=int, help="with --sessions: a random sample of tasks")
    ap.add_argument("--json", action="store_true", help="also print the raw counters as JSON")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.dir:
        steps, sessions = load_dir(a.dir)
        src = str(a.dir)
    else:
        from dagster_project.sim import GENERATOR_VERSION

        steps, sessions = generate(a.sessions or 200, a.sample_seed)
        src = f"generated in-process (generator {GENERATOR_VERSION})"
    m = measure(steps, sessions)
    print(f"kernelinfer behaviour figures: {src}")
    print(report(m))
    print(f"({time.perf_counter() - t0:.1f} s)")
    if a.json:
        print(json.dumps(m, sort_keys=True))


if __name__ == "__main__":
    main()
