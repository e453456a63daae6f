"""Benchmark and validate the kernel_commits patch reward.

Reports, for a set of (before_code, after_code) file pairs:

* oracle figures over all pairs: share of ``oracle_edit`` completions scoring exactly 1.0,
  share >= 0.95, how many score below, and whether the oracle reproduces after_code;
* speed of ``patch_reward`` on the median-size pairs (the middle 20% by before_code
  length) for a GRPO-like mix of completions per pair, against a straightforward
  reference (``difflib.unified_diff`` on ``StringIO.readlines()`` lines, then
  ``SequenceMatcher(...).ratio()``), whose scores must be identical; the speed is shown
  both with the per-pair cache warm (GRPO scores a group of completions per prompt) and
  with it cleared before every call; each figure is the best of three interleaved rounds.

Data, first that applies:

1. ``--git PATH``: real performance commits mined from a git repository (modified
   source files of non-merge commits whose title carries a perf keyword, at most 120 KB
   and 800 changed lines, like the kernel_commits build);
2. ``KERNELHOUSE_HOME`` pointing at a lake whose ``lake.duckdb`` has
   ``datasets.kernel_commits`` (columns before_code, after_code);
3. synthetic C++-like files of about 20K characters with random line edits.

Usage: ``python benchmarks/bench_rewards.py [--git REPO] [--rows N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import os
import random
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from dagster_project.rewards import patch as patch_mod
from dagster_project.rewards.patch import (
    EditDoesNotApply,
    MalformedEdit,
    apply_edits,
    oracle_edit,
    parse_search_replace,
    patch_reward,
    split_lines,
)

Pair = tuple[str, str]

PERF_TITLE = re.compile(
    r"\b(perf|optimi[sz]|speed ?up|faster|tun(e|ing)|throughput|latency|accelerat|fast)",
    re.IGNORECASE,
)
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".c", ".py")
MAX_FILE_BYTES = 120_000
MAX_CHANGED_LINES = 800


# --------------------------------------------------------------------------- data sources


def pairs_from_git(repo: Path, limit: int) -> list[Pair]:
    """Modified source files of perf-titled, non-merge commits (newest first)."""
    log = subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "log",
            "--no-merges",
            "--no-renames",
            "--no-abbrev",
            "--format=%x00%H%x00%s",
            "--raw",
            "--numstat",
        ],
        check=True,
        capture_output=True,
        text=True,
        errors="replace",
    ).stdout
    wanted: list[tuple[str, str]] = []  # (old oid, new oid)
    chunks = log.split("\x00")[1:]  # sha, "subject\n<raw and numstat lines>", sha, ...
    for k in range(0, len(chunks) - 1, 2):
        title, _, body = chunks[k + 1].partition("\n")
        if not PERF_TITLE.search(title):
            continue
        wanted += _modified_sources(body)
        if len(wanted) >= limit:
            break
    blobs = _read_blobs(repo, [oid for pair in wanted for oid in pair])
    pairs: list[Pair] = []
    for old, new in wanted:
        before, after = blobs.get(old), blobs.get(new)
        if before is None or after is None or before == after:
            continue
        if max(len(before), len(after)) <= MAX_FILE_BYTES:
            pairs.append((before, after))
    return pairs[:limit]


def _modified_sources(body: str) -> list[tuple[str, str]]:
    """(old oid, new oid) of one commit's modified source files with 1 to
    ``MAX_CHANGED_LINES`` changed lines, from its ``--raw`` and ``--numstat`` lines."""
    raw: dict[str, tuple[str, str]] = {}
    churn: dict[str, int] = {}
    for line in body.splitlines():
        if line.startswith(":"):
            meta, _, path = line.partition("\t")
            fields = meta.split()
            if fields[-1] == "M":
                raw[path] = (fields[2], fields[3])
        elif line.strip():
            added, deleted, path = line.split("\t", 2)
            if added.isdigit() and deleted.isdigit():
                churn[path] = int(added) + int(deleted)
    return [
        oids
        for path, oids in raw.items()
        if path.endswith(SOURCE_SUFFIXES) and 0 < churn.get(path, 0) <= MAX_CHANGED_LINES
    ]


def _read_blobs(repo: Path, oids: list[str]) -> dict[str, str]:
    """Blob texts by oid through one ``git cat-file --batch``; undecodable blobs are skipped."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"],
        input="".join(oid + "\n" for oid in dict.fromkeys(oids)).encode(),
        check=True,
        capture_output=True,
    )
    out, data, pos = {}, proc.stdout, 0
    while pos < len(data):
        header_end = data.index(b"\n", pos)
        header = data[pos:header_end].split()
        pos = header_end + 1
        if len(header) < 3 or header[1] != b"blob":
            continue
        size = int(header[2])
        blob = data[pos : pos + size]
        pos += size + 1
        with contextlib.suppress(UnicodeDecodeError):
            out[header[0].decode()] = blob.decode("utf-8")
    return out


