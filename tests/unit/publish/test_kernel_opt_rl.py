"""kernel-opt-rl export: layout, `datasets` loading, card figures against the lake, atomicity."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from dagster_project.publish import (
    ExportError,
    ExportReport,
    data_file,
    exploits,
    export_kernel_opt_rl,
    kernel_opt_rl_stats,
    read_snapshot,
)
from dagster_project.publish import kernel_opt_rl as module
from dagster_project.publish.atomic import atomic_export_dir
from dagster_project.publish.cards import parse_front_matter, render_card
from dagster_project.storage.lake import Lake
from tests.unit.publish import lakes

TUNED_COLUMNS = [
    "id",
    "prompt",
    "best_config",
    "kernel",
    "kernel_source",
    "repo",
    "config_path",
    "loaded_at_runtime",
    "not_loaded_reason",
    "copied_from",
    "device_name",
    "gpu",
    "dtype",
    "E",
    "N",
    "K",
    "block_shape",
    "M",
    "triton_version",
    "candidate_models",
    "default_config",
    "config_pr_url",
    "config_pr_gains",
    "speedup_vs_default",
    "license",
    "snapshot_commit",
]
COMMIT_COLUMNS = [
    "id",
    "repo",
    "sha",
    "pr_number",
    "pr_url",
    "title",
    "rule",
    "authored_at",
    "path",
    "language",
    "before_code",
    "after_code",
    "diff",
    "prompt",
    "models_mentioned",
    "hardware_mentioned",
    "hardware_from_code",
    "speedup_claims",
    "pr_body",
    "gains",
    "kernel_speedup",
    "e2e_speedup",
    "license",
    "touches_kernel_body",
    "touches_cpu_kernel",
    "is_binding_file",
    "reverted_by",
    "duplicate_of",
    "task_kind",
    "task_kind_reason",
    "exec_status",
    "exec_reason",
    "executed",
    "equivalent",
    "measured_kernel_speedup",
    "measured_kernel_speedup_ci_lo",
    "measured_kernel_speedup_ci_hi",
    "measured_kernel_significant",
    "measured_host_speedup",
    "measured_host_speedup_ci_lo",
    "measured_host_speedup_ci_hi",
    "measured_host_significant",
    "exec_toolchain",
]


# -- helpers: the card read back as numbers -----------------------------------------------------
def _readme(report: ExportReport) -> str:
    return (report.out_dir / "README.md").read_text(encoding="utf-8")


def _section(readme: str, title: str) -> str:
    start = readme.index(f"## `{title}`")
    end = readme.find("\n## ", start + 1)
    return readme[start:end]


def _row(section: str, label: str) -> str:
    match = re.search(rf"^\| {re.escape(label)} \| (.*) \|$", section, re.M)
    assert match, f"no card row {label!r}"
    return match.group(1)


def _ints(text: str) -> list[int]:
    return [int(x.replace(",", "")) for x in re.findall(r"(?<![\w.])\d[\d,]*(?![\d.]*×)", text)]


def _speedups(text: str) -> list[str]:
    return re.findall(r"(\d+\.\d+)×", text)


def _x(values: pl.Series, q: float) -> str:
    return f"{values.drop_nulls().quantile(q, interpolation='linear'):.2f}"


def _has_gains(value: str | None) -> bool:
    return bool(value) and len(json.loads(value)) > 0


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): _sha(p) for p in sorted(root.rglob("*")) if p.is_file()}


# -- layout -----------------------------------------------------------------------------------
def test_layout_and_counts(opt_export: ExportReport, opt_lake: Lake) -> None:
    out = opt_export.out_dir
    files = set(_tree(out))
    expected_data = {
        data_file(s, sp) for s in ("tuned_configs", "kernel_commits") for sp in ("train", "test")
    }
    assert expected_data <= files
    assert {
        "README.md",
        "code/reward.py",
        "licenses/vllm/LICENSE",
        "licenses/flashinfer/NOTICE",
    } <= files
    assert (out / "code/reward.py").read_text() == lakes.REWARD_MODULE
    assert (out / "licenses/flashinfer/NOTICE").read_bytes() == lakes.LICENSES["flashinfer"][
        "NOTICE"
    ]
    counts = opt_lake.query(
        "SELECT 'tuned_configs' AS subset, split, count(*) AS n FROM datasets.tuned_configs "
        "GROUP BY ALL "
        "UNION ALL SELECT 'kernel_commits', split, count(*) FROM datasets.kernel_commits "
        "GROUP BY ALL"
    )
    for subset, split, n in counts.iter_rows():
        assert opt_export.rows[data_file(subset, split)] == n
    assert opt_export.sizes == {k: (out / k).stat().st_size for k in files}
    # Nothing is left beside the export but its lock file.
    assert sorted(p.name for p in out.parent.iterdir()) == [f".{out.name}.lock", out.name]


def test_front_matter_configs(opt_export: ExportReport) -> None:
    meta = parse_front_matter(_readme(opt_export))
    assert meta["license"] == "apache-2.0"
    assert "kernel-optimization" in meta["tags"]
    configs = {c["config_name"]: c["data_files"] for c in meta["configs"]}
    assert configs == {
        subset: [
            {"split": "train", "path": data_file(subset, "train")},
            {"split": "test", "path": data_file(subset, "test")},
        ]
        for subset in ("tuned_configs", "kernel_commits")
    }


@pytest.mark.parametrize(
    ("subset", "split", "columns"),
    [("tuned_configs", "train", TUNED_COLUMNS), ("kernel_commits", "test", COMMIT_COLUMNS)],
)
def test_load_dataset_like_the_card(
    opt_export: ExportReport,
    opt_lake: Lake,
    hf_cache: Path,
    subset: str,
    split: str,
    columns: list[str],
) -> None:
    import datasets

    ds = datasets.load_dataset(
        str(opt_export.out_dir), subset, split=split, cache_dir=str(hf_cache)
    )
    assert ds.column_names == columns
    expected = opt_lake.read_table("datasets", subset).filter(pl.col("split") == split)
    assert ds.num_rows == expected.height
    assert sorted(ds["id"]) == sorted(expected["id"].to_list())
    # The card's own snippet (with the local path) names the subsets it loads.
    assert f'load_dataset("./kernel-opt-rl", "{subset}", split="train")' in _readme(opt_export)


def test_parquet_rows_equal_the_lake(opt_export: ExportReport, opt_lake: Lake) -> None:
    lake_rows = opt_lake.read_table("datasets", "tuned_configs").filter(pl.col("split") == "test")
    shipped = pl.read_parquet(opt_export.out_dir / data_file("tuned_configs", "test"))
    assert shipped.columns == TUNED_COLUMNS
    assert shipped.sort("id").equals(lake_rows.drop("split").select(TUNED_COLUMNS).sort("id"))


# -- card figures equal the lake (computed here independently, with polars) ---------------------
def test_tuned_configs_card_figures(opt_export: ExportReport, opt_lake: Lake) -> None:
    tc = opt_lake.read_table("datasets", "tuned_configs")
    sec = _section(_readme(opt_export), "tuned_configs")
    train, test = (tc.filter(pl.col("split") == s).height for s in ("train", "test"))
    assert _ints(_row(sec, "rows")) == [tc.height, train, test]
    assert _ints(_row(sec, "tuned config files")) == [
        tc.select("repo", "config_path").unique().height
    ]
    copied = tc.filter(pl.col("copied_from").is_not_null())
    assert copied.height > 0
    assert _ints(_row(sec, "copied config files")) == [
        copied.select("repo", "config_path").unique().height,
        copied.height,
        copied.filter(pl.col("split") == "test").height,
    ]
    assert _ints(_row(sec, "GPUs"))[0] == tc["gpu"].n_unique()
    assert _ints(_row(sec, "M (tokens)")) == [tc["M"].min(), tc["M"].max()]
    dtypes = dict(tc.group_by("dtype").len().iter_rows())
    assert _row(sec, "dtypes") == ", ".join(
        f"{d} ({n})" for d, n in sorted(dtypes.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    for kernel in tc["kernel"].unique():
        assert f"`{kernel}`" in _row(sec, "kernels")

    gains = _row(sec, "documented gains")
    prs = tc.filter(pl.col("config_pr_url").is_not_null())
    with_tables = prs.filter(
        pl.col("config_pr_gains").map_elements(_has_gains, return_dtype=pl.Boolean)
    )
    documented = tc.filter(pl.col("speedup_vs_default").is_not_null())
    assert _ints(gains) == [
        prs["config_pr_url"].n_unique(),
        with_tables["config_pr_url"].n_unique(),
        documented.height,
        documented.select("repo", "config_path").unique().height,
    ]
    s = tc["speedup_vs_default"]
    assert _speedups(gains) == [_x(s, 0.5), _x(s, 0.1), _x(s, 0.9)]


def test_kernel_commits_card_figures(opt_export: ExportReport, opt_lake: Lake) -> None:
    kc = opt_lake.read_table("datasets", "kernel_commits")
    sec = _section(_readme(opt_export), "kernel_commits")
    train, test = (kc.filter(pl.col("split") == s).height for s in ("train", "test"))
    assert _ints(_row(sec, "rows")) == [
        kc.height,
        train,
        test,
        kc["pr_url"].drop_nulls().n_unique(),
        kc.select("repo", "sha").unique().height,
    ]
    languages = dict(kc.group_by("language").len().iter_rows())
    assert _row(sec, "languages") == ", ".join(
        f"{lang} ({n})" for lang, n in sorted(languages.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    first, last = kc["authored_at"].min(), kc["authored_at"].max()
    assert _row(sec, "date range") == f"{first:%Y-%m} → {last:%Y-%m}"
    test_from = kc.filter(pl.col("split") == "test")["authored_at"].min()
    assert f"({test_from:%Y-%m-%d} onward)" in sec

    gains = _row(sec, "documented gains")
    with_gains = kc.filter(pl.col("gains").map_elements(_has_gains, return_dtype=pl.Boolean))
    counts = _ints(gains)
    assert counts == [
        with_gains["pr_url"].drop_nulls().n_unique(),
        with_gains.height,
        kc["kernel_speedup"].drop_nulls().len(),
        kc["e2e_speedup"].drop_nulls().len(),
    ]
    k, e = kc["kernel_speedup"], kc["e2e_speedup"]
    assert _speedups(gains) == [
        _x(k, 0.5),
        _x(k, 0.1),
        _x(k, 0.9),
        _x(e, 0.5),
        _x(e, 0.1),
        _x(e, 0.9),
    ]


def test_licences_and_snapshot_in_card(opt_export: ExportReport, opt_lake: Lake) -> None:
    readme = _readme(opt_export)
    kc = opt_lake.read_table("datasets", "kernel_commits")
    for licence, n in kc.group_by("license").len().iter_rows():
        assert f"| `kernel_commits` | {licence} | {n:,} |" in readme
    heads = opt_lake.read_table("raw", "repo_heads")
    for repo, sha, date, source in heads.select(
        "repo", "head_sha", "head_date", "source"
    ).iter_rows():
        assert f"| {repo} | `{sha}` | {date} |" in readme
        assert source not in readme  # local clone paths are nobody's business
    for name in ("licenses/vllm/LICENSE", "licenses/sglang/LICENSE", "licenses/flashinfer/NOTICE"):
        assert f"`{name}`" in readme


def test_stats_dict_is_what_the_card_shows(opt_export: ExportReport, opt_lake: Lake) -> None:
    fresh = kernel_opt_rl_stats(opt_lake)
    assert {k: v for k, v in opt_export.stats.items() if k != "snapshot"} == fresh
    assert opt_export.stats["snapshot"] == read_snapshot(opt_lake)


# -- the exploit suite on the cards (issue 37) --------------------------------------------------
SUITE_CSV = exploits.RECORDS / "results_cpu.csv"


def _suite_classes(configs_only: bool) -> list[str]:
    """Read here with ``csv`` (not through the publish module): the record's exploit classes."""
    with SUITE_CSV.open(newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r["cls"] != "reference solution"]
    return sorted({r["cls"] for r in rows if not configs_only or r["target"].startswith("config")})


