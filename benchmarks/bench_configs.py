"""Time the tuned_configs build on real clones against the raw git it cannot avoid.

    .venv/bin/python benchmarks/bench_configs.py [--repeat 3] [--vllm-ref dev/unholy-fusion]

Sources come from ``KERNELHOUSE_VLLM_SOURCE`` / ``KERNELHOUSE_SGLANG_SOURCE`` (local
paths of full-history clones; defaults: the mirrors under /work/.mirror) and refs from
``KERNELHOUSE_VLLM_REF`` / ``KERNELHOUSE_SGLANG_REF`` (default HEAD). Repositories are
only read (``git -C``), never written.

What it prints:

1. wall time of the whole subset build (discover → entries → attribution → kernels →
   shapes → rows), cold parse cache, per repo and in total;
2. the floor: the raw git commands the build needs, run here on the same inputs (one
   rename-aware ``log --raw`` pass and one ``cat-file --batch`` of every config blob per
   repo), and the ratio ours / floor (goal: ≤ 2);
3. file and row counts against an independent direct count (``git ls-tree`` + ``json``);
4. the attribution verification rate: for each file, does the blob at the found commit
   differ from its parent's, and is it still the blob at the ref.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dagster_project.mining.configs import (  # noqa: E402
    CONFIG_DIRS,
    attribute_config_prs,
    build_tuned_configs,
    discover_config_files,
    extract_kernel_sources,
    load_model_shapes_snapshot,
    read_config_entries,
    verify_attribution,
)
from dagster_project.mining.configs.entries import BlobCache  # noqa: E402
from dagster_project.mining.configs.split import split_group  # noqa: E402
from dagster_project.mining.git import GitRepo  # noqa: E402

DEFAULT_SOURCES = {
    "vllm": "/work/.mirror/local-inference-lab+vllm/repo",
    "sglang": "/work/.mirror/nokiaMS+sglang/repo",
}
CARD = {"files": 1138, "rows": 19287, "gpus": 48, "train": 17561, "test": 1726}
GIT_ENV = {**os.environ, "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1"}


def git(path: str, *args: str, input: bytes | None = None) -> bytes:
    proc = subprocess.run(
        ["git", "-C", path, *args], input=input, capture_output=True, env=GIT_ENV, check=True
    )
    return proc.stdout


def direct_count(path: str, repo: str, ref: str) -> tuple[list[str], list[str], int]:
    """Independent count: JSON files in the config dirs at ref, and their M entries.

    Returns (tuned-config paths, other JSON in those dirs, rows). In a directory that has
    ``triton_X_Y_Z/`` folders only those folders hold tuned configs (what SGLang reads).
    """
    listing = git(
        path, "ls-tree", "-r", "--full-tree", ref, "--", *[d + "/" for d in CONFIG_DIRS[repo]]
    ).decode()
    entries = [line.split("\t", 1) for line in listing.splitlines()]
    jsons = [(meta.split()[2], p) for meta, p in entries if p.endswith(".json")]
    versioned_roots = {
        p.rsplit("/", 2)[0] for _, p in jsons if p.rsplit("/", 2)[-2].startswith("triton_")
    }
    tuned: list[tuple[str, str]] = []
    other: list[tuple[str, str]] = []
    for oid, p in jsons:
        parent = p.rsplit("/", 1)[0]
        (other if parent in versioned_roots else tuned).append((oid, p))
    blobs = git(path, "cat-file", "--batch", input="\n".join(o for o, _ in tuned).encode() + b"\n")
    rows, pos = 0, 0
    for _ in tuned:
        nl = blobs.index(b"\n", pos)
        size = int(blobs[pos:nl].split()[2])
        try:
            doc = json.loads(blobs[nl + 1 : nl + 1 + size])
            rows += sum(1 for k, v in doc.items() if k.isdigit() and isinstance(v, dict))
        except ValueError:
            pass
        pos = nl + 1 + size + 1
    return [p for _, p in tuned], [p for _, p in other], rows


def floor_once(path: str, repo: str, ref: str, oids: list[str]) -> float:
    """The raw git the build needs: one rename-aware log pass + one cat-file of the blobs."""
    t = time.perf_counter()
    git(
        path,
        "-c",
        "diff.renameLimit=0",
        "log",
        "-z",
        "-M",
        "--raw",
        "--no-abbrev",
        "--topo-order",
        "--format=@@%H%x09%cI%x09%s",
        ref,
        "--",
        *CONFIG_DIRS[repo],
    )
    git(path, "cat-file", "--batch", input=("\n".join(oids) + "\n").encode())
    return time.perf_counter() - t


def build_once(sources: dict[str, tuple[str, str]]) -> tuple[dict[str, float], dict]:
    """The whole subset, cold parse cache; returns per-stage seconds and the frames."""
    times: dict[str, float] = {}
    frames: dict[str, list[pl.DataFrame]] = {"f": [], "e": [], "a": [], "k": []}
    snapshot = {}
    t0 = time.perf_counter()
    shapes = load_model_shapes_snapshot()
    for repo_name, (path, ref) in sources.items():
        repo, cache = GitRepo(Path(path)), BlobCache()
        t = time.perf_counter()
        files = discover_config_files(repo, repo_name, ref, cache=cache)
        entries = read_config_entries(repo, files, cache=cache)
        attr = attribute_config_prs(repo, repo_name, ref, files["path"].to_list())
        kernels = extract_kernel_sources(repo, repo_name, ref)
        snapshot[repo_name] = repo.head(ref)
        times[repo_name] = time.perf_counter() - t
        for key, df in zip("feak", (files, entries, attr, kernels), strict=True):
            frames[key].append(df)
    t = time.perf_counter()
    out = {k: pl.concat(v) for k, v in frames.items()}
    rows = build_tuned_configs(out["f"], out["e"], out["a"], out["k"], shapes, snapshot)
    times["rows"] = time.perf_counter() - t
    times["total"] = time.perf_counter() - t0
    return times, {**out, "rows": rows, "snapshot": snapshot}


Sources = dict[str, tuple[str, str]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--vllm-ref", default=os.environ.get("KERNELHOUSE_VLLM_REF", "HEAD"))
    ap.add_argument("--sglang-ref", default=os.environ.get("KERNELHOUSE_SGLANG_REF", "HEAD"))
    args = ap.parse_args()
    sources = {
        "vllm": (os.environ.get("KERNELHOUSE_VLLM_SOURCE", DEFAULT_SOURCES["vllm"]), args.vllm_ref),
        "sglang": (
            os.environ.get("KERNELHOUSE_SGLANG_SOURCE", DEFAULT_SOURCES["sglang"]),
            args.sglang_ref,
        ),
    }
    for name, (path, ref) in sources.items():
        if not Path(path).exists() or "://" in path:
            print(f"{name}: {path} is not a local clone; set KERNELHOUSE_{name.upper()}_SOURCE")
            return 2
        sha = git(path, "rev-parse", "--short", f"{ref}^{{commit}}").decode().strip()
        print(f"{name:7s} {path} @ {ref} ({sha})")

    result, direct = _time_report(sources, args.repeat)
    files, rows = result["f"], result["rows"]
    _counts_report(sources, direct, files, rows)
    _runtime_report(files, rows, result)
    _attribution_report(sources, result)
    return 0


def _time_report(sources: Sources, repeat: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Time the build against the git floor (medians), print the table; the last build's
    frames and the direct ls-tree counts."""
    # Warm the page cache once (both sides then run warm), then time alternately.
    _, result = build_once(sources)
    direct = {n: direct_count(p, n, r) for n, (p, r) in sources.items()}
    oids = {n: result["f"].filter(pl.col("repo") == n)["blob_oid"].to_list() for n in sources}
    ours: list[dict[str, float]] = []
    floor: list[dict[str, float]] = []
    for _ in range(repeat):
        floor.append({n: floor_once(p, n, r, oids[n]) for n, (p, r) in sources.items()})
        times, result = build_once(sources)
        ours.append(times)

    def med(samples: list[dict[str, float]], key: str) -> float:
        return statistics.median(s[key] for s in samples)

    print(f"\n== time (median of {repeat}, warm page cache, cold parse cache)")
    print(f"{'':10s}{'ours s':>9s}{'floor s':>9s}{'ratio':>8s}")
    floor_total = 0.0
    for n in sources:
        f = med(floor, n)
        floor_total += f
        print(f"{n:10s}{med(ours, n):9.3f}{f:9.3f}{med(ours, n) / f:8.2f}")
    print(f"{'rows':10s}{med(ours, 'rows'):9.3f}")
    total = med(ours, "total")
    verdict = "OK" if total <= 2 * floor_total else "OVER"
    print(
        f"{'total':10s}{total:9.3f}{floor_total:9.3f}{total / floor_total:8.2f}"
        f"   goal <= 2.00: {verdict}"
    )
    return result, direct