def pairs_from_lake(home: Path, limit: int) -> list[Pair]:
    """Rows of datasets.kernel_commits, if the lake has them."""
    lake = home / "lake.duckdb"
    if not lake.exists():
        return []
    import duckdb

    con = duckdb.connect(str(lake), read_only=True)
    try:
        found = con.execute(
            "SELECT count(*) FROM information_schema.tables "
            "WHERE table_schema = 'datasets' AND table_name = 'kernel_commits'"
        ).fetchone()
        if not found or not found[0]:
            return []
        rows = con.execute(
            "SELECT before_code, after_code FROM datasets.kernel_commits "
            "WHERE before_code IS NOT NULL AND after_code IS NOT NULL LIMIT ?",
            [limit],
        ).fetchall()
    finally:
        con.close()
    return [(b, a) for b, a in rows]


_WORDS = ["acc", "tile", "smem", "lane", "warp", "idx", "ptr", "scale", "val", "blk", "tid"]


def _synthetic_line(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.12:
        return ""
    if kind < 0.22:
        return rng.choice(["}", "  }", "    }", "#pragma unroll", "  __syncthreads();"])
    indent = " " * rng.choice([0, 2, 4, 6, 8])
    a, b = rng.sample(_WORDS, 2)
    return f"{indent}{a}_{rng.randrange(64)} = {b}[{rng.randrange(256)}] * {rng.random():.4f}f;"


def pairs_synthetic(n: int, seed: int, size: int = 20_000) -> list[Pair]:
    """Files of ~``size`` chars (sizes vary 0.25x-3x) with 1-8 random hunks each."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    for _ in range(n):
        target = int(size * rng.choice([0.25, 0.5, 1, 1, 1, 1.5, 3]))
        lines: list[str] = []
        while sum(len(x) + 1 for x in lines) < target:
            lines.append(_synthetic_line(rng))
        after = list(lines)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(after))
            span = rng.randint(1, 12)
            op = rng.random()
            if op < 0.3:
                del after[at : at + span]
            elif op < 0.6:
                after[at:at] = [_synthetic_line(rng) for _ in range(span)]
            else:
                after[at : at + span] = [_synthetic_line(rng) for _ in range(rng.randint(1, 12))]
        eol = "\r\n" if rng.random() < 0.02 else "\n"
        tail_b = "" if rng.random() < 0.03 else eol
        tail_a = "" if rng.random() < 0.03 else eol
        pairs.append((eol.join(lines) + tail_b, eol.join(after) + tail_a))
    return pairs


# --------------------------------------------------------------------------- completions


def _partial_after(before: str, after: str, rng: random.Random, noise: bool) -> str:
    """``after`` with a random subset of the real hunks, optionally one made-up line more."""
    a, b = split_lines(before), split_lines(after)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        take_new = tag != "equal" and rng.random() < 0.5
        out.extend(b[j1:j2] if take_new else a[i1:i2])
    if noise and out:
        out.insert(rng.randrange(len(out)), "  // tuned by the policy\n")
    text = "".join(out)
    return text if text != before else after


def completions_for(before: str, after: str, rng: random.Random) -> list[str]:
    """A GRPO-like group: the oracle, partial and noisy solutions, a miss, a malformed one."""
    oracle = oracle_edit(before, after)
    group = [
        "Here is the change:\n```cpp\n" + oracle + "```\n",
        oracle_edit(before, _partial_after(before, after, rng, noise=False)),
        oracle_edit(before, _partial_after(before, after, rng, noise=True)),
        oracle_edit(before, _partial_after(before, after, rng, noise=True)),
        "<<<<<<< SEARCH\nthis line is not in the file\n=======\nx\n>>>>>>> REPLACE\n",
        oracle.replace("=======\n", "", 1),
    ]
    return group


# --------------------------------------------------------------------------- reference


def reference_patch_reward(completion: str, before_code: str, after_code: str) -> float:
    """The straightforward version: unified_diff both ways, keep +/- lines, ratio."""
    try:
        predicted = apply_edits(before_code, parse_search_replace(completion))
    except (MalformedEdit, EditDoesNotApply):
        return -1.0

    def changed(old: str, new: str) -> list[str]:
        diff = difflib.unified_diff(io.StringIO(old).readlines(), io.StringIO(new).readlines(), n=0)
        return [
            line
            for i, line in enumerate(diff)
            if i >= 2 and not line.startswith("@@")  # skip the ---/+++ headers
        ]

    return difflib.SequenceMatcher(
        None, changed(before_code, predicted), changed(before_code, after_code)
    ).ratio()


# --------------------------------------------------------------------------- main


def _rates(
    runs: dict[str, Callable[[], list[float]]], count: int, repeats: int = 3
) -> dict[str, tuple[float, list[float]]]:
    """Rows/s of each run, best of ``repeats`` rounds; the runs take turns within a round
    so that load from other processes hits them alike."""
    best = dict.fromkeys(runs, float("inf"))
    scores: dict[str, list[float]] = {}
    for _ in range(repeats):
        for name, fn in runs.items():
            patch_mod._reference_changes.cache_clear()
            start = time.perf_counter()
            scores[name] = fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: (count / best[name], scores[name]) for name in runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git", type=Path, help="mine real perf commits from this repository")
    parser.add_argument("--rows", type=int, default=2000, help="pairs to load at most")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    home = os.environ.get("KERNELHOUSE_HOME")
    if args.git:
        source, pairs = f"git log of {args.git}", pairs_from_git(args.git, args.rows)
    elif home and (lake_pairs := pairs_from_lake(Path(home), args.rows)):
        source, pairs = f"datasets.kernel_commits in {home}", lake_pairs
    else:
        source, pairs = "synthetic ~20K-char files", pairs_synthetic(min(args.rows, 600), args.seed)
    if not pairs:
        print("no data", file=sys.stderr)
        return 1
    sizes = sorted(len(b) for b, _ in pairs)
    print(
        f"data: {source}: {len(pairs)} file pairs, before_code chars "
        f"median {statistics.median(sizes):.0f}, p90 {sizes[int(0.9 * (len(sizes) - 1))]}"
    )

    # Oracle figures over every pair.
    start = time.perf_counter()
    scores, exact = [], 0
    for before, after in pairs:
        completion = oracle_edit(before, after)
        scores.append(patch_reward(completion, before, after))
        with contextlib.suppress(MalformedEdit, EditDoesNotApply):
            exact += apply_edits(before, parse_search_replace(completion)) == after
    oracle_s = time.perf_counter() - start
    n = len(scores)
    full = sum(s == 1.0 for s in scores)
    near = sum(s >= 0.95 for s in scores)
    print(
        f"oracle: {full}/{n} = {full / n:.2%} score 1.0; {near / n:.2%} >= 0.95; "
        f"{n - near} below 0.95 (min {min(scores):.3f}); reproduces after_code on "
        f"{exact}/{n}; {n / oracle_s:.0f} pairs/s (oracle_edit + reward)"
    )

    # Speed on the median-size pairs.
    ordered = sorted(pairs, key=lambda p: len(p[0]))
    band = ordered[
        int(0.4 * len(ordered)) : max(int(0.6 * len(ordered)), int(0.4 * len(ordered)) + 1)
    ]
    rng = random.Random(args.seed)
    jobs = [(c, b, a) for b, a in band for c in completions_for(b, a, rng)]
    band_sizes = [len(b) for b, _ in band]
    print(
        f"speed set: {len(band)} median-size pairs ({min(band_sizes)}-{max(band_sizes)} chars), "
        f"{len(jobs)} completions"
    )

    def run_fast() -> list[float]:
        return [patch_reward(c, b, a) for c, b, a in jobs]

    def run_cold() -> list[float]:
        out = []
        for c, b, a in jobs:
            patch_mod._reference_changes.cache_clear()
            out.append(patch_reward(c, b, a))
        return out

    def run_reference() -> list[float]:
        return [reference_patch_reward(c, b, a) for c, b, a in jobs]

    rates = _rates({"fast": run_fast, "cold": run_cold, "reference": run_reference}, len(jobs))
    (fast_rate, fast_scores), (cold_rate, cold_scores), (ref_rate, ref_scores) = (
        rates["fast"],
        rates["cold"],
        rates["reference"],
    )
    mismatches = sum(x != y for x, y in zip(fast_scores, ref_scores, strict=True))
    mismatches += sum(x != y for x, y in zip(cold_scores, ref_scores, strict=True))
    valid = [s for s in fast_scores if s >= 0]
    print(
        f"patch_reward: {fast_rate:.0f} rows/s (group cache warm), {cold_rate:.0f} rows/s "
        f"(cache cleared per call); reference {ref_rate:.0f} rows/s; "
        f"speedup {fast_rate / ref_rate:.2f}x / {cold_rate / ref_rate:.2f}x"
    )
    print(
        f"scores identical to the reference: {mismatches == 0} "
        f"({mismatches} mismatches over {len(jobs)}); score mix: "
        f"{sum(s == -1 for s in fast_scores)} at -1, mean of the rest {statistics.fmean(valid):.3f}"
    )
    ok = mismatches == 0 and min(fast_rate, cold_rate) >= 200
    print("PASS" if ok else "FAIL: need identical scores and >= 200 rows/s")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