def _table_classes(card: str, header: str) -> list[str]:
    """The first column of the Markdown table whose header line is ``header``."""
    block = card[card.index(header) :].split("\n\n", 1)[0].splitlines()[2:]
    return sorted(line.split(" | ")[0].removeprefix("| ") for line in block)


_CLASS_HEADER = "| class | what it tried (first exploit) | caught by | exploits earning nothing |"


def test_kernel_opt_rl_card_carries_the_suite_and_the_open_classes(
    opt_export: ExportReport,
) -> None:
    card = _readme(opt_export)
    assert _table_classes(card, _CLASS_HEADER) == _suite_classes(configs_only=False)
    assert "| dropped split-K partial sums | claims SPLIT_K=8" in card
    # heldout4/heldout5 from their records: the earners, the repeat, every group on both machines
    assert "| `heldout4` | numpy | CPU | 1.6.0 | 2 | 2, 3 of 25 |" in card
    h100 = "| `heldout4` | numpy | H100 | 1.6.0 | 1 | 1 of 25 | h4n-module-getattr | 6 of 6 |"
    assert h100 in card
    for kind, n in (("numpy", 23), ("torch", 8), ("config", 8)):
        for machine in ("CPU", "H100"):
            assert f"| `heldout5` | {kind} | {machine} | 1.6.1 |" in card
            assert f"| 0 of {n} | — |" in card
    open_line = card[card.index("Open: ") :].split("\n\n", 1)[0]
    for phrase in ("`ast` scanner", "`mutated`", "last replay", "shared memory", "CUDA-torch"):
        assert phrase in open_line, phrase
    assert "guard 1.6.0's every-timed-call check is not in its runner" not in card  # stale


