"""hub_push against a local HTTP server standing in for the Hugging Face Hub, and plan_commit.

The fake Hub implements the handful of endpoints one dataset commit uses (repo creation,
tree listing, README metadata validation, preupload, commit) and keeps the repo's files in
memory, so a test can compare what arrived with the export byte for byte. It answers
"regular" for every upload mode, so content travels inside the commit itself (the LFS/Xet
transfer path of large files is huggingface_hub's own, and not exercised here).
"""

from __future__ import annotations

import base64
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from dagster_project.publish import (
    ExportReport,
    PublishBlocked,
    hub_push,
    local_files,
    plan_commit,
    snapshot_commit_message,
)

REPO = "kernelhouse-test/kernel-opt-rl"
TOKEN = "hf_TESTtoken0123456789abcdefSECRET"


class FakeHub:
    """In-memory dataset repos behind the Hub's REST routes."""

    def __init__(self, server: HTTPServer) -> None:
        self.server = server
        self.endpoint = server.url_for("/").rstrip("/")
        self.repos: dict[str, dict[str, bytes]] = {}
        self.commits: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        routes = [
            ("POST", r"^/api/repos/create$", self._create),
            ("GET", r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/tree/main$", self._tree),
            ("POST", r"^/api/validate-yaml$", self._validate),
            ("POST", r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/preupload/main$", self._preupload),
            ("POST", r"^/api/datasets/(?P<repo>[^/]+/[^/]+)/commit/main$", self._commit),
        ]
        for method, pattern, handler in routes:
            server.expect_request(re.compile(pattern), method=method).respond_with_handler(
                self._recording(pattern, handler)
            )

    def _recording(self, pattern: str, handler: Any) -> Any:
        def wrapped(request: Request) -> Response:
            self.auth.append(request.headers.get("authorization"))
            match = re.match(pattern, request.path)
            assert match is not None
            return handler(request, **match.groupdict())

        return wrapped

    @staticmethod
    def _json(payload: Any, status: int = 200) -> Response:
        return Response(json.dumps(payload), status=status, content_type="application/json")

    def _create(self, request: Request) -> Response:
        body = request.get_json()
        assert body["type"] == "dataset"
        repo = (
            f"{body['organization']}/{body['name']}" if body.get("organization") else body["name"]
        )
        url = f"{self.endpoint}/datasets/{repo}"
        if repo in self.repos:  # the Hub answers 409 with the existing repo's URL
            return self._json({"error": "You already created this dataset repo", "url": url}, 409)
        self.repos[repo] = {".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"}
        return self._json({"url": url, "name": repo})

    def _tree(self, request: Request, repo: str) -> Response:
        files = self.repos.get(repo)
        if files is None:
            return self._json({"error": "Repository not found"}, 404)
        return self._json(
            [
                {"type": "file", "path": p, "size": len(b), "oid": f"{abs(hash(b)):040x}"[:40]}
                for p, b in sorted(files.items())
            ]
        )

    def _validate(self, request: Request) -> Response:
        content = request.get_json()["content"]
        assert content.startswith("---\n")
        return self._json({"errors": [], "warnings": []})

    def _preupload(self, request: Request, repo: str) -> Response:
        files = request.get_json()["files"]
        return self._json(
            {
                "files": [
                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                    for f in files
                ]
            }
        )

    def _commit(self, request: Request, repo: str) -> Response:
        lines = [json.loads(line) for line in request.get_data().splitlines() if line.strip()]
        header = lines[0]
        assert header["key"] == "header"
        files = self.repos[repo]
        for item in lines[1:]:
            value = item["value"]
            if item["key"] == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif item["key"] == "deletedFile":
                del files[value["path"]]
            else:
                raise AssertionError(f"unexpected commit operation {item['key']}")
        oid = f"{len(self.commits) + 1:040x}"
        self.commits.append(
            {"message": header["value"]["summary"], "operations": lines[1:], "oid": oid}
        )
        return self._json(
            {"commitUrl": f"{self.endpoint}/datasets/{repo}/commit/{oid}", "commitOid": oid}
        )


@pytest.fixture
def fake_hub(httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    import huggingface_hub.constants as hf_constants

    # The suite runs with HF_HUB_OFFLINE=1 (read at import); these tests talk to 127.0.0.1 only.
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hf_constants, "HF_DEBUG", True)  # the noisiest logging there is
    return FakeHub(httpserver)


def _files(root: Path) -> dict[str, bytes]:
    return {rel: (root / rel).read_bytes() for rel in local_files(root)}


# -- plan_commit ---------------------------------------------------------------------------------
def test_plan_commit_adds_everything_and_deletes_only_stale(opt_export: ExportReport) -> None:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    root = opt_export.out_dir
    existing = [
        ".gitattributes",
        "README.md",
        "tuned_configs/train-00000-of-00001.parquet",
        "old/train.parquet",
        "code/build.py",
    ]
    ops = plan_commit(root, existing)
    adds = [op for op in ops if isinstance(op, CommitOperationAdd)]
    deletes = [op for op in ops if isinstance(op, CommitOperationDelete)]
    assert [op.path_in_repo for op in adds] == local_files(root) == sorted(opt_export.sizes)
    assert all(Path(str(op.path_or_fileobj)) == root / op.path_in_repo for op in adds)
    assert [op.path_in_repo for op in deletes] == ["code/build.py", "old/train.parquet"]
    assert not any(op.is_folder for op in deletes)
    assert ops == adds + deletes  # additions first, then deletions
    assert [
        op.path_in_repo for op in plan_commit(root, []) if isinstance(op, CommitOperationDelete)
    ] == []
    keep_all = plan_commit(root, existing, keep=existing)
    assert not [op for op in keep_all if isinstance(op, CommitOperationDelete)]


def test_plan_commit_requires_an_export(tmp_path: Path) -> None:
    (tmp_path / "data.parquet").write_bytes(b"x")
    with pytest.raises(ValueError, match="no README.md"):
        plan_commit(tmp_path, [])


def test_snapshot_commit_message() -> None:
    heads = [{"repo": "vllm", "head_sha": "a" * 40}, {"repo": "sglang", "head_sha": "b" * 40}]
    assert (
        snapshot_commit_message("kernel-opt-rl", heads)
        == f"kernel-opt-rl: snapshot sglang@{'b' * 12}, vllm@{'a' * 12}"
    )
    assert snapshot_commit_message("kernelinfer", {"generator_version": "1.0.0", "seed": 7}) == (
        "kernelinfer: build generator_version=1.0.0, seed=7"
    )


# -- gates and arguments --------------------------------------------------------------------------
class _NoCalls:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"HfApi.{name} called although the push was blocked")


def test_blocked_push_touches_nothing(opt_export: ExportReport) -> None:
    with pytest.raises(PublishBlocked, match="tuned_configs_suite, split_disjoint") as info:
        hub_push(
            opt_export.out_dir,
            REPO,
            token=TOKEN,
            commit_message="x",
            api=_NoCalls(),  # type: ignore[arg-type]
            failing_gates=["tuned_configs_suite", "split_disjoint"],
        )
    assert info.value.gates == ["tuned_configs_suite", "split_disjoint"]


def test_push_needs_a_token_and_a_message(opt_export: ExportReport) -> None:
    with pytest.raises(ValueError, match="token"):
        hub_push(opt_export.out_dir, REPO, token="", commit_message="m", api=_NoCalls())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="commit_message"):
        hub_push(opt_export.out_dir, REPO, token=TOKEN, commit_message=" ", api=_NoCalls())  # type: ignore[arg-type]


