"""Every simulated export loads with ``datasets`` whatever ops its files hold.

The lakes here are filled with the real simulator's output (not the hand-made rows of
``lakes.py``): shards whose sessions and episodes cover different ops, so their ``shape``
keys, trace ``params`` and message fields differ from file to file, which is exactly what
broke ``load_dataset`` on the default-size kernelswarm export. The card metadata is
checked with ``huggingface_hub``'s own ``DatasetCard`` parser, offline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dagster_project.publish import export_kernelinfer, export_kernelswarm
from dagster_project.publish.features import features_yaml
from dagster_project.settings import DEFAULT_SIM_SEED
from dagster_project.sim import kernelinfer, kernelswarm
from dagster_project.storage.lake import Lake
from tests.unit.publish import lakes

SEED = DEFAULT_SIM_SEED


def _distinct_op_tasks(n_per_shard: int, shards: int) -> list[list[Any]]:
    """Session tasks, one op per task and a different set of ops in every shard, chosen
    so that at least two shards have shape keys no other shard has."""
    tasks, _ = kernelinfer.build_tasks(seed=SEED, n_sessions=kernelinfer.DEFAULT_SESSIONS)
    by_keys: dict[tuple[str, ...], Any] = {}
    for t in tasks:
        by_keys.setdefault(tuple(sorted(t.shape)), t)
    picked = list(by_keys.values())[: n_per_shard * shards]
    return [picked[i * n_per_shard : (i + 1) * n_per_shard] for i in range(shards)]


@pytest.fixture(scope="module")
def real_infer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Lake, Path, list[set[str]]]:
    root = tmp_path_factory.mktemp("real-infer")
    lake = lakes.new_lake(root)
    keys_per_shard = []
    for shard, shard_tasks in enumerate(_distinct_op_tasks(2, 3)):
        sessions = [kernelinfer.simulate_session(t, SEED) for t in shard_tasks]
        keys_per_shard.append({k for s in sessions for k in s["shape"]})
        frame, _steps = kernelinfer.session_frames(sessions, shard=shard)
        lake.write_partition("kernelinfer_sessions", f"{shard:03d}", frame)
    lake.refresh_view("sim", "kernelinfer_sessions")
    _, holdout = kernelinfer.build_tasks(seed=SEED, n_sessions=kernelinfer.DEFAULT_SESSIONS)
    lake.replace_table("sim", "kernelinfer_tasks_holdout", kernelinfer.holdout_frame(holdout[:7]))
    out = root / "kernelinfer"
    export_kernelinfer(lake, out)
    return lake, out, keys_per_shard


@pytest.fixture(scope="module")
def real_swarm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Lake, Path, list[dict[str, Any]]]:
    """130 real episodes (two batch files; batches follow episode_id, which starts with
    the op, so the two files hold different ops)."""
    root = tmp_path_factory.mktemp("real-swarm")
    lake = lakes.new_lake(root)
    specs, holdout = kernelswarm.build_swarm_tasks(SEED, 130)
    episodes = [kernelswarm.simulate_episode(s, SEED) for s in specs]
    for shard in (0, 1):
        part = episodes[shard * 100 : (shard + 1) * 100]
        ep_df, _agents, _msgs = kernelswarm.episode_frames(part, shard)
        lake.write_partition("kernelswarm_episodes", f"{shard:03d}", ep_df)
    lake.refresh_view("sim", "kernelswarm_episodes")
    lake.replace_table("sim", "kernelswarm_tasks_holdout", kernelswarm.swarm_holdout_frame(holdout))
    out = root / "kernelswarm"
    export_kernelswarm(lake, out)
    return lake, out, episodes


def _ops(path: Path) -> set[str]:
    return {json.loads(line)["op"] for line in path.read_text().splitlines()}


def test_fixture_files_really_differ(real_infer, real_swarm) -> None:
    _lake, out, keys = real_infer
    assert len(list((out / "batches").iterdir())) == 3
    assert all(keys[i] - set().union(*(keys[:i] + keys[i + 1 :])) for i in range(2))
    _lake, out, _eps = real_swarm
    first, second = (_ops(out / "batches" / f"batch_00{i}.jsonl") for i in (0, 1))
    assert first and second and first != second


@pytest.fixture(scope="module")
def own_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache of this module's own: ``datasets`` keys a local folder's cache by the
    folder's name and its files' metadata, so two exports both named ``kernelinfer`` in
    one shared cache could be served each other's rows."""
    return tmp_path_factory.mktemp("hf-cache-exports-load")


def _load(path: str, hf_cache: Path, *args: str, **kwargs: Any):  # noqa: ANN202
    import datasets

    return datasets.load_dataset(path, *args, cache_dir=str(hf_cache), **kwargs)


