"""Issue 35 on a GPU: the execution reward of real kernel_commits rows, end to end through
the sandbox (its own process), on rows materialised into ``.commit_exec_work`` (git-ignored
upstream files: ``python -m dagster_project.commit_exec.materialise HOME .commit_exec_work``).

For each row named in ``COMMIT_EXEC_REWARD_ROWS`` (comma-separated ids; default: every
materialised row): the oracle edit (the commit itself as SEARCH/REPLACE) earns a reward
consistent with the row's significant measured speedup, the unchanged ``before_code``
earns no gain, a broken edit earns the error reward. Results are written to
``$OUT/reward_check.jsonl`` when ``OUT`` is set. Skipped without a CUDA GPU."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU here", allow_module_level=True)

from dagster_project.commit_exec.sandbox import run_candidate  # noqa: E402
from dagster_project.rewards import commit_reward as R  # noqa: E402

WORK = Path(__file__).resolve().parents[2] / ".commit_exec_work"


def _rows() -> list[dict]:
    if not (WORK / "manifest.json").exists():
        return []
    rows = json.loads((WORK / "manifest.json").read_text())["rows"]
    wanted = os.environ.get("COMMIT_EXEC_REWARD_ROWS")
    if wanted:
        rows = [r for r in rows if r["id"] in set(wanted.split(","))]
    return rows


def _siblings(row: dict, side: str = "before") -> dict[str, str] | None:
    """The row's sibling modules as the materialiser wrote them: at ``sha^`` (``before``,
    the task's tree, which the reward gives ``before`` as it is and the candidate as the
    completion edits it) or at ``sha`` (``after``, what the oracle completion edits them to)."""
    root = WORK / row["id"] / f"{side}_siblings"
    if not root.is_dir():
        return None
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*.py"))}


def _shapes(res: object) -> list[dict]:
    """Per shape: its label and both scopes' speedups (what a disagreement is read from)."""
    keep = ("shape", "graph_speedup", "host_speedup", "graph_error", "host_error", "why")
    return [
        {k: s[k] for k in keep if k in s}
        for s in getattr(res, "detail", {}).get("shapes", [])
        if isinstance(s, dict)
    ]


def _record(entry: dict) -> None:
    out = os.environ.get("OUT")
    if out:
        with (Path(out) / "reward_check.jsonl").open("a") as fh:
            fh.write(json.dumps(entry) + "\n")


@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["id"][:8])
def test_reward_of_oracle_unchanged_and_broken(row: dict) -> None:
    before = (WORK / row["before"]).read_text()
    after = (WORK / row["after"]).read_text()
    full = {**row, "before_code": before}
    sib = _siblings(row)
    seen: list = []

    def recording(*args: object, **kwargs: object):  # the real sandbox; keeps its result
        seen.append(run_candidate(*args, **kwargs))  # type: ignore[arg-type]
        return seen[-1]

    # The oracle edit (the commit: its file and the siblings it changed) goes through the
    # reward's own path (patches applied, sandboxed run); its result is kept for the
    # assertion instead of running the after side a second time.
    edit, sibling_edits = R.oracle_completion(
        before, after, row["path"], sib, _siblings(row, "after")
    )
    edit_reward = R.execution_reward(edit, full, runner=recording, siblings=sib)
    assert seen, f"the oracle edit of {row['id']} did not apply to before_code"
    res = seen[0]
    oracle = R.reward_from(res)
    same = R.reward_from(run_candidate(row, before, before, random_shapes=1, siblings=sib))
    broken_code = before + "\nraise RuntimeError('broken edit')\n"
    broken = R.reward_from(run_candidate(row, before, broken_code, time_it=False, siblings=sib))
    malformed = R.execution_reward(
        "<<<<<<< SEARCH\nnot in the file\n=======\n>>>>>>> REPLACE", full
    )
    _record(
        {
            "id": row["id"],
            "status": res.status,
            "speedup": res.speedup,
            "ci": [res.ci_lo, res.ci_hi],
            "significant": res.significant,
            "scope": res.detail.get("scope"),
            "error": str(res.detail.get("error") or res.detail.get("stderr") or "")[:300],
            "shapes": _shapes(res),
            "siblings": sorted(sib or ()),
            "sibling_edits": sibling_edits,
            "reward_version": R.REWARD_VERSION,
            "oracle_reward": oracle,
            "oracle_edit_reward": edit_reward,
            "unchanged_reward": same,
            "broken_reward": broken,
        }
    )
    assert broken == R.ERROR_REWARD
    assert malformed == R.MALFORMED_REWARD
    assert same <= R.CORRECT_REWARD + 1e-9
    if res.status == "ok" and res.significant and res.speedup and res.speedup > 1:
        assert oracle > R.CORRECT_REWARD
