"""Issue 39's engineer-behaviour acceptance figures (memory, failure mix, when tuning stops).

Generates ``--sessions N`` kernelinfer sessions for each ``--seed`` in-process with the
current generator (a ``random.Random(--sample-seed)`` sample of that seed's task pool, so
the figures cover ops and GPUs evenly) and reads them off the card-format session dicts
alone (trace, assistant code, feedback text), as a trainer would:

* **fix repeats**: fix steps whose edit of the failing source (the previous step) removes
  and adds exactly the same stripped lines as an earlier fix of the same session
  (goal <= 3%);
* **unchanged resubmissions**: steps (rebench aside) that resubmit the source of the step
  before them byte for byte when that step failed (goal 0), and steps that resubmit any
  earlier failed source;
* **repeated diagnostics**: compile errors whose digit-normalised error line already
  appeared earlier in the session;
* **syntax slips**: the share of compile errors whose diagnostic is one of the typed slips
  (a missing ``;``, a misspelt identifier, a lost ``reinterpret_cast``, the legacy shuffle,
  a Triton keyword or name typo, a non-constexpr or non-power-of-2 ``arange``) (goal
  <= 15%);
* **after the best**: steps after the session's best step, as a share of all steps of the
  sessions with a best (goal <= 35%), and the mean of the per-session share;
* **slow tail**: ok tune steps after the best that are >= 1.5x slower than it (goal <= 5%);
* **slow revisits**: tune steps on a rung whose own best was already measured >= 1.5x
  slower than the session's best at that moment.

The default build's seed (``KERNELHOUSE_SIM_SEED``'s default) is in sample for every rule
tuned on it; pass another seed for the out-of-sample figures.

    python benchmarks/sim_engineer.py --sessions 150 --seed 20260 --seed 4242

``--prefix-of ROOT`` checks the hard constraint of a stop-rule change (issue 39, 39c): it
generates the first ``--sessions`` sessions of the seed's task pool (0: all, the default
build's 1,899) with the generator checked out at ``ROOT`` (``git worktree add`` / ``git archive``
of the earlier revision) in a subprocess and here, and counts the sessions whose steps are
not the old session's steps (a session may only end earlier, and its closing re-benchmark
re-measures a kernel the old session wrote): every kernel the new sessions write must be
one the old sessions wrote, so the measured answers (addressed by kernel text) still apply.

    python benchmarks/sim_engineer.py --prefix-of /tmp/before --seed 20260 --sessions 0

``--slow-tail`` lists the slow tail itself (issue 39, 39f): every ok tune step after the best
that is >= 1.5x slower than it, with the rung, the parameters it moved from the rung's
fastest earlier step, how far after the best it came and the session's step sequence, then
the count per moved parameter and direction:

    python benchmarks/sim_engineer.py --slow-tail --sessions 150 --seed 784245 --sample-seed 9
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

RAN = ("ok", "unverified")
FAILED = ("compile_error", "wrong_result")
_DIGITS = re.compile(r"\d+")
#: The diagnostics of the typed slips (``sim.codegen`` CUDA_SLIPS / TRITON_SLIPS).
SLIP_RE = re.compile(
    r'expected a ";"|identifier "[^"]+" is undefined|cannot be used to initialize an entity'
    r"|NameError\(|unexpected keyword argument|must be of type tl\.constexpr"
    r"|range must be a power of 2"
)
_ERROR_LINE = re.compile(r"(error: .*|\w+Error\(.*)")


def generate(n: int, seed: int, sample_seed: int) -> list[dict[str, Any]]:
    """``n`` sessions of seed ``seed``'s task pool (a seeded random sample of it)."""
    from dagster_project.sim.kernelinfer import build_tasks, simulate_session

    tasks, _ = build_tasks(seed)
    chosen = random.Random(sample_seed).sample(tasks, min(n, len(tasks)))
    return [simulate_session(t, seed) for t in chosen]


