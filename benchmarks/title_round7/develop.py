"""Development figures of the perf filter (issue 41, 41d): rounds 1-6 pooled, IN SAMPLE.

Every earlier round (1-5 of ``perf_filter_sample.csv``, 857 commits, and round 6, 72) is
development data now: v8 was written on their errors. Printed: v7 and v8 per round and
pooled (tp/fp/fn, precision and recall with Wilson intervals), the errors of a rule
(``--errors v8``), and the two extra kinds of evidence measured for v8 and left out:

* the commit's message body: among the commits v8 turns down, how many perf and non-perf
  ones state a measured gain (a number with x/%, a speed-up figure, a time going down);
* the diff as the miner sees it before reading blobs: among the commits v8 keeps, the
  number of kernel files and whether any is added, for perf vs non-perf commits.

    .venv/bin/python benchmarks/title_round7/develop.py [--errors v7|v8]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_perf_filter import _fmt, score  # noqa: E402
from rules import DEV_FILES, evidence, labelled, rules  # noqa: E402

#: A measured gain in a message body (numbers only: the words alone are in every template).
GAIN_RE = re.compile(
    r"\d+(\.\d+)?\s*(x|×)(?!\w)"
    r"|\b\d+(\.\d+)?\s*%\s*(faster|speed|improv|higher|lower|less|reduc|better|gain|throughput"
    r"|latency)"
    r"|speed[\s-]?ups?\s*(of|:)?\s*~?\d"
    r"|\d+(\.\d+)?\s*(us|µs|ms)\s*(->|→|to)\s*\d",
    re.IGNORECASE,
)
#: Template and trailer lines of a message body (FlashInfer's PR template, sign-offs).
_BOILER_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_TRAILER_RE = re.compile(
    r"^\s*(signed-off-by|co-authored-by|reviewed-by|- \[[ x]\]|#+\s*\W*\s*(related issues"
    r"|pull request checklist|pre-commit|tests|reviewer))",
    re.IGNORECASE,
)


def body_text(message: str) -> str:
    """The message body without the PR template's comments, checklists and trailers."""
    lines = _BOILER_RE.sub(" ", message or "").splitlines()
    return "\n".join(s for s in lines if s.strip() and not _TRAILER_RE.match(s))


def _files_bucket(files: list[dict]) -> str:
    n = len(files)
    size = "1" if n == 1 else "2-3" if n <= 3 else "4-8" if n <= 8 else "9+"
    return f"{size} files{', adds one' if any(f['status'] == 'A' for f in files) else ''}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--errors", choices=["none", "v7", "v8"], default="none")
    args = ap.parse_args()
    ev = evidence()
    rows = labelled(DEV_FILES)
    for r in rows:
        r.update(subject=ev[r["sha"]]["subject"], _ev=ev[r["sha"]])
    fns = rules()
    print(f"rounds 1-6 pooled: {len(rows)} commits, in sample (v8 was written on them)")
    for name, fn in fns.items():
        for r in rows:
            r["pred"] = fn(r["subject"]) is not None
        for rnd in [*sorted({r["round"] for r in rows}), "all"]:
            part = rows if rnd == "all" else [r for r in rows if r["round"] == rnd]
            s = score(part)
            print(
                f"  {name} round {rnd:>3}: n {s['n']:>3} tp {s['tp']:>3} fp {s['fp']:>2} "
                f"fn {s['fn']:>2}  P {_fmt(s['precision'])}  R {_fmt(s['recall'])}"
            )
        if args.errors == name:
            for r in rows:
                if r["pred"] != (r["label"] == "perf"):
                    kind = "FP" if r["pred"] else "FN"
                    print(f"    {kind} r{r['round']} {r['repo']:10} {r['sha'][:10]} {r['reason']}")
    v8 = fns["v8"]
    body = Counter(
        (r["label"], bool(GAIN_RE.search(body_text(r["_ev"]["message"]))))
        for r in rows
        if v8(r["subject"]) is None
    )
    print("message body, commits v8 turns down: (label, states a measured gain) -> commits")
    for k in sorted(body):
        print(f"  {k}: {body[k]}")
    files = Counter(
        (r["label"], _files_bucket(r["_ev"]["files"])) for r in rows if v8(r["subject"])
    )
    print("kernel files, commits v8 keeps: (label, files) -> commits")
    for k in sorted(files):
        print(f"  {k}: {files[k]}")


if __name__ == "__main__":
    main()
