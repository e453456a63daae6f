"""The code model's blind test on the online tier (issue 36, item 3): one scoring per version.

    .venv/bin/python benchmarks/codemodel_blind.py --before 0b9851e --after <frozen sha>

For each commit, its tree is exported to a temporary folder and that tree's
``benchmarks/sim_online_report.py`` runs there: the code model is fitted on the evidence
answers (``h100_answers.csv``) only, and scored on the online tier's answers
(``h100_online_answers.csv``, measured after code model 1.1.0 and never fitted): per
distinct timed kernel the model's time against the measured one, per session the speedup
the model gives the session's own baseline and best. The two reports are printed whole,
then the headline figures and the per-op table side by side. The label-policy line of a
version whose policy residuals were not refitted (``h100_cv_residuals.csv`` is the one
shipped) is the old policy's scales over the new model's times: not that version's policy.
CPU, ~3 minutes.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_KERNELS = re.compile(
    r"code model on (\d+) distinct timed kernels .*?([\d.]+), within 2x ([\d.]+%)"
)
_SPEEDUPS = re.compile(r"speedups of (\d+) sessions .*?model within 2x (\d+)/(\d+)")
_OP = re.compile(r"^\s{2}(\w+)\s+(\d+)\s+([\d.]+)\s+([\d.]+%)$")


def report(sha: str) -> str:
    """``sim_online_report.py``'s output on the tree of ``sha``."""
    with tempfile.TemporaryDirectory() as tmp:
        tar = subprocess.run(
            ["git", "-C", str(ROOT), "archive", sha], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=tar, check=True)
        out = subprocess.run(
            [sys.executable, "benchmarks/sim_online_report.py", "--gpu", "h100"],
            cwd=tmp,
            check=True,
            capture_output=True,
            text=True,
        )
    return out.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="commit of the old version")
    ap.add_argument("--after", required=True, help="commit of the new version (frozen)")
    a = ap.parse_args(argv)
    outs = {}
    for name, sha in (("before", a.before), ("after", a.after)):
        outs[name] = report(sha)
        print(f"===== {name} {sha} =====\n{outs[name]}")
    print(f"===== side by side: {a.before} | {a.after} =====")
    for pat in (_KERNELS, _SPEEDUPS):
        cells = [m.groups() if (m := pat.search(outs[n])) else () for n in ("before", "after")]
        print(f"  {cells[0]} | {cells[1]}")
    ops: dict[str, list[tuple[str, ...]]] = {}
    for name in ("before", "after"):
        for line in outs[name].splitlines():
            if m := _OP.match(line):
                ops.setdefault(m.group(1), []).append(m.groups()[1:])
    print("  per op: kernels, median |log err|, within 2x (before | after)")
    for op, cells in sorted(ops.items(), key=lambda kv: -float(kv[1][0][1])):
        print(f"    {op:24s} " + " | ".join(" ".join(c) for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
