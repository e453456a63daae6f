"""The config-prediction benchmark over the shipped latency tables (issue 38).

    python benchmarks/config_predict.py          # every baseline on every split
    python benchmarks/config_predict.py --cv     # also: how KNN_K was chosen (training shapes only)

Runs on a machine without a GPU or a lake: it reads the measured batches shipped in
``dagster_project/data/measured/`` and prints every baseline's regret (mean, p90, share
of exact picks, failed picks, nearest-neighbour fallbacks) on each split. The task, the
scoring and the splits are documented in ``dagster_project/rewards/predict.py``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dagster_project.rewards.predict import (  # noqa: E402
    KNN_K,
    SPLIT_VERSION,
    benchmark,
    cv_knn,
    shipped_tasks,
    split_sizes,
    splits,
)


def main() -> None:
    started = time.perf_counter()
    tasks = shipped_tasks()
    gpus = sorted({t.measured_on for t in tasks})
    print(f"tasks: {len(tasks)} latency tables on {', '.join(gpus)} (split rules {SPLIT_VERSION})")
    exhaustive = sum(t.exhaustive for t in tasks)
    skewed = sum(t.routing != "uniform" for t in tasks)
    print(
        f"  regret against: the exhaustive optimum in {exhaustive} tables, the best of a "
        f"partial table in {len(tasks) - exhaustive}; skewed-routing tables: {skewed}"
    )
    for name, (train, test) in split_sizes(tasks).items():
        print(f"  {name}: train {train}, test {test} (held out)")
    if len(gpus) < 2:
        print("  held_out_gpu: no split (tables of one GPU only)")
    print()
    print(
        f"{'split':<36} {'predictor':<22} {'n':>5} {'mean':>8} {'p90':>8} {'exact':>6} "
        f"{'fail':>5} {'fallbk':>6}"
    )
    for s in benchmark(tasks):
        print(
            f"{s.split:<36} {s.predictor:<22} {s.n:>5} {s.mean_regret:>8.2%} "
            f"{s.p90_regret:>8.2%} {s.zero_regret_share:>6.1%} {s.failed:>5} {s.fallback:>6}"
        )
    if "--cv" in sys.argv:
        train = splits(tasks)[0].train
        print(f"\nknn_moves k by 4-fold CV over held_out_shape's {len(train)} training tables:")
        for k, r in cv_knn(train, (3, 5, 10, 20, 40)).items():
            print(f"  k={k:<3} mean regret {r:.2%}" + ("  <- KNN_K" if k == KNN_K else ""))
    print(f"\n({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    main()
