"""Issue 42 probe: a huge tuned-config blob is rejected by its size (``cat-file
--batch-check``) before any byte of it is read. The probe blob's object is truncated after
its header: its size is known, its content unreadable, so a reader that reads first fails
and one that asks the size first answers ``too_large``."""

from __future__ import annotations

import subprocess
import zlib
from pathlib import Path

from dagster_project.mining.configs.entries import (
    MAX_CONFIG_BYTES,
    BlobCache,
    load_parsed_blobs,
)
from dagster_project.mining.git import GitError, GitRepo


def _git(repo: Path, *args: str, data: bytes | None = None) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=data, capture_output=True, check=True
    ).stdout.decode()


def test_oversized_config_is_rejected_by_size_without_being_read(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", str(repo))
    small = _git(repo, "hash-object", "-w", "--stdin", data=b'{"1": {"BLOCK_SIZE_M": 16}}').strip()
    payload = b'{"1": {"BLOCK_SIZE_M": 16}, "pad": "' + b"x" * (MAX_CONFIG_BYTES + 10) + b'"}'
    big = _git(repo, "hash-object", "-w", "--stdin", data=payload).strip()
    loose = repo / ".git" / "objects" / big[:2] / big[2:]
    raw = zlib.decompress(loose.read_bytes())
    partial = zlib.compressobj()
    truncated = partial.compress(raw[:4096]) + partial.flush(zlib.Z_SYNC_FLUSH)
    loose.chmod(0o644)
    loose.write_bytes(truncated)  # header intact, content cut: unreadable
    git = GitRepo(repo)
    assert git.batch_check([big])[big] == len(payload)
    try:
        git.read_blobs([big])
        read_whole = True
    except (GitError, ValueError, subprocess.CalledProcessError):
        read_whole = False
    assert not read_whole, "the probe blob must not be readable"

    parsed = load_parsed_blobs(git, [small, big], cache=BlobCache())
    assert parsed[big].status == "too_large"
    assert parsed[big].error == f"{len(payload):,} bytes, over the {MAX_CONFIG_BYTES:,}-byte cap"
    assert parsed[small].status == "ok"
