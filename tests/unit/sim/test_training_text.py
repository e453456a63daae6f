"""Training text reads like a real harness (issue 39): no simulator internals in any message.

A model trained on these sessions reads every message; a table, asset, script or module
name of ours, a project macro or a phrase about the model behind the timings would teach
it the simulator, not the work. The banned vocabulary is built from the project itself
(the lineage declaration's assets and tables, the benchmark scripts, the simulator's
modules), so a new asset or script is banned without touching this test.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

import dagster_project
from dagster_project.settings import DEFAULT_SIM_SEED
from dagster_project.sim import kernelinfer as ki
from dagster_project.sim import kernelswarm as ks
from dagster_project.sim.feedback import MISMATCH, failure_report, unverified_line
from dagster_project.sim.ops import get_op
from dagster_project.sim.swarm.spec import CARD_OPS
from dagster_project.sim.tasks import held_out
from dagster_project.storage.lineage import ASSETS

ROOT = Path(dagster_project.__file__).resolve().parent.parent

#: Phrases of the generator that once reached the text (issue 39's census), besides names.
PHRASES = (
    "the time is modelled",
    "no execution evidence",
    "tuning:",
    "knobs:",
    "launch choices:",
    "kernelhouse",
    "dagster",
    "KH_",
)


def _names() -> set[str]:
    """Tables (``schema.table`` and the bare name), assets, benchmark scripts, sim modules."""
    out: set[str] = set()
    for asset, acc in ASSETS.items():
        out.add(asset)
        for table in (*acc.reads, *acc.writes):
            out.add(table)
            out.add(table.split(".", 1)[1])
    for script in (ROOT / "benchmarks").rglob("*.py"):
        out.add(f"{script.stem}.py")
        out.add(script.stem)
    for mod in (ROOT / "dagster_project" / "sim").rglob("*.py"):
        out.add(f"sim.{mod.stem}")
        out.add(f"sim/{mod.stem}")
        out.add(f"{mod.stem}.py")
    # a bare one-word stem (``run``, ``ops``) is a word of any English text, not a name
    return {n for n in out if "_" in n or "." in n or "/" in n}


def _trie(names: set[str]) -> str:
    """One pattern for all names, branching on each next character.

    Why not ``a|b|c``: Python's ``re`` tries every alternative at every position, and with
    ~280 names the grep of a small build took minutes (the suite's slowest test). A trie
    tries only the names sharing the characters read so far; longer names come first and a
    name ends only where no word character follows, as the plain alternation said."""
    root: dict[str, Any] = {}
    for name in names:
        node = root
        for ch in name:
            node = node.setdefault(ch, {})
        node[""] = {}

    def walk(node: dict[str, Any]) -> str:
        alts = [re.escape(ch) + walk(sub) for ch, sub in sorted(node.items()) if ch]
        if "" in node:
            alts.append(r"(?!\w)")
        return alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"

    return walk(root)


def _banned() -> re.Pattern[str]:
    words = [rf"(?<![\w.]){_trie(_names())}"]
    words += [re.escape(p) for p in PHRASES]
    return re.compile("|".join(words))


BANNED = _banned()


def _hits(texts: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for text in texts:
        for m in BANNED.finditer(text):
            out[m.group(0)] = out.get(m.group(0), 0) + 1
    return out


@pytest.fixture(scope="module")
def swarm_build() -> list[dict[str, Any]]:
    return ks.generate_swarm_shard(0, seed=7, n_episodes=68)


def test_the_ban_list_catches_what_the_old_text_said() -> None:
    """The census phrases of generator 1.9.0 are caught (so the grep below can fail)."""
    old = [
        "correctness: unverified - v0_rowloop has no execution evidence on sm_86 "
        "(sim.rung_verification); the time is modelled, the output was not checked",
        "measured: wrong_result at N=1 on the H200 (sim_verify_rungs): max_rel_err 1.07",
        "measured: fault of this source at this shape on H100 (sim_oracle)",
        "static_assert(kSmemBytes <= KH_SMEM_OPTIN_BYTES, ...)",
        "// tuning: BK=16 (medium tile)",
    ]
    assert all(BANNED.search(t) for t in old), [t for t in old if not BANNED.search(t)]
    assert not BANNED.search("max_abs_err 1.2e-03 (atol 1e-02, rtol 1e-02)")


def test_no_message_of_a_small_build_names_the_simulator(
    small_build: dict[str, Any], swarm_build: list[dict[str, Any]]
) -> None:
    infer = [m["content"] for s in small_build["sessions"] for m in s["messages"]]
    swarm = [m.get("content") or "" for e in swarm_build for m in e["messages"]]
    assert len(infer) > 1000 and len(swarm) > 1000
    assert _hits(infer) == {}, "kernelinfer"
    assert _hits(swarm) == {}, "kernelswarm"


def _dims(op: str, shape: dict[str, int]) -> tuple[str, int]:
    name, dims = get_op(op).out(shape)
    return name, math.prod(dims)


def test_a_measured_wrong_result_reports_this_kernels_output_at_this_shape(
    small_build: dict[str, Any], swarm_build: list[dict[str, Any]]
) -> None:
    """Every configuration-caused mismatch names the session's own output tensor and its
    element count at the session's shape (not another shape's run on another card)."""
    seen = 0
    for s in small_build["sessions"]:
        name, total = _dims(
            s["op"], json.loads(s["shape"]) if isinstance(s["shape"], str) else s["shape"]
        )
        for m in s["messages"][3::2]:
            if MISMATCH in m["content"]:
                seen += 1
                assert f"{name} [{total} values] {MISMATCH}" in m["content"], m["content"]
    for e in swarm_build:
        op = CARD_OPS[e["op"]][0]
        name, total = _dims(
            op, json.loads(e["shape"]) if isinstance(e["shape"], str) else e["shape"]
        )
        for m in e["messages"]:
            if MISMATCH in (m.get("content") or ""):
                seen += 1
                assert f"{name} [{total} values] {MISMATCH}" in m["content"], m["content"]
    assert seen > 0


def test_failure_reports_quote_only_the_cuda_error() -> None:
    err = (
        "AcceleratorError: CUDA error: an illegal memory access was encountered Search for "
        "`cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/"
    )
    text = failure_report(
        "out", (4, 8), None, f"fault at M=1 on the H200 (sim_verify_rungs): {err}"
    )
    assert text == (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        f"out [32 values] {MISMATCH}: no output was produced"
    )
    assert "0.25" in failure_report("out", (4, 8), 0.25, "")
    assert not BANNED.search(unverified_line("v3_tma", "sm_90a"))


def test_no_task_is_held_out_by_one_dataset_and_trained_on_by_the_other() -> None:
    """One holdout rule (``tasks.held_out``) for both generators, at the default seed and
    at another: training (op, gpu, shape) and held-out ones never meet across datasets."""
    for seed in (DEFAULT_SIM_SEED, 11):
        sessions, infer_hold = ki.build_tasks(seed, 400, 41)
        episodes, swarm_hold = ks.build_swarm_tasks(seed, 340)

        def key(t: Any) -> tuple[Any, ...]:
            return (t.op, t.gpu, t.shape_items)

        trained = {key(t) for t in sessions} | {key(sp.task) for sp in episodes}
        held = {key(t) for t in infer_hold} | {key(t) for t in swarm_hold}
        assert trained and held and not trained & held
        assert all(held_out(*k) for k in held) and not any(held_out(*k) for k in trained)


def test_the_holdout_rule_has_one_home() -> None:
    """Neither generator carves a holdout of its own: both call ``tasks.draw_split``."""
    sim = ROOT / "dagster_project" / "sim"
    for path in sim.rglob("*.py"):
        text = path.read_text()
        if path.name != "tasks.py":
            assert "def held_out" not in text and "split_holdout" not in text, path
    for gen in ("kernelinfer.py", "kernelswarm.py"):
        assert "draw_split(" in (sim / gen).read_text(), gen