def test_measured_configs_card_carries_the_config_defences() -> None:
    class AnyStats(dict):  # the lake's figures are tested with the asset; any value here
        def __getattr__(self, name: str) -> int:
            return 1

    context = {"s": AnyStats(), "by_kernel": [], "load_path": "./measured_configs", "repeats": []}
    card = render_card("measured_configs.md.j2", {}, {**context, **exploits.card_context()})
    configs = _suite_classes(configs_only=True)
    assert configs and _table_classes(card, _CLASS_HEADER) == configs
    assert "| `heldout3` | CPU | 1.4.0 | 1 | 2 of 10 | h3c-unclosed-think, h3c-whole-p" in card
    assert "| `heldout` | CPU | 1.0.0 | 1 | 0 of 16 | — | 10 of 12 | held out |" in card
    held = [ln for ln in card.splitlines() if ln.startswith("| `") and ln.endswith("| held out |")]
    assert len(held) == 8  # heldout and heldout3 on the CPU; heldout2, 4, 5 on the CPU and H100
    assert "Open for configs: on Triton's CPU interpreter a tile covering the whole" in card


def test_every_config_scoring_on_record_is_on_the_card() -> None:
    """A new record's config group (or a rerun) must be declared in SCORINGS to reach the
    measured_configs card; and every declared scoring must find its rows."""
    listed = {(s.record, s.group) for s in exploits.SCORINGS if s.kind == "config"}
    for path in sorted(exploits.RECORDS.glob("results_*.csv")):
        with path.open(newline="") as fh:
            groups = {r["group"] for r in csv.DictReader(fh) if r["target"].startswith("config")}
        for group in groups:
            base = group.removesuffix("-rerun").removesuffix("-repeat")
            assert (path.name, base) in listed, f"{path.name}: {group} is on no card"
    assert len(exploits.scorings()) == len(exploits.SCORINGS)


