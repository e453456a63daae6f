"""Issue 42 probe: a full disk under Dagster's storage surfaced as an SQLite error
("database or disk is full") without the words "no space". Real full-disk errors: SQLite
past its page cap (SQLITE_FULL, what Dagster's run storage raises on a full disk) and a
write to ``/dev/full`` (ENOSPC), each wrapped the way a library re-raises it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dagster_project.storage.home import no_space


def _sqlite_full(tmp_path: Path) -> sqlite3.OperationalError:
    con = sqlite3.connect(tmp_path / "runs.db")
    con.execute("PRAGMA max_page_count = 2")
    con.execute("CREATE TABLE events (body TEXT)")
    try:
        for _ in range(100):
            con.execute("INSERT INTO events VALUES (?)", ["x" * 4096])
    except sqlite3.OperationalError as exc:
        return exc
    raise AssertionError("SQLite never filled up")


def _enospc() -> OSError:
    try:
        with open("/dev/full", "wb") as fh:
            fh.write(b"x" * 8192)
            fh.flush()
    except OSError as exc:
        return exc
    raise AssertionError("/dev/full accepted the write")


def test_sqlite_full_says_no_space(tmp_path: Path) -> None:
    err = _sqlite_full(tmp_path)
    assert "no space" not in str(err).lower()  # what the user saw before
    try:
        try:
            raise err
        except sqlite3.OperationalError as inner:
            raise RuntimeError("DagsterInstance: could not store the event") from inner
    except RuntimeError as wrapped:
        message = no_space(wrapped, tmp_path)
    assert message is not None and message.startswith("no space left on the device under")
    assert "database or disk is full" in message


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_enospc_says_no_space() -> None:
    message = no_space(_enospc())
    assert message is not None and message.startswith("no space left on the device")


def test_other_errors_are_not_called_a_full_disk() -> None:
    assert no_space(ValueError("bad value")) is None
    assert no_space(PermissionError(13, "Permission denied")) is None