def _counts_report(
    sources: Sources, direct: dict[str, Any], files: pl.DataFrame, rows: pl.DataFrame
) -> None:
    """Files and rows against the direct count, then the card's figures and the split."""
    print("\n== counts vs a direct ls-tree count")
    print(
        f"{'':10s}{'ours files':>11s}{'direct':>8s}{'ours rows':>11s}{'direct':>8s}"
        f"{'bad':>5s}{'other json':>12s}"
    )
    for n in sources:
        tuned, other, n_rows = direct[n]
        f_n = files.filter(pl.col("repo") == n)
        ok = f_n.filter(pl.col("parse_status") == "ok")
        r_n = rows.filter(pl.col("repo") == n)
        same = sorted(f_n["path"]) == sorted(tuned)
        print(
            f"{n:10s}{f_n.height:11d}{len(tuned):8d}{r_n.height:11d}{n_rows:8d}"
            f"{f_n.height - ok.height:5d}{len(other):12d}   paths identical: {same}"
        )
    devices = rows.filter(pl.col("device_name") != "")["device_name"].n_unique()
    split = dict(rows.group_by("split").len().iter_rows())
    groups = rows.with_columns(
        g=pl.col("config_path").map_elements(split_group, return_dtype=pl.String())
    )
    leaks = groups.group_by("g").agg(pl.col("split").n_unique()).filter(pl.col("split") > 1)
    print(f"\n{'':22s}{'card':>8s}{'ours':>8s}")
    print(f"{'files':22s}{CARD['files']:8d}{rows['config_path'].n_unique():8d}")
    print(f"{'rows':22s}{CARD['rows']:8d}{rows.height:8d}")
    print(f"{'GPUs (device names)':22s}{CARD['gpus']:8d}{devices:8d}")
    print(f"{'GPUs (normalised)':22s}{'':8s}{rows['gpu'].drop_nulls().n_unique():8d}")
    print(
        f"{'train / test rows':22s}{CARD['train']:>5d}/{CARD['test']}"
        f"{split.get('train', 0):>7d}/{split.get('test', 0)}"
    )
    print(f"split groups in both train and test: {leaks.height}")
    bad = files.filter(pl.col("parse_status") != "ok")
    for r in bad.iter_rows(named=True):
        print(f"  {r['parse_status']}: {r['path']} ({r['parse_error']})")
    unknown = files.filter(
        pl.col("parse_status") == "ok",
        pl.col("dtype").is_not_null(),
        ~pl.col("dtype").is_in(
            ["fp8_w8a8", "int8_w8a8", "int8_w8a16", "int4_w4a16", "float8", "bf16"]
        ),
    )
    print(f"files with an unrecognised dtype token: {unknown.height}")


