"""Agreement of the second reading with the first (issue 41): Cohen's kappa.

``second_reader.csv`` holds 20 rows of ``labels.csv`` (the first 20 in sha256 order of
``second-reader|id``), labelled again in reverse order from the diff alone (no title, no
list of the commit's other files, the first labels not consulted). Reported: kappa over
the five labels and over ``kernel_edit`` vs the rest.

    .venv/bin/python benchmarks/task_kind_blind/agreement.py
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

HERE = Path(__file__).parent


def kappa(pairs: list[tuple[str, str]]) -> float:
    """Cohen's kappa of two readers' labels over the same items."""
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[k] * second[k] for k in first) / (n * n)
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def main() -> None:
    first = {r["id"]: r["label"] for r in csv.DictReader((HERE / "labels.csv").open())}
    second = list(csv.DictReader((HERE / "second_reader.csv").open()))
    pairs = [(first[r["id"]], r["label"]) for r in second]
    binary = [(a == "kernel_edit", b == "kernel_edit") for a, b in pairs]
    agree = sum(a == b for a, b in pairs)
    print(f"rows {len(pairs)}; five labels: {agree}/{len(pairs)} agree, kappa {kappa(pairs):.2f}")
    bagree = sum(a == b for a, b in binary)
    bpairs = [(str(a), str(b)) for a, b in binary]
    print(f"kernel_edit vs rest: {bagree}/{len(pairs)} agree, kappa {kappa(bpairs):.2f}")
    for (a, b), r in zip(pairs, second, strict=True):
        if a != b:
            print(f"  {r['id']}: first {a}, second {b}")


if __name__ == "__main__":
    main()
