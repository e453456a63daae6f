"""How many kernelinfer sessions a build labels measured / modelled / unknown (issue 36, 36p).

Generates every shard of one build in this process (the shards' own ``generate_shard``), writes
the label columns on them as the sessions asset does (``sim/label_columns.attach_labels``: the
shipped answers and residuals, the code model fitted on those answers) and prints, as JSON,
the sessions per provenance, per reason kind (``by definition``: a modelled label of 1, nothing
beat the baseline), per (GPU, provenance), the steps per ``timing``, any
``label_violations`` and the seconds spent generating and labelling. GPU-less, ~30 s per
1,899 sessions here::

    .venv/bin/python benchmarks/sim_label_counts.py                  # build default seed 20260
    .venv/bin/python benchmarks/sim_label_counts.py --seed 20251129  # the measured tier's seed
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dagster_project.settings import DEFAULT_SIM_SEED  # noqa: E402
from dagster_project.sim import GENERATOR_VERSION  # noqa: E402
from dagster_project.sim.kernelinfer import DEFAULT_SESSIONS, generate_shard, n_shards  # noqa: E402
from dagster_project.sim.label_columns import (  # noqa: E402
    attach_labels,
    label_violations,
    shipped_evidence,
)


def _kind(session: dict[str, object]) -> str:
    """The session's provenance kind and, for unknown or modelled labels, why."""
    prov = str(session["speedup_provenance"]).partition(":")[0]
    reason = session["speedup_unknown_reason"]
    if reason:
        return f"{prov}: {str(reason).partition(':')[0]}"
    if prov == "modelled":
        return (
            "modelled: by definition" if session["speedup_error_scale"] == 0 else "modelled: scale"
        )
    return prov


def count(seed: int, sessions: int) -> dict[str, object]:
    """The label figures of one build (seed, size) generated here."""
    t0 = time.perf_counter()
    shipped_evidence("h100")  # the code model fit, once (counted apart)
    fit_s = time.perf_counter() - t0
    prov: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    by_gpu: collections.Counter[str] = collections.Counter()
    timing: collections.Counter[str] = collections.Counter()
    bad: list[str] = []
    gen_s = label_s = 0.0
    for shard in range(n_shards(sessions)):
        t1 = time.perf_counter()
        rows = generate_shard(shard, seed=seed, n_sessions=sessions)
        t2 = time.perf_counter()
        attach_labels(rows)
        label_s += time.perf_counter() - t2
        gen_s += t2 - t1
        for s in rows:
            p = str(s["speedup_provenance"]).partition(":")[0]
            prov[p] += 1
            kinds[_kind(s)] += 1
            by_gpu[f"{s['gpu']} {p}"] += 1
            for step in s["trace"]:
                timing[str(step["timing"])] += 1
            bad += label_violations(s)
    return {
        "generator": GENERATOR_VERSION,
        "seed": seed,
        "sessions": sessions,
        "provenance": dict(prov),
        "kinds": dict(sorted(kinds.items())),
        "by_gpu": dict(sorted(by_gpu.items())),
        "step_timing": dict(timing),
        "violations": bad[:10],
        "seconds": {
            "fit": round(fit_s, 1),
            "generate": round(gen_s, 1),
            "label": round(label_s, 1),
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seed", type=int, default=DEFAULT_SIM_SEED)
    ap.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS)
    a = ap.parse_args()
    print(json.dumps(count(a.seed, a.sessions), indent=1))


if __name__ == "__main__":
    main()