def _runtime_report(files: pl.DataFrame, rows: pl.DataFrame, result: dict[str, Any]) -> None:
    """Issue 21 columns: what the engine's own lookup loads, and candidate_models coverage
    with the EP plausibility rule (E >= 2 local experts) against the rule without it."""
    loaded = rows.group_by("repo", "family", "loaded_at_runtime").len().sort("repo", "family")
    print("\n== loaded_at_runtime (rows)")
    for r in loaded.iter_rows(named=True):
        print(
            f"  {r['repo']:7s} {r['family'] or '-':11s} {str(r['loaded_at_runtime']):5s} "
            f"{r['len']:6d}"
        )
    from dagster_project.mining.configs import candidates as cand
    from dagster_project.mining.configs import load_model_shapes_snapshot

    moe = files.filter(pl.col("parse_status") == "ok", pl.col("family") == "moe")
    table = cand.shape_rows(load_model_shapes_snapshot())

    def covered(min_local: int) -> tuple[int, int]:
        saved, cand.MIN_LOCAL_EXPERTS = cand.MIN_LOCAL_EXPERTS, min_local
        try:
            hits = [
                (bool(cand.match_models(E, N, d, repo, table)), n)
                for E, N, d, repo, n in moe.select("E", "N", "dtype", "repo", "n_entries").rows()
            ]
        finally:
            cand.MIN_LOCAL_EXPERTS = saved
        return sum(h for h, _ in hits), sum(n for h, n in hits if h)

    before, after = covered(0), covered(cand.MIN_LOCAL_EXPERTS)
    print(
        f"MoE files with candidate_models: any EP {before[0]} files / {before[1]} rows -> "
        f"E >= {cand.MIN_LOCAL_EXPERTS} local experts {after[0]} / {after[1]} "
        f"(of {moe.height} files)"
    )
    ds = dict(files.group_by("parse_status").len().iter_rows())
    print(f"files by parse_status: {ds}")
    reused = result["a"]["format_only_skipped"].fill_null(0)
    print(
        f"attributions that walked through formatting-only changes: {int((reused > 0).sum())} files"
    )


def _attribution_report(sources: Sources, result: dict[str, Any]) -> None:
    """Per repo: how many files got a PR, and whether the found commit really changed them."""
    print("\n== attribution")
    for n, (path, ref) in sources.items():
        a = result["a"].filter(pl.col("repo") == n)
        check = verify_attribution(GitRepo(Path(path)), a, ref)
        verified = check.filter(pl.col("changed_content") & pl.col("matches_ref")).height
        with_url = a["pr_url"].is_not_null().sum()
        print(
            f"{n:10s} files {a.height}  with config_pr_url {with_url} "
            f"({with_url / a.height:.1%})  commit really changed content {verified} "
            f"({verified / a.height:.1%})  distinct PRs {a['pr_number'].n_unique()}  "
            f"moves followed {int(a['moves_followed'].sum())}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
