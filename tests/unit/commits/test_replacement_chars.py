"""Issue 42 probe: U+FFFD replacements in mined kernel code were silent. The run's summary
(the kernel_commit_files asset's metadata) now counts the rows and characters decoded with
U+FFFD; on the fixture's SGLang history, whose lossy rows carry invalid UTF-8 bytes."""

from __future__ import annotations

from dagster_project.mining.commits import DEFAULT_SPECS
from dagster_project.mining.commits.mine import mine_repo, summarize
from dagster_project.mining.git import GitRepo


def test_replacement_characters_are_counted_in_the_summary(perf_repos) -> None:  # noqa: ANN001
    repo = perf_repos["sglang"]
    lossy = {k for k, v in repo.truth["rows"].items() if v.get("lossy")}
    assert lossy, "the fixture has rows with invalid UTF-8"
    _commits, rows, excluded = mine_repo(GitRepo(repo.path), DEFAULT_SPECS["sglang"], head="HEAD")
    summary = summarize(rows, excluded)
    assert summary["rows_with_replacement_chars"] == len(lossy)
    assert summary["replacement_chars"] >= 2 * len(lossy)  # before and after each hold one
    clean = rows.filter(~rows["before_code"].str.contains("\ufffd", literal=True))
    assert summarize(clean, excluded)["rows_with_replacement_chars"] == 0