@pytest.mark.parametrize("which", ["kernelinfer", "kernelswarm"])
def test_every_config_and_the_merged_file_load(which, real_infer, real_swarm, own_cache) -> None:
    hf_cache = own_cache
    import datasets

    lake, out, _ = real_infer if which == "kernelinfer" else real_swarm
    unit, key = ("sessions", "session_id") if which == "kernelinfer" else ("episodes", "episode_id")
    lines = [json.loads(line) for line in (out / f"{unit}.jsonl").read_text().splitlines()]
    default = _load(str(out), hf_cache, split="train")
    assert default.num_rows == len(lines)
    assert sorted(default[key]) == sorted(r[key] for r in lines)
    # The declared features are the schema `datasets` used, column for column.
    card = _card_meta(out)
    info = {i["config_name"]: i for i in card["dataset_info"]}
    assert default.features._to_yaml_list() == info["default"]["features"]
    row = default.sort(key)[0]
    want = min(lines, key=lambda r: r[key])
    assert row == want  # every value as written, nested lists included
    assert isinstance(json.loads(row["shape"]), dict)
    holdout = _load(str(out), hf_cache, "tasks_holdout", split="test")
    assert (
        holdout.num_rows
        == lake.query(f"SELECT count(*) AS n FROM sim.{which}_tasks_holdout")["n"][0]
        > 0
    )
    assert "prompt" not in holdout.column_names
    # The merged file on its own: inferred, and with the card's features.
    merged = _load("json", hf_cache, data_files=str(out / f"{unit}.jsonl"), split="train")
    assert merged.num_rows == len(lines)
    features = datasets.Features._from_yaml_list(info["default"]["features"])
    typed = _load(
        "json", hf_cache, data_files=str(out / f"{unit}.jsonl"), split="train", features=features
    )
    assert typed.features == default.features


def _card_meta(out: Path) -> dict[str, Any]:
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(out / "README.md")
    return card.data.to_dict()


@pytest.mark.parametrize("which", ["kernelinfer", "kernelswarm"])
def test_card_metadata_parses_with_huggingface_hub(which, real_infer, real_swarm) -> None:
    """The Hub's own card parser and ``datasets``' readers of it accept the metadata
    (offline: ``DatasetCard.validate`` would ask the Hub)."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    _lake, out, _ = real_infer if which == "kernelinfer" else real_swarm
    card = DatasetCard.load(out / "README.md")
    assert card.data.license == "mit" and card.data.pretty_name
    configs = MetadataConfigs.from_dataset_card_data(card.data)
    assert set(configs) == {"default", "tasks_holdout"}
    infos = DatasetInfosDict.from_dataset_card_data(card.data)
    assert set(infos) == {"default", "tasks_holdout"}
    assert all(info.features is not None for info in infos.values())


def test_features_match_datasets_own_conversion(real_infer, real_swarm) -> None:
    import datasets
    import pyarrow as pa

    for lake, _out, _ in (real_infer, real_swarm):
        for table in ("kernelinfer_sessions", "kernelswarm_episodes"):
            if not lake.table_exists("sim", table):
                continue
            with lake.connect(read_only=True) as con:
                schema = con.sql(f"SELECT * FROM sim.{table} LIMIT 0").to_arrow_table().schema
            assert (
                features_yaml(schema) == datasets.Features.from_arrow_schema(schema)._to_yaml_list()
            )
    odd = pa.schema(
        [("t", pa.timestamp("us", tz="UTC")), ("d", pa.date32()), ("f", pa.list_(pa.float32()))]
    )
    assert features_yaml(odd) == datasets.Features.from_arrow_schema(odd)._to_yaml_list()


def test_an_arrow_type_without_a_feature_is_named() -> None:
    import pyarrow as pa

    from dagster_project.publish import ExportError

    with pytest.raises(ExportError, match="column m.v"):
        features_yaml(pa.schema([("m", pa.struct([("v", pa.map_(pa.string(), pa.int64()))]))]))


def test_kernel_opt_rl_card_declares_each_configs_schema(opt_export, own_cache) -> None:
    """The Parquet export's card: parsed by the Hub's parser, features per config equal
    to the files' own schema as ``datasets`` reads them."""
    import datasets
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(opt_export.out_dir / "README.md")
    infos = DatasetInfosDict.from_dataset_card_data(card.data)
    assert set(infos) == {"tuned_configs", "kernel_commits"}
    for subset, info in infos.items():
        ds = datasets.load_dataset(
            str(opt_export.out_dir), subset, split="test", cache_dir=str(own_cache)
        )
        assert ds.features == info.features
