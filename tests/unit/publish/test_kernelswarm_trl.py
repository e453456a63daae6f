"""The kernelswarm card's TRL snippet (issue 34) runs on a real export: episodes from the
generator (``sim.shards.kernelswarm_shard``), exported (``export_kernelswarm``), loaded with
``datasets`` as the card says, and the snippet's data half run as written, up to the trainer
(TRL is not a dependency). The pairs are DPOTrainer's standard preference format, and each
chosen kernel was rewarded above its rejected one by the environment's own results."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from dagster_project.publish import export_kernelswarm
from dagster_project.sim.shards import kernelswarm_shard
from dagster_project.storage.lake import Lake

SEED = 11


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("swarm-trl")
    lake = Lake(root / "lake.duckdb", str(root / "lake"))
    kernelswarm_shard(lake, "000", seed=SEED, n_episodes=8)
    out = root / "kernelswarm"
    export_kernelswarm(lake, out)
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    return out, rows


def test_the_cards_trl_snippet_runs_on_the_export(
    exported: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    import datasets

    out, rows = exported
    readme = (out / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    for block in blocks:
        ast.parse(block)
    (snippet,) = [b for b in blocks if "DPOTrainer" in b]
    data_half, trainer_half = snippet.split("from trl import")
    assert "DPOTrainer(" in trainer_half and "train_dataset=pairs" in trainer_half

    episodes = datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path))
    space: dict[str, Any] = {"episodes": episodes}
    exec(compile(data_half, "kernelswarm card", "exec"), space)  # noqa: S102 - our card
    pairs = space["pairs"]
    assert pairs.column_names == ["prompt", "chosen", "rejected"]
    assert 0 < pairs.num_rows <= len(rows)

    # The environment's rewards, read from the export's JSON directly.
    rewards: dict[str, list[float]] = {}
    for r in rows:
        sent = {}
        for m in r["messages"]:
            if m["kind"] == "candidate":
                sent[(m["sender"], m["params"])] = m["content"]
            elif m["kind"] == "result" and (m["recipient"], m["params"]) in sent:
                rewards.setdefault(sent[(m["recipient"], m["params"])], []).append(m["reward"])
    assert rewards, "no candidate/result pairs in the export"
    for p in pairs:
        assert p["prompt"].startswith("Write a fast ") and p["chosen"] != p["rejected"]
        assert max(rewards[p["chosen"]]) > min(rewards[p["rejected"]])