def _edit(a: str, b: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(removed, added) stripped non-blank lines of the edit from ``a`` to ``b``."""
    la, lb = a.split("\n"), b.split("\n")
    rem: list[str] = []
    add: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, la, lb, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        rem += [x.strip() for x in la[i1:i2] if x.strip()]
        add += [x.strip() for x in lb[j1:j2] if x.strip()]
    return tuple(sorted(rem)), tuple(sorted(add))


def _error_line(feedback: str) -> str:
    m = _ERROR_LINE.search(feedback)
    return _DIGITS.sub("#", m.group(1)) if m else ""


def _memory(trace: list[dict[str, Any]], codes: list[str], fbs: list[str], f: Counter[str]) -> None:
    """Fix repeats, unchanged resubmissions and repeated diagnostics of one session."""
    edits: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    failed_codes: set[str] = set()
    seen_diag: set[str] = set()
    for i, r in enumerate(trace):
        if i and r["kind"] != "rebench":
            prev_failed = trace[i - 1]["status"] in FAILED
            f["unchanged_resubmit"] += int(prev_failed and codes[i] == codes[i - 1])
            f["resubmit_failed"] += int(codes[i] in failed_codes)
        if i and r["kind"] == "fix":
            f["fix_steps"] += 1
            e = _edit(codes[i - 1], codes[i])
            if e != ((), ()):
                f["fix_repeat"] += int(e in edits)
                edits.add(e)
        if r["status"] in FAILED:
            failed_codes.add(codes[i])
        if r["status"] == "compile_error":
            f["compile_errors"] += 1
            f["compile_slip"] += int(bool(SLIP_RE.search(fbs[i])))
            d = _error_line(fbs[i])
            f["compile_repeat_diag"] += int(bool(d) and d in seen_diag)
            seen_diag.add(d)
        elif r["status"] == "wrong_result":
            f["wrong_results"] += 1


def _tail(trace: list[dict[str, Any]], best: dict[str, Any], f: Counter[str]) -> None:
    """Steps after the best, the slow tail and slow revisits of one session."""
    n = len(trace)
    f["steps"] += n
    b, bt = best.get("step"), best.get("time_ms")
    if b is None or not bt:
        f["null_best"] += 1
        return
    f["steps_with_best"] += n
    f["after_best"] += n - 1 - b
    # the same without a closing re-benchmark (the session's last step re-measuring at length)
    closing = int(b < n - 1 and trace[-1]["kind"] == "rebench")
    f["after_best_open"] += n - 1 - b - closing
    f["steps_with_best_open"] += n - closing
    f["_after_share_x1e6"] += int(1e6 * (n - 1 - b) / n)
    f["sessions_with_best"] += 1
    for r in trace[b + 1 :]:
        if r["kind"] == "tune" and r["status"] in RAN and r["time_ms"] is not None:
            f["tail_tune_ok"] += 1
            f["tail_slow"] += int(r["time_ms"] >= 1.5 * bt)
    best_so_far = float("inf")
    rung_best: dict[str, float] = {}
    for r in trace:
        t = r["time_ms"] if r["status"] in RAN else None
        if r["kind"] == "tune":
            f["tune_steps"] += 1
            rb = rung_best.get(r["tag"])
            f["slow_revisit"] += int(rb is not None and rb >= 1.5 * best_so_far)
        if t is not None and r["kind"] != "rebench":
            rung_best[r["tag"]] = min(rung_best.get(r["tag"], t), t)
            best_so_far = min(best_so_far, t)


_KIND = {"baseline": "B", "variant": "V", "tune": "t", "fix": "F", "rebench": "r"}


def _rung_best(trace: list[dict[str, Any]], i: int) -> dict[str, Any] | None:
    """The fastest ran step of step ``i``'s rung before it (what a tune move edits)."""
    ran = [
        r
        for r in trace[:i]
        if r["tag"] == trace[i]["tag"] and r["status"] in RAN and r["time_ms"] is not None
    ]
    return min((r for r in ran if r["kind"] != "rebench"), key=lambda r: r["time_ms"], default=None)


def slow_tail(sessions: list[dict[str, Any]]) -> tuple[list[str], Counter[str]]:
    """One line per slow post-best ok tune step, and their count per moved parameter and
    direction ("BM+": BM raised, "mma f16": mma set to f16)."""
    lines: list[str] = []
    moved: Counter[str] = Counter()
    for s in sessions:
        tr, b, bt = s["trace"], s["best"]["step"], s["best"]["time_ms"]
        if b is None or not bt:
            continue
        seq = "".join(_KIND[r["kind"]] + ("" if r["status"] in RAN else "x") for r in tr)
        for r in tr[b + 1 :]:
            t = r["time_ms"]
            if r["kind"] != "tune" or r["status"] not in RAN or t is None or t < 1.5 * bt:
                continue
            base = _rung_best(tr, r["step"])
            old = base["params"] if base is not None else {}
            diff = {k: (old.get(k), v) for k, v in r["params"].items() if old.get(k) != v}
            for k, (a, v) in diff.items():
                num = isinstance(a, int | float) and isinstance(v, int | float)
                moved[f"{k}{'+' if num and v > a else '-'}" if num else f"{k} {v}"] += 1
            lines.append(
                f"{s['session_id'][:60]:<60} step {r['step']}/{len(tr)} best@{b} {r['tag']} "
                f"x{t / bt:.2f} moved {diff} {seq}"
            )
    return lines, moved


def measure(sessions: list[dict[str, Any]]) -> dict[str, Any]:
    f: Counter[str] = Counter()
    for s in sessions:
        msgs = s["messages"][2:]
        codes = [m["content"] for m in msgs[0::2]]
        fbs = [m["content"] for m in msgs[1::2]]
        _memory(s["trace"], codes, fbs, f)
        _tail(s["trace"], s["best"], f)
    out: dict[str, Any] = dict(f)
    out["sessions"] = len(sessions)
    lengths = sorted(len(s["trace"]) for s in sessions)
    out["median_steps"] = lengths[len(lengths) // 2] if lengths else 0
    out["min_steps"], out["max_steps"] = (lengths[0], lengths[-1]) if lengths else (0, 0)
    return out


_KEYS_SCRIPT = """
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from dagster_project.sim.kernelinfer import build_tasks, simulate_session
tasks, _ = build_tasks(int(sys.argv[2]))
n = int(sys.argv[3])
out = {}
for t in tasks[: n or len(tasks)]:
    s = simulate_session(t, int(sys.argv[2]))
    out[s["session_id"]] = [hashlib.sha256(m["content"].encode()).hexdigest()
                            for m in s["messages"][2::2]]
json.dump(out, sys.stdout)
"""


def kernel_keys(root: Path, seed: int, n: int) -> dict[str, list[str]]:
    """Per session id, the sha256 of each step's source, as the generator at ``root``
    writes the seed's first ``n`` sessions (0: all); run in a fresh interpreter."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", _KEYS_SCRIPT, str(root), str(seed), str(n)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    keys: dict[str, list[str]] = json.loads(out)
    return keys


def prefix_report(old: dict[str, list[str]], new: dict[str, list[str]]) -> dict[str, int]:
    """How the new sessions relate to the old: identical, cut short (every step but the
    last is the old step, the last is an old step or re-measures a kernel the old session
    wrote), or otherwise (any kernel the old session never wrote counts in ``new_kernels``)."""
    f: Counter[str] = Counter()
    for sid, nk in new.items():
        ok = old.get(sid)
        if ok is None:
            f["missing_in_old"] += 1
            continue
        f["sessions"] += 1
        f["old_steps"] += len(ok)
        f["new_steps"] += len(nk)
        f["new_kernels"] += sum(k not in set(ok) for k in nk)
        if nk == ok:
            f["identical"] += 1
        elif len(nk) <= len(ok) and nk[:-1] == ok[: len(nk) - 1] and nk[-1] in set(ok):
            f["cut_short"] += 1
        else:
            f["diverged"] += 1
    return dict(f)


def _pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}%" if b else "n/a"


def report(m: dict[str, Any]) -> str:
    g = m.get
    mean_after = g("_after_share_x1e6", 0) / 1e4 / max(1, g("sessions_with_best", 0))
    return "\n".join(
        [
            f"sessions {m['sessions']}  steps {g('steps', 0)} (per session {g('min_steps')}-"
            f"{g('max_steps')}, median {g('median_steps')})  null bests {g('null_best', 0)}",
            f"fix steps repeating an earlier fix's edit: {g('fix_repeat', 0)}/"
            f"{g('fix_steps', 0)} = {_pct(g('fix_repeat', 0), g('fix_steps', 0))}  (goal <= 3%)",
            f"unchanged resubmissions of a failed step: {g('unchanged_resubmit', 0)}  (goal 0); "
            f"any earlier failed source resubmitted: {g('resubmit_failed', 0)}",
            f"compile errors repeating an earlier diagnostic: {g('compile_repeat_diag', 0)}/"
            f"{g('compile_errors', 0)} = "
            f"{_pct(g('compile_repeat_diag', 0), g('compile_errors', 0))}",
            f"compile errors that are syntax slips: {g('compile_slip', 0)}/"
            f"{g('compile_errors', 0)} = {_pct(g('compile_slip', 0), g('compile_errors', 0))}"
            f"  (goal <= 15%); wrong results {g('wrong_results', 0)}",
            f"steps after the best: {g('after_best', 0)}/{g('steps_with_best', 0)} = "
            f"{_pct(g('after_best', 0), g('steps_with_best', 0))}  (goal <= 35%); "
            f"mean per-session share {mean_after:.1f}%; without the closing re-benchmark "
            f"{_pct(g('after_best_open', 0), g('steps_with_best_open', 0))}",
            f"ok tune steps after the best >= 1.5x slower: {g('tail_slow', 0)}/"
            f"{g('tail_tune_ok', 0)} = {_pct(g('tail_slow', 0), g('tail_tune_ok', 0))}"
            f"  (goal <= 5%)",
            f"tune steps on a rung already >= 1.5x slower than the best: "
            f"{g('slow_revisit', 0)}/{g('tune_steps', 0)} = "
            f"{_pct(g('slow_revisit', 0), g('tune_steps', 0))}",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sessions", type=int, default=150, help="sessions per seed")
    ap.add_argument("--seed", type=int, action="append", help="generator seed (repeatable)")
    ap.add_argument("--sample-seed", type=int, default=0, help="which tasks of the pool")
    ap.add_argument("--json", action="store_true", help="also print the raw counters")
    ap.add_argument("--slow-tail", action="store_true", help="list the slow post-best tune steps")
    ap.add_argument(
        "--prefix-of", type=Path, help="a checkout of the earlier generator: the prefix check"
    )
    a = ap.parse_args()
    from dagster_project.settings import DEFAULT_SIM_SEED
    from dagster_project.sim import GENERATOR_VERSION

    if a.prefix_of is not None:
        for seed in a.seed or [DEFAULT_SIM_SEED]:
            old = kernel_keys(a.prefix_of, seed, a.sessions)
            new = kernel_keys(Path(__file__).resolve().parents[1], seed, a.sessions)
            print(f"== seed {seed}: {GENERATOR_VERSION} against {a.prefix_of}")
            print(json.dumps(prefix_report(old, new), sort_keys=True))
        return
    for seed in a.seed or [DEFAULT_SIM_SEED]:
        t0 = time.perf_counter()
        sessions = generate(a.sessions, seed, a.sample_seed)
        m = measure(sessions)
        where = "in sample" if seed == DEFAULT_SIM_SEED else "out of sample"
        print(f"== generator {GENERATOR_VERSION}, seed {seed} ({where}), sample {a.sample_seed}")
        print(report(m))
        print(f"({time.perf_counter() - t0:.1f} s)")
        if a.json:
            print(json.dumps(m, sort_keys=True))
        if a.slow_tail:
            lines, moved = slow_tail(sessions)
            print("\n".join(lines))
            print("slow tail by moved parameter:", dict(moved.most_common()))


if __name__ == "__main__":
    main()