# -- against the fake Hub -------------------------------------------------------------------------
def test_push_creates_repo_and_commits_once(
    fake_hub: FakeHub, opt_export: ExportReport, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="huggingface_hub")
    message = snapshot_commit_message("kernel-opt-rl", opt_export.stats["snapshot"])
    result = hub_push(
        opt_export.out_dir, REPO, token=TOKEN, endpoint=fake_hub.endpoint, commit_message=message
    )

    local = _files(opt_export.out_dir)
    assert fake_hub.repos[REPO] == {
        **local,
        ".gitattributes": fake_hub.repos[REPO][".gitattributes"],
    }
    assert len(fake_hub.commits) == 1 and fake_hub.commits[0]["message"] == message
    assert result["commit_oid"] == fake_hub.commits[0]["oid"]
    assert result["added"] == sorted(local) and result["deleted"] == []
    assert result["repo_id"] == REPO and result["commit_message"] == message
    # Every request was authenticated with the token...
    assert fake_hub.auth and all(h == f"Bearer {TOKEN}" for h in fake_hub.auth)
    # ...which appears nowhere else: not in the result, the logs or the export.
    assert TOKEN not in json.dumps(result)
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("Send: curl") for m in messages), (
        "huggingface_hub debug logging not captured"
    )
    assert any(m.startswith("pushing kernel-opt-rl to dataset repo") for m in messages)
    assert all(TOKEN not in r.getMessage() for r in caplog.records)
    assert TOKEN not in caplog.text
    assert all(TOKEN.encode() not in blob for blob in local.values())


def test_second_push_updates_and_deletes_stale(
    fake_hub: FakeHub, opt_export: ExportReport, tmp_path: Path
) -> None:
    first = hub_push(
        opt_export.out_dir, REPO, token=TOKEN, endpoint=fake_hub.endpoint, commit_message="first"
    )
    # The repo now also has a file the next export no longer produces.
    fake_hub.repos[REPO]["batches/batch_099.jsonl"] = b"{}\n"
    second = hub_push(
        opt_export.out_dir, REPO, token=TOKEN, endpoint=fake_hub.endpoint, commit_message="second"
    )
    assert first["commit_oid"] != second["commit_oid"]
    assert second["deleted"] == ["batches/batch_099.jsonl"]
    assert "batches/batch_099.jsonl" not in fake_hub.repos[REPO]
    assert ".gitattributes" in fake_hub.repos[REPO]
    assert [c["message"] for c in fake_hub.commits] == ["first", "second"]


class LeakyHub(FakeHub):
    """A server that echoes the caller's token in an error (a real Hub does not)."""

    def _commit(self, request: Request, repo: str) -> Response:
        return self._json({"error": f"token {TOKEN} may not write to {repo}"}, 403)


def test_echoed_token_is_scrubbed_from_errors(
    httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch, opt_export: ExportReport
) -> None:
    import huggingface_hub.constants as hf_constants

    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    hub = LeakyHub(httpserver)
    with pytest.raises(RuntimeError) as info:
        hub_push(opt_export.out_dir, REPO, token=TOKEN, endpoint=hub.endpoint, commit_message="m")
    assert "may not write" in str(info.value)
    assert TOKEN not in str(info.value) and "***" in str(info.value)
