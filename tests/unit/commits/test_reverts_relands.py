"""Issue 41: reverts spelled the ways squash merges and people write them, reland chains,
near-duplicate relands by changed-line similarity, and the split keeping them together.

Every history here is a real git repository built by the test; the miner reads it with git.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl

from dagster_project.mining.commits import DEFAULT_SPECS, mine_repo, row_id
from dagster_project.mining.commits.lake_sync import assemble_kernel_commits
from dagster_project.mining.commits.reverts import (
    DUPLICATE_SIMILARITY,
    changed_line_texts,
    find_reverts,
    line_similarity,
    reland_roots,
)
from dagster_project.mining.commits.split import assign_temporal_split
from dagster_project.mining.git import GitRepo
from tests.fixtures.factory import RepoBuilder

K = "csrc/fixture_kernel.cu"


def _kernel(lines: list[str]) -> str:
    body = "\n".join(f"  {line}" for line in lines)
    return f"__global__ void k(float* x) {{\n{body}\n}}\n"


def _land(b: RepoBuilder, subject: str, lines: list[str], body: str = "") -> str:
    b.write(K, _kernel(lines))
    return b.commit(subject, body)


def _subjects(b: RepoBuilder, shas: list[str]) -> dict[str, str]:
    return {s: b.git("show", "-s", "--format=%s", s).strip() for s in shas}


def test_squash_merge_spellings_are_linked(tmp_path) -> None:
    b = RepoBuilder(tmp_path / "r")
    _land(b, "[Kernel] add k (#1)", ["x[0] = 0;"])
    a = _land(b, "[Perf] Faster kernel a (#10)", ["x[0] = 1;"])
    ra = _land(b, 'Revert "[Perf] Faster kernel a" (#11)', ["x[0] = 0;"])  # no (#10)
    long_title = "[Perf] Speed up kernel b with a much longer title than GitHub keeps"
    bb = _land(b, f"{long_title} (#12)", ["x[1] = 2;"])
    rb = _land(b, 'Revert "[Perf] Speed up kernel b with a much longer tit… (#13)', ["x[0] = 0;"])
    c = _land(b, "[Perf] Optimize c (#14)", ["x[2] = 3;"])
    rc = _land(b, "Revert #14 (#15)", ["x[0] = 0;"])
    d = _land(b, "[Perf] Optimize d (#16)", ["x[3] = 4;"])
    e = _land(b, "[Perf] Optimize e (#17)", ["x[4] = 5;"])
    rde = _land(b, "[Bugfix] Reverts #16 and #17 (#18)", ["x[0] = 0;"])
    g = _land(b, "[Perf] Optimize g (#23)", ["x[5] = 6;"])
    rg = _land(b, "Back to the old g (#24)", ["x[0] = 0;"], body="Reverts acme/engine#23")
    rg = _land(b, "Revert some of g (#25)", ["x[0] = 0;"], body="Reverts acme/engine#23")
    # Not reverts of the commit they mention: a fix naming a PR, a later PR number.
    _land(b, "[Fix] Update PR #16 revert notes (#26)", ["x[0] = 0;"])
    kept = _subjects(b, [a, bb, c, d, e, g])
    got = find_reverts(GitRepo(b.path), "HEAD", kept)
    assert got == {a: ra, bb: rb, c: rc, d: rde, e: rde, g: rg}


def test_a_missing_closing_quote_and_a_reland_with_the_same_title(tmp_path) -> None:
    b = RepoBuilder(tmp_path / "r")
    _land(b, "[Kernel] add k (#1)", ["x[0] = 0;"])
    f = _land(b, "[Perf] Optimize f (#20)", ["x[0] = 1;"])
    rf = _land(b, 'Revert "[Perf] Optimize f (#20) (#21)', ["x[0] = 0;"])
    f2 = _land(b, "[Perf] Optimize f (#22)", ["x[0] = 1;"])  # relanded under the same title
    got = find_reverts(GitRepo(b.path), "HEAD", _subjects(b, [f, f2]))
    assert got == {f: rf}  # the reland came after the revert: not reverted


def test_reland_chains_follow_back_to_the_first_landing() -> None:
    subjects = {
        "a": "[Perf] Fuse the gate (#100)",
        "b": "[Redo] [Perf] Fuse the gate (#120)",
        "c": "Reland [Perf] Fuse the gate again (#130)",
        "d": "[1/2][resubmit again] [Perf] Fuse the gate (#140)",
        "e": "[Redo] #100 (#150)",
        "f": "[Perf] Fuse the gate. Attempt 2 (#160)",
        "g": "[Perf] Something else (#170)",
    }
    roots = reland_roots(subjects)
    assert roots["b"] == "a" and roots["e"] == "a" and roots["f"] == "a"
    assert "c" not in roots  # "again" is part of its title here: no commit has that title
    assert "g" not in roots and "a" not in roots
    assert "d" not in roots  # "[1/2]" stays in the title: no earlier "[1/2] ..." commit


def test_changed_line_similarity() -> None:
    d1 = "--- a/k\n+++ b/k\n@@ -1 +1,2 @@\n-  x = 1;\n+  x = 2;\n+  y = 3;\n"
    d2 = "--- a/k\n+++ b/k\n@@ -1 +1,3 @@\n-  x   = 1;\n+  x = 2;\n+  y = 3;\n+  z = 4;\n"
    a, b = changed_line_texts(d1), changed_line_texts(d2)
    assert a == {("-", "x = 1;"), ("+", "x = 2;"), ("+", "y = 3;")}
    assert line_similarity(a, b) == 0.75 >= DUPLICATE_SIMILARITY
    assert line_similarity(a, changed_line_texts("@@ -0,0 +1 @@\n+  w = 0;\n")) == 0.0


def _big(extra: str) -> list[str]:
    return [f"x[{i}] = {i} * 2;" for i in range(8)] + [extra]


def test_a_reland_on_a_moved_base_is_a_near_duplicate(tmp_path) -> None:
    """The redo lands the same edit on a base that changed meanwhile, so before/after
    differ and the old byte-equal rule missed it; its changed lines are near-identical."""
    b = RepoBuilder(tmp_path / "r")
    b.write(K, _kernel(["int base = 0;", *[f"x[{i}] = {i};" for i in range(8)]]))
    b.commit("[Kernel] add k (#1)")
    first = _land(b, "[Perf] Vectorise k (#2)", ["int base = 0;", *_big("float4 v;")])
    _land(
        b,
        'Revert "[Perf] Vectorise k" (#3)',
        ["int base = 0;", *[f"x[{i}] = {i};" for i in range(8)]],
    )
    _land(b, "[Misc] rename base (#4)", ["int base0 = 0;", *[f"x[{i}] = {i};" for i in range(8)]])
    redo = _land(b, "[Redo] [Perf] Vectorise k (#5)", ["int base0 = 0;", *_big("float4 w;")])
    other = _land(
        b, "[Perf] Unroll k (#6)", ["int base0 = 0;", "#pragma unroll", *_big("float4 w;")]
    )
    commits, rows, _ = mine_repo(GitRepo(b.path), DEFAULT_SPECS["vllm"], head="HEAD")
    out, _ = assemble_kernel_commits(rows, commits)
    dup = dict(out.select("sha", "duplicate_of").iter_rows())
    assert dup[redo] == row_id("vllm", first, K)
    assert dup[first] is None and dup[other] is None
    assert commits.filter(pl.col("sha") == first)["reverted_by"].item() is not None


def _rows(n: int) -> pl.DataFrame:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    return pl.DataFrame(
        {
            "id": [f"r{i}" for i in range(n)],
            "repo": ["vllm"] * n,
            "sha": [f"s{i}" for i in range(n)],
            "pr_number": list(range(n)),
            "authored_at": [t0 + timedelta(days=i) for i in range(n)],
            "duplicate_of": [None] * n,
        }
    )


def test_a_duplicate_pair_never_straddles_the_split() -> None:
    rows = _rows(40)
    plain, cutoff = assign_temporal_split(rows)
    assert plain.filter(pl.col("split") == "test").height == 4 and cutoff is not None
    # The newest row relands row 30 (train in the plain split): both go to test together.
    linked = rows.with_columns(
        duplicate_of=pl.when(pl.col("id") == "r39").then(pl.lit("r30")).otherwise(None)
    )
    out, _ = assign_temporal_split(linked)
    split = dict(out.select("id", "split").iter_rows())
    assert split["r39"] == split["r30"] == "test"
    assert out.filter(pl.col("split") == "test").height == 10
    train_max = out.filter(pl.col("split") == "train")["authored_at"].max()
    assert train_max < out.filter(pl.col("split") == "test")["authored_at"].min()