# -- determinism and atomicity -----------------------------------------------------------------
def _export(lake: Lake, out: Path, **overrides: Any) -> ExportReport:
    kwargs: dict[str, Any] = {
        "reward_module": lakes.REWARD_MODULE,
        "licenses": lakes.LICENSES,
        "snapshot": read_snapshot(lake),
    }
    kwargs.update(overrides)
    return export_kernel_opt_rl(lake, out, **kwargs)


def test_reexport_is_byte_identical_and_replaces(
    opt_export: ExportReport, opt_lake: Lake, tmp_path: Path
) -> None:
    out = tmp_path / "again"
    (out / "stale").mkdir(parents=True)
    (out / "stale" / "old.parquet").write_bytes(b"old")
    _export(opt_lake, out)
    assert _tree(out) == _tree(opt_export.out_dir)


def test_failure_keeps_previous_export(
    opt_lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "kernel-opt-rl"
    _export(opt_lake, out)
    before = _tree(out)

    def broken_card(*args: object, **kwargs: object) -> str:
        raise RuntimeError("template blew up after the Parquet files were written")

    monkeypatch.setattr(module, "render_card", broken_card)
    with pytest.raises(RuntimeError, match="template blew up"):
        _export(opt_lake, out)
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".kernel-opt-rl.lock", "kernel-opt-rl"]


