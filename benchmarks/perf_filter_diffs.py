"""Does the commit's own diff close the title rule's gap? (issue 21, an experiment)

The PR description did not (``perf_filter_bodies.py``: round 4 chose the title rule alone).
The two blind readers judged from the file list and the diff, so the diff is the last signal
a miner has offline. Rules fixed **before any diff of rounds 4/5 was read for this purpose**
(written 2026-12-03, committed before the first run):

* ``code_perf``: the lines the commit adds to its kernel files (``RepoSpec.kernel_kind``)
  name at least ``MIN_TOKENS`` distinct optimisation mechanisms (``OPT_TOKENS``: launch and
  tiling parameters, async copies, tensor-core and TMA instructions, vector types, shuffles,
  pipelining, swizzles, persistent scheduling, fusion, cache hints);
* ``thin``: the commit adds fewer than ``MIN_KERNEL_LINES`` lines to kernel files (the title
  says perf, but no kernel code of substance changed: plumbing, flags, docs).

Three ways to combine them with the title rule:

====== ===============================================================
E      title rule, or (title rejected and ``code_perf``)    widen only
G      title rule, but a title-selected ``thin`` commit is vetoed      veto only
H      E with G's veto
====== ===============================================================

Round 4 chooses (best F1; it is development data for the title rule too), round 5 is held
out: every variant is printed on both, the headline is the variant chosen on round 4,
scored on round 5. Diffs come from the real clones (``perf_filter_sample.SOURCES``); nothing
is stored.

    .venv/bin/python benchmarks/perf_filter_diffs.py
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from dagster_project.mining.commits import perf_filter
from dagster_project.mining.commits.specs import DEFAULT_SPECS

sys.path.insert(0, str(Path(__file__).parent))
from bench_perf_filter import SAMPLE, report_errors, report_variants, subjects  # noqa: E402
from perf_filter_sample import SOURCES, source  # noqa: E402

ROUNDS = ("4", "5")
MIN_TOKENS = 3
MIN_KERNEL_LINES = 5
#: optimisation mechanisms as they are spelled in CUDA, Triton, CuTe and C++ kernel code
OPT_TOKENS = re.compile(
    r"num_warps|num_stages|\bBLOCK_[A-Z_]+|__launch_bounds__|cp\.async|cp_async|\bwgmma\b"
    r"|\btma\b|TMA|ldmatrix|stmatrix|__shfl\w*|vectori[sz]|\bfloat4\b|\bhalf2\b|bfloat162"
    r"|\bprefetch|pipelin\w*|autotun\w*|split_?k\b|persistent|swizzl\w*|#pragma unroll"
    r"|\bfus(?:e|ed|ion)\b|cache_modifier|evict_\w+|__ldg|warp_?spec\w*|multicast|\bpdl\b"
    r"|griddepcontrol|cudaGridDependencySynchronize",
    re.IGNORECASE,
)


def added_kernel_lines(repo: str, sha: str) -> list[str]:
    """The lines ``sha`` adds to files its repo's spec counts as kernel files."""
    spec = DEFAULT_SPECS[repo]
    out = subprocess.run(
        ["git", "-C", source(repo), "show", "--format=", "--unified=0", "--no-renames", sha],
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8", "replace")
    lines: list[str] = []
    keep = False
    for ln in out.split("\n"):
        if ln.startswith("+++ "):
            path = ln[6:] if ln.startswith("+++ b/") else ""
            keep = bool(path) and spec.kernel_kind(path) is not None
        elif keep and ln.startswith("+") and ln[1:].strip():
            lines.append(ln[1:])
    return lines


def signals(repo: str, sha: str) -> dict[str, bool]:
    """``code_perf`` and ``thin`` of one commit (see the module docstring)."""
    lines = added_kernel_lines(repo, sha)
    tokens = {m.group(0).lower() for ln in lines for m in OPT_TOKENS.finditer(ln)}
    return {"code_perf": len(tokens) >= MIN_TOKENS, "thin": len(lines) < MIN_KERNEL_LINES}


Variant = Callable[[bool, dict[str, bool]], bool]


def _e(title: bool, s: dict[str, bool]) -> bool:
    return title or s["code_perf"]


def _g(title: bool, s: dict[str, bool]) -> bool:
    return title and not s["thin"]


def _h(title: bool, s: dict[str, bool]) -> bool:
    return _e(title, s) and not (title and s["thin"])


VARIANTS: dict[str, Variant] = {"title": lambda title, s: title, "E": _e, "G": _g, "H": _h}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--errors", default="", help="list the errors of a variant on round 5")
    args = ap.parse_args()
    rows = [r for r in csv.DictReader(SAMPLE.open()) if r["round"] in ROUNDS]
    subj = subjects(rows, {r: source(r) for r in SOURCES})
    for r in rows:
        r["subject"] = subj[r["sha"]]
        r["title"] = perf_filter.match_title(r["subject"]) is not None
        r["signals"] = signals(r["repo"], r["sha"])
    for rnd in ROUNDS:
        part = [r for r in rows if r["round"] == rnd]
        print(f"round {rnd}: {len(part)} commits")
        chosen = report_variants(part, VARIANTS)
        if rnd == "4":
            print(f"  chosen on round 4 (best F1): {chosen}")
    if args.errors:
        report_errors(rows, VARIANTS[args.errors])


if __name__ == "__main__":
    main()
