"""Print round 8's commits for blind labelling (issue 41, 41e): nothing is written to disk.

In the hash order of ``label-order|sha`` (as round 7), each commit's repo, sha, subject,
message body (trailers dropped), ``--stat`` and the first lines of its diff (``-U1``, test
files last), never its stratum or any rule's verdict. Everything shown is read from the
clones at run time; only the labeller's own label and reason go into ``labels.csv``.

    .venv/bin/python benchmarks/title_round8/show.py [--start 0 --count 25 --lines 70]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from perf_filter_sample import source  # noqa: E402

TRAILERS = ("signed-off-by:", "co-authored-by:", "reviewed-by:", "co-authored-by")


def _git(repo: str, *args: str) -> str:
    out = subprocess.run(["git", "--git-dir", source(repo), *args], capture_output=True)
    return out.stdout.decode("utf-8", "replace")


def _diff(repo: str, sha: str, lines: int) -> str:
    """The first ``lines`` lines of the diff, non-test files first."""
    text = _git(repo, "show", "--format=", "-U1", "--no-renames", sha)
    files = text.split("\ndiff --git ")
    files = [f if f.startswith("diff --git ") else "diff --git " + f for f in files if f]
    files.sort(key=lambda f: "test" in f.split("\n", 1)[0])
    return "\n".join("\n".join(files).split("\n")[:lines])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=25)
    ap.add_argument("--lines", type=int, default=70)
    args = ap.parse_args()
    rows = list(csv.DictReader((HERE / "labels.csv").open()))
    rows.sort(key=lambda r: hashlib.sha256(f"label-order|{r['sha']}".encode()).hexdigest())
    for i, r in enumerate(rows[args.start : args.start + args.count], start=args.start):
        msg = _git(r["repo"], "log", "-1", "--format=%s%n%b", r["sha"]).strip().split("\n")
        body = [ln for ln in msg[1:] if not ln.lower().startswith(TRAILERS) and ln.strip()]
        print(f"=== #{i} {r['repo']} {r['sha']}\nTITLE: {msg[0]}")
        print("BODY: " + " / ".join(body)[:700])
        print(_git(r["repo"], "show", "--format=", "--stat=120", r["sha"]).rstrip()[-1500:])
        print(_diff(r["repo"], r["sha"], args.lines))


if __name__ == "__main__":
    main()