def test_missing_licence_or_bad_reward_is_refused(opt_lake: Lake, tmp_path: Path) -> None:
    out = tmp_path / "kernel-opt-rl"
    no_sglang = {k: v for k, v in lakes.LICENSES.items() if k != "sglang"}
    with pytest.raises(ExportError, match="no upstream LICENSE for sglang"):
        _export(opt_lake, out, licenses=no_sglang)
    with pytest.raises(ExportError, match="unsafe"):
        _export(opt_lake, out, licenses={**lakes.LICENSES, "vllm": {"../LICENSE": b"x"}})
    with pytest.raises(ExportError, match="does not parse"):
        _export(opt_lake, out, reward_module="def broken(:\n")
    with pytest.raises(ExportError, match="snapshot entry"):
        _export(opt_lake, out, snapshot=[{"repo": "vllm"}])
    assert not out.exists()


def test_rows_outside_train_test_are_refused(tmp_path: Path) -> None:
    lake = lakes.new_lake(tmp_path / "lake")
    lakes.build_kernel_opt_rl_lake(lake)
    lake.execute("UPDATE datasets.kernel_commits SET split = 'valid' WHERE id = 'vllm:0'")
    with pytest.raises(ExportError, match="split other than train/test"):
        _export(lake, tmp_path / "out")


def test_missing_table_names_the_query(tmp_path: Path) -> None:
    lake = lakes.new_lake(tmp_path / "lake")
    lake.replace_table("raw", "repo_heads", lakes.repo_heads_frame())
    with pytest.raises(ExportError, match="tuned_configs_summary"):
        _export(lake, tmp_path / "out")


def test_interrupted_swap_is_recovered(tmp_path: Path) -> None:
    out = tmp_path / "export"
    # A previous run died between "move old aside" and "move new in".
    old = tmp_path / ".export.old-123"
    old.mkdir()
    (old / "README.md").write_text("previous")
    (tmp_path / ".export.tmp-456").mkdir()
    with pytest.raises(RuntimeError), atomic_export_dir(out) as tmp:
        (tmp / "README.md").write_text("half")
        raise RuntimeError("crash")
    assert (out / "README.md").read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".export.lock", "export"]


def test_concurrent_export_waits_for_the_running_one(tmp_path: Path) -> None:
    """A second export of the same folder must not clean up the first one's temp folder."""
    import threading

    out = tmp_path / "export"
    inside, release = threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with atomic_export_dir(out) as tmp:
            (tmp / "README.md").write_text("first")
            inside.set()
            release.wait(5)
            seen.append(tmp.exists())

    worker = threading.Thread(target=first)
    worker.start()
    assert inside.wait(5)
    second_done = threading.Event()

    def second() -> None:
        with atomic_export_dir(out) as tmp:
            (tmp / "README.md").write_text("second")
        second_done.set()

    other = threading.Thread(target=second)
    other.start()
    assert not second_done.wait(0.2)  # blocked behind the first export
    release.set()
    worker.join(5)
    other.join(5)
    assert seen == [True]
    assert (out / "README.md").read_text() == "second"


def test_upstream_notice_files_come_from_the_repo_root(tmp_path: Path) -> None:
    from dagster_project.mining.git import GitRepo
    from dagster_project.publish import upstream_notice_files
    from tests.fixtures.factory import RepoBuilder

    b = RepoBuilder(tmp_path / "engine")
    b.write("LICENSE", "Apache License 2.0\n").write("NOTICE", "Engine NOTICE\n")
    b.write("third_party/LICENSE", "BSD\n").write("README.md", "# engine\n")
    b.commit("Initial commit")
    files = upstream_notice_files(GitRepo(b.path))
    assert files == {"LICENSE": b"Apache License 2.0\n", "NOTICE": b"Engine NOTICE\n"}


def test_card_reports_the_gpu_reward_test_from_the_shipped_checks(
    opt_export: ExportReport,
) -> None:
    """The reward-test paragraph is rendered from ``reward_checks.csv`` through the same
    summary the report script prints: its counts must appear in the card."""
    from dagster_project.commit_exec.reward_checks import summary

    s = summary()
    readme = _readme(opt_export)
    assert "`dagster_project.rewards.commit_reward.execution_reward(" in readme
    line = (
        f"{s['significant_rows']} executed rows whose label is\nsignificant, "
        f"{s['tested_alone']} were tested"
    )
    assert line in readme
    for b in s["batches"]:
        assert f"| {b['batch']} | {b['rows']} | {b['side_by_side']} |" in readme
