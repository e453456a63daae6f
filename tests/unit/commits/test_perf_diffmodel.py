"""The diff-reading perf filter (issue 41, 41e): features read from a real git diff, the
score and threshold, the version guard on the weights file, and the shipped model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from dagster_project.mining.commits import perf_diffmodel as pdm
from dagster_project.mining.git import GitRepo
from tests.fixtures.factory import RepoBuilder

KERNEL_V1 = "__global__ void k(float* x) {\n  for (int i = 0; i < 4; ++i) x[i] = 0;\n}\n"
KERNEL_V2 = (
    "__global__ void k(float* x) {\n#pragma unroll\n"
    "  float4 vecLoad = reinterpret_cast<float4*>(x)[threadIdx.x];\n}\n"
)


@pytest.fixture(scope="module")
def two_commits(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, str, str]:
    """A repo whose second commit vectorises a kernel and adds a test naming ``slow_token``."""
    b = RepoBuilder(tmp_path_factory.mktemp("diffmodel"))
    b.write("csrc/norm_kernel.cu", KERNEL_V1).write("README.md", "x\n")
    first = b.commit("Initial commit")
    b.write("csrc/norm_kernel.cu", KERNEL_V2)
    b.write("tests/test_norm.py", "def test_it():\n    slow_token = 1\n")
    second = b.commit("[Perf] Vectorise the norm kernel (#12)")
    return GitRepo(b.path), first, second


def test_identifier_tokens_split_case_and_underscores() -> None:
    toks = pdm.identifier_tokens("fusedMoeKernel(BLOCK_SIZE_M); __syncthreads(); x = 42;")
    assert {"fused", "moe", "kernel", "fusedmoekernel", "block", "size", "block_size_m"} <= toks
    assert "__syncthreads" in toks  # a kernel operator, kept whole
    assert "42" not in toks and "x" not in toks  # numbers and single letters dropped


def test_features_read_from_a_real_diff(two_commits: tuple[GitRepo, str, str]) -> None:
    repo, _, sha = two_commits
    diffs = pdm.read_diffs(repo, [sha])
    assert set(diffs) == {sha}
    feats = pdm.features("[Perf] Vectorise the norm kernel (#12)", diffs[sha])
    # title, tag and the title rule's verdict
    assert {"t:vectorise", "t:kernel", "tag:perf", "rule:core"} <= feats
    assert "t:12" not in feats  # the PR number is not a word of the title
    # added and removed lines of the kernel file, split into tokens
    assert {"+:float4", "+:vec", "+:load", "+:#pragma unroll", "-:for"} <= feats
    # a test file's lines are not read, but its path is
    assert "+:slow_token" not in feats and "p:test" in feats
    assert {"ext:cu", "ext:py", "n:tests", "n:new_file", "n:files:2-3"} <= feats


def test_read_diffs_batches_commits(two_commits: tuple[GitRepo, str, str]) -> None:
    repo, first, second = two_commits
    diffs = pdm.read_diffs(repo, [first, second], chunk=1)
    assert set(diffs) == {first, second}
    assert "README.md" in diffs[first] and "README.md" not in diffs[second]


def _model(**kw: object) -> pdm.Model:
    base: dict = {
        "version": pdm.DIFFMODEL_VERSION,
        "bias": -1.0,
        "threshold": 0.5,
        "groups": ("rule", "diff"),
        "weights": {"+:float4": 2.0, "rule:core": 0.25, "t:vectorise": 50.0},
    }
    return pdm.Model(**{**base, **kw})  # type: ignore[arg-type]


def test_score_sums_weights_of_the_models_groups_only() -> None:
    feats = {"+:float4", "rule:core", "t:vectorise", "+:unknown"}
    assert pdm.score(feats, _model()) == pytest.approx(1.25)  # title weight ignored
    title_too = _model(groups=("rule", "diff", "title"))
    assert pdm.score(feats, title_too) == pytest.approx(51.25)


def test_is_perf_applies_the_threshold(two_commits: tuple[GitRepo, str, str]) -> None:
    repo, first, second = two_commits
    diffs = pdm.read_diffs(repo, [first, second])
    subject = "[Perf] Vectorise the norm kernel (#12)"
    assert pdm.is_perf(subject, diffs[second], _model())  # -1 + 2 + 0.25 >= 0.5
    assert not pdm.is_perf(subject, diffs[first], _model())  # no float4 added: -0.75
    assert not pdm.is_perf(subject, diffs[second], _model(threshold=1.5))


def test_load_refuses_another_version(tmp_path: Path) -> None:
    data = json.loads(pdm.WEIGHTS_PATH.read_text())
    data["version"] = "8"
    path = tmp_path / "w.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="diff model 8"):
        pdm.load(path)


def test_shipped_model_is_versioned_and_usable() -> None:
    m = pdm.shipped()
    assert m.version == pdm.DIFFMODEL_VERSION
    assert math.isfinite(m.threshold) and math.isfinite(m.bias)
    assert set(m.groups) <= set(pdm.GROUPS)
    prefixes = tuple(p for g in m.groups for p in pdm.GROUPS[g])
    assert m.weights and all(f.startswith(prefixes) for f in m.weights)
