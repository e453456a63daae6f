"""Write the files of the rows a spec covers, at ``sha^`` and ``sha``, for the GPU runner.

The text comes from ``datasets.kernel_commits`` (``before_code``/``after_code`` are the file
at ``sha^`` and ``sha``; the diff round-trip gate proves they match the commit) or, given a
clone, from git itself. The folder holds upstream source, so it is git-ignored
(``.git/info/exclude``) and travels to the device with ``carry``; it is never committed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import polars as pl

from .sandbox import write_sibling_sides
from .specs import spec_for


def covered_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """The rows some spec covers."""
    keep = [
        spec_for(r, s, p) is not None for r, s, p in rows.select("repo", "sha", "path").iter_rows()
    ]
    return rows.filter(pl.Series(keep, dtype=pl.Boolean))


def git_file(git_dir: Path, sha: str, path: str) -> str:
    """``git show sha:path`` of a (bare) clone."""
    return subprocess.run(
        ["git", "--git-dir", str(git_dir), "show", f"{sha}:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def materialise(rows: pl.DataFrame, dest: Path, repos: Path | None = None) -> list[dict[str, Any]]:
    """Write ``dest/<id>/before.py``, ``after.py`` and ``dest/manifest.json``; with
    ``repos`` (the folder of ``<repo>.git`` clones), also the spec's sibling modules of each
    row at ``sha^`` and ``sha`` (``write_siblings``)."""
    dest.mkdir(parents=True, exist_ok=True)
    manifest: list[dict[str, Any]] = []
    for r in covered_rows(rows).iter_rows(named=True):
        folder = dest / r["id"]
        folder.mkdir(exist_ok=True)
        (folder / "before.py").write_text(r["before_code"])
        (folder / "after.py").write_text(r["after_code"])
        entry: dict[str, Any] = {
            "id": r["id"],
            "repo": r["repo"],
            "sha": r["sha"],
            "path": r["path"],
            "before": f"{r['id']}/before.py",
            "after": f"{r['id']}/after.py",
        }
        spec = spec_for(r["repo"], r["sha"], r["path"])
        paths = spec.siblings_for(r["sha"]) if spec is not None else ()
        if paths and repos is not None:
            entry["siblings"] = write_siblings(
                repos / f"{r['repo']}.git", r["sha"], r["path"], paths, folder
            )
        manifest.append(entry)
    manifest = _round_robin(manifest)
    (dest / "manifest.json").write_text(json.dumps({"rows": manifest}, indent=1))
    return manifest


def write_siblings(
    git_dir: Path, sha: str, path: str, siblings: tuple[str, ...], folder: Path
) -> dict[str, list[str]]:
    """Write each sibling path as it was at ``sha^`` under ``folder/before_siblings/`` and at
    ``sha`` under ``folder/after_siblings/`` (a path absent at one side's commit is left out
    there: the loader stubs it, as before), and ``folder/siblings.json`` naming the row's
    own path (its module name in the side's namespace). Returns the paths written per side.
    """
    written: dict[str, list[str]] = {}
    for side, rev in (("before", f"{sha}^"), ("after", sha)):
        shutil.rmtree(folder / f"{side}_siblings", ignore_errors=True)
        texts = _texts_at(git_dir, rev, siblings)
        write_sibling_sides(folder, path, texts, (side,))
        written[side] = list(texts)
    # every path the spec names, written at either side or not
    (folder / "siblings.json").write_text(json.dumps({"path": path, "siblings": list(siblings)}))
    return written


def _texts_at(git_dir: Path, rev: str, paths: tuple[str, ...]) -> dict[str, str]:
    """Each path's text at ``rev``; a path absent there is left out."""
    out: dict[str, str] = {}
    for rel in paths:
        try:
            out[rel] = git_file(git_dir, rev, rel)
        except subprocess.CalledProcessError:
            continue
    return out


def sibling_texts(repos: Path, repo: str, sha: str, path: str) -> dict[str, str]:
    """The row's spec siblings as they were at ``sha^`` (the task's tree), read from the
    clone ``repos/<repo>.git``: what the execution reward gives both sides
    (``sandbox.run_candidate(siblings=...)``). Empty for a row whose spec names none; a
    path absent at ``sha^`` is left out (the loader stubs it, as in the label's run). A row
    that needs siblings without its clone is an error naming the clone: run on stubs, it
    would only score ``run_error``, which reads like the candidate's fault."""
    spec = spec_for(repo, sha, path)
    paths = spec.siblings_for(sha) if spec is not None else ()
    if not paths:
        return {}
    git_dir = repos / f"{repo}.git"
    if not git_dir.exists():
        raise FileNotFoundError(
            f"row {repo}@{sha[:12]} {path} imports sibling modules, read from the clone "
            f"{git_dir}, which does not exist (pass repos= the folder of <repo>.git clones)"
        )
    return _texts_at(git_dir, f"{sha}^", tuple(paths))


def _round_robin(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row of each spec in turn, so a run cut short by its time limit has covered every
    launcher family before it repeats one."""
    by_spec: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        spec = spec_for(r["repo"], r["sha"], r["path"])
        by_spec.setdefault(spec.name if spec else "", []).append(r)
    out: list[dict[str, Any]] = []
    while any(by_spec.values()):
        for queue in by_spec.values():
            if queue:
                out.append(queue.pop(0))
    return out


def main(argv: list[str]) -> int:
    """``python -m dagster_project.commit_exec.materialise HOME DEST``: the rows of HOME's
    ``datasets.kernel_commits`` that a spec covers, written under DEST (siblings from the
    clones in ``HOME/repos``)."""
    from dagster_project.storage.lake import Lake

    home, dest = Path(argv[0]), Path(argv[1])
    rows = Lake(home / "lake.duckdb", str(home / "lake")).read_table("datasets", "kernel_commits")
    repos = home / "repos"
    written = materialise(rows, dest, repos if repos.is_dir() else None)
    print(f"{len(written)} rows written to {dest}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
