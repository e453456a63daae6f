"""The kernelinfer export's measured_online config (issue 36, 36w): its own rows file and
statistics, loadable by name, with the default config's files byte for byte as they were."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from dagster_project.publish import export_kernelinfer
from dagster_project.publish.cards import parse_front_matter
from dagster_project.publish.simulated import ONLINE_CONFIG, ONLINE_FILE, ONLINE_STATS
from dagster_project.sim.kernelinfer import build_tasks, holdout_frame, session_frames
from dagster_project.sim.online_tier import OnlineTier, materialise
from dagster_project.storage.lake import Lake

#: The default config's files, which the online tier must leave untouched.
DEFAULT_FILES = ("batches/batch_000.jsonl", "sessions.jsonl", "tasks_holdout.jsonl", "stats.json")


def _modelled_lake(root: Path, tier: OnlineTier) -> Lake:
    """A lake holding the modelled sessions of the tier's tasks (the generator's own, in
    modelled mode: no oracle) and a few held-out specs."""
    from dagster_project.sim.kernelinfer import simulate_session
    from dagster_project.sim.online_tier import default_tasks

    lake = Lake(root / "lake.duckdb", str(root / "lake"))
    tasks = default_tasks()
    modelled = [simulate_session(tasks[s["session_id"]]) for s in tier.sessions]
    frame, _ = session_frames(modelled, shard=0)
    lake.write_partition("kernelinfer_sessions", "000", frame)
    lake.refresh_view("sim", "kernelinfer_sessions")
    _, holdout = build_tasks()
    lake.replace_table("sim", "kernelinfer_tasks_holdout", holdout_frame(holdout[:3]))
    return lake


def test_measured_online_is_its_own_config(tier: OnlineTier, tmp_path: Path) -> None:
    import datasets

    lake = _modelled_lake(tmp_path, tier)
    # opened as the assets are: a read their lineage does not declare fails here
    export = replace(lake, asset="kernelinfer_export")
    before = export_kernelinfer(export, tmp_path / "before")
    assert not (before.out_dir / ONLINE_CONFIG).exists()
    materialise(replace(lake, asset="kernelinfer_online"), tier)
    after = export_kernelinfer(export, tmp_path / "after")
    for name in DEFAULT_FILES:
        assert (after.out_dir / name).read_bytes() == (before.out_dir / name).read_bytes(), name
    rows = [json.loads(x) for x in (after.out_dir / ONLINE_FILE).read_text().splitlines()]
    assert after.rows[ONLINE_FILE] == len(rows) == len(tier.sessions)
    assert {r["measured_on"] for r in rows} == {"h100"}
    meta = parse_front_matter((after.out_dir / "README.md").read_text())
    configs = {c["config_name"]: c for c in meta["configs"]}
    assert configs[ONLINE_CONFIG]["data_files"] == [{"split": "train", "path": ONLINE_FILE}]
    assert ONLINE_CONFIG in {i["config_name"] for i in meta["dataset_info"]}
    loaded = datasets.load_dataset(
        str(after.out_dir), ONLINE_CONFIG, split="train", cache_dir=str(tmp_path / "hf")
    )
    assert sorted(loaded["session_id"]) == sorted(s["session_id"] for s in tier.sessions)


def test_the_card_renders_both_tiers_from_data(tier: OnlineTier, tmp_path: Path) -> None:
    lake = _modelled_lake(tmp_path, tier)
    materialise(lake, tier)
    out = export_kernelinfer(lake, tmp_path / "out").out_dir
    stats = json.loads((out / ONLINE_STATS).read_text())
    on, mo = stats["tiers"][ONLINE_CONFIG], stats["tiers"]["modelled"]
    assert on["sessions"] == mo["sessions"] == len(tier.sessions)
    readme = (out / "README.md").read_text()
    section = readme.split("## Measured online tier", 1)[1].split("\n## ", 1)[0]
    assert f"| sessions | {on['sessions']} | {mo['sessions']} |" in section
    assert f"| steps (median per session) | {on['steps']:,} (" in section
    for status in set(on["statuses"]) | set(mo["statuses"]):
        row = f"| `{status}` steps | {on['statuses'].get(status, 0):,} | "
        assert row + f"{mo['statuses'].get(status, 0):,} |" in section
    assert stats["evidence"] in section and "strict oracle" in section
    assert "`ptxas:` resource line" in section and "are modelled" in section
    # the online rows' own feedback gives the device's count and method of timed runs
    online = (out / ONLINE_FILE).read_text()
    assert "median of 200 runs" not in online and "graph replays" in online
    assert f'load_dataset("./kernelinfer", "{ONLINE_CONFIG}", split="train")' in readme
