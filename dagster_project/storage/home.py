"""Crash hygiene of a kernelhouse home: one build at a time, and what a killed one left.

A ``kill -9`` (or a power cut) mid-build cannot clean up after itself, so the next build
does it, before any work, while it holds the home's build lock:

- **One build per home.** ``KERNELHOUSE_HOME/build.lock`` holds the holder's PID, host
  and start time. The lock itself is an ``fcntl.flock`` on that file, which the kernel
  drops when the holder dies, so a lock left by a killed build is never in the way: the
  next build takes it over and says whose it was. A second build while the first lives
  fails at once with a message naming the holder.
- **Orphaned temporaries.** ``lake.write_atomically`` names its temporary
  ``.<file>.<pid>.<uuid>.tmp``; one whose writer is gone is an orphan (the rename never
  happened) and is deleted and reported. A live writer's temporary is left alone (a UI
  run may be writing while the CLI builds), unless it is older than a day.
- **Runs of dead builds.** Dagster records a run STARTED when it begins and only the
  running process ever finishes it, so a killed build's runs stay STARTED forever.
  Every run the CLI starts carries ``kernelhouse/process`` (host, PID and the process's
  start time); under the lock, an in-progress CLI run of any other process belongs to a
  dead build and is marked failed.
- **Broken views.** A refresh asks which lake views no longer read (their partition
  files were lost): their assets run again instead of being called up to date.

No dagster import at module level: the lock and the sweep are plain file operations.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import json
import os
import signal
import socket
import stat
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar, cast

from dagster_project.settings import Settings, load_settings
from dagster_project.storage.lake import TEMP_NAME, Lake

LOCK_NAME = "build.lock"
# A live writer's temporary older than this is an orphan anyway (no single file write
# takes a day); it covers a PID reused by an unrelated process.
TEMP_MAX_AGE_S = 24 * 3600
# Folders of the home that temporaries can be in (repos/ holds git clones: never walked).
_SWEPT = ("lake", "exports")
IN_PROGRESS = ("NOT_STARTED", "STARTING", "STARTED", "CANCELING")


class BuildLocked(RuntimeError):
    """Another live build holds this home's lock; the message names it."""


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux ``/proc``), which tells
    a PID's current process from an earlier one with the same number."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_identity(pid: int | None = None) -> str:
    """``host:pid:start`` of a process (this one by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid) or '?'}"


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def run_tags() -> dict[str, str]:
    """Tags for every run the CLI starts: which process started it."""
    return {"kernelhouse/process": process_identity()}


@dataclass
class Housekeeping:
    """What a build found and fixed at its start (printed by the CLI)."""

    stale_lock: str | None = None
    swept: list[str] = field(default_factory=list)
    failed_runs: list[str] = field(default_factory=list)
    damaged: dict[str, str] = field(default_factory=dict)

    def notes(self) -> list[str]:
        out = []
        if self.stale_lock:
            out.append(f"took over the build lock of a build that died ({self.stale_lock})")
        if self.swept:
            out.append(
                f"removed {len(self.swept)} temporary file(s) a killed write left: "
                + ", ".join(self.swept[:5])
                + (" ..." if len(self.swept) > 5 else "")
            )
        if self.failed_runs:
            out.append(
                f"marked {len(self.failed_runs)} run(s) of a build that died as failed: "
                + ", ".join(r[:8] for r in self.failed_runs)
            )
        for asset, why in sorted(self.damaged.items()):
            out.append(f"{asset} runs again: {why}")
        return out


# -- the lock -------------------------------------------------------------------------
_HELD: dict[str, Any] = {}  # lock path -> open file of the lock this process holds


# The holder's identity, exported to the processes a CLI build starts (multiprocess and
# local Dask workers inherit the environment), so they recognise their own build's lock.
HOLDER_ENV = "KERNELHOUSE_BUILD_LOCK_HOLDER"
# How long an asset step outside a CLI build waits for another *step* holding the lock
# (steps of one UI run in parallel processes take turns); a CLI build holder fails it at once.
STEP_WAIT_S = 600.0


def _open_lock(path: Path) -> IO[str]:
    """Open ``path`` as the lock file without following a symlink (``O_NOFOLLOW``),
    refusing anything but a regular file with one link: a symlink or hard link planted at
    ``build.lock`` once made the build truncate its target (issue 42). Opened without
    truncation; a FIFO is opened non-blocking, so the check is reached instead of a hang."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BuildLocked(
                f"{path} is a symbolic link: kernelhouse refuses to use it as its build lock "
                "(remove it; the next build creates a plain file)"
            ) from None
        raise BuildLocked(f"cannot open the build lock {path}: {exc.strerror}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        what = "has other hard links" if stat.S_ISREG(info.st_mode) else "is not a regular file"
        raise BuildLocked(
            f"{path} {what}: kernelhouse refuses to use it as its build lock (remove it)"
        )
    os.set_blocking(fd, True)
    return os.fdopen(fd, "r+")


@contextlib.contextmanager
def build_lock(home: Path, kind: str = "build") -> Iterator[str | None]:
    """Hold ``home``'s build lock for the block; yields a description of the dead build
    whose lock it took over, if any. Re-entrant within one process. ``kind`` (``build``:
    a CLI build; ``step``: one asset step of a UI, daemon or ``dagster asset materialize``
    run) is recorded for the next contender.

    Raises BuildLocked at once (no waiting: a second build would only redo the first's
    work) when another live process holds it."""
    path = Path(home) / LOCK_NAME
    key = str(path)
    if key in _HELD:
        yield None
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = _open_lock(path)
    try:
        if sys.platform != "win32":
            import fcntl

            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(path)
                raise BuildLocked(
                    f"another build is running on KERNELHOUSE_HOME={home} "
                    f"({_describe(holder)}; lock {path}); "
                    "wait for it to finish or stop that process (its workers stop with it)"
                ) from None
        previous = _read_holder(path)
        stale = _describe(previous) if previous else None
        fh.seek(0)
        fh.truncate()
        identity = process_identity()
        fh.write(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "pgid": os.getpgid(0),
                    "host": socket.gethostname(),
                    "identity": identity,
                    "kind": kind,
                    "started": time.time(),
                    "argv": sys.argv[:4],
                }
            )
        )
        fh.flush()
        _HELD[key] = fh
        before = os.environ.get(HOLDER_ENV)
        os.environ[HOLDER_ENV] = identity
        try:
            yield stale
        finally:
            del _HELD[key]
            if before is None:
                os.environ.pop(HOLDER_ENV, None)
            else:
                os.environ[HOLDER_ENV] = before
            fh.seek(0)
            fh.truncate()  # an empty lock file: nobody holds it
            fh.flush()
    finally:
        fh.close()  # closing drops the flock


def _ancestors(pid: int) -> list[int]:
    """The parent chain of ``pid`` (Linux ``/proc``), nearest first."""
    out: list[int] = []
    while pid > 1 and len(out) < 64:
        try:
            stat_line = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat_line.rsplit(")", 1)[1].split()[1])
        out.append(pid)
    return out


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to SIGKILL this worker when its parent dies (``PR_SET_PDEATHSIG``): a
    ``kill -9`` of the CLI then stops the workers too, instead of leaving them writing
    partitions after the lock has passed on. ``sig``: SIGTERM lets a process that can clean
    up (the UI's Dagster daemon) do so."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(sig))  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before the call took effect
            os.kill(os.getpid(), sig)


def _held_by_my_build(path: Path, run_process: str | None = None) -> bool:
    """True when the lock is held by a live CLI build and this process works for it: the
    holder is its ancestor, exported its identity to it, or started the run this step
    belongs to (``run_process``: the run's ``kernelhouse/process`` tag; a Dask worker of
    a cluster started elsewhere is none of the first two)."""
    holder = _read_holder(path) or {}
    identity, pid = holder.get("identity"), holder.get("pid")
    if not isinstance(identity, str) or not isinstance(pid, int):
        return False
    if holder.get("host") == socket.gethostname():
        if not pid_alive(pid) or identity != process_identity(pid):
            return False  # dead, or a recycled PID
    elif run_process != identity:
        return False  # another host's holder: only its own runs' steps can tell
    return (
        run_process == identity
        or pid in _ancestors(os.getpid())
        or os.environ.get(HOLDER_ENV) == identity
    )


@contextlib.contextmanager
def writer_lock(
    home: Path, wait_s: float = STEP_WAIT_S, run_process: str | None = None
) -> Iterator[None]:
    """The build lock around one asset step, whoever runs it (issue 42: one lock for every
    writer). A step inside a CLI build (same process, or a worker it started) runs under
    its build's lock; any other step (the UI, the daemon, ``dagster asset materialize``)
    takes the lock itself: it fails at once while a CLI build holds it, and waits up to
    ``wait_s`` while another step holds it (steps of one run in parallel processes)."""
    path = Path(home) / LOCK_NAME
    if str(path) in _HELD:
        yield
        return
    if path.exists() and _held_by_my_build(path, run_process):
        if _read_holder(path, "pid") in _ancestors(os.getpid()):
            die_with_parent()
        yield
        return
    deadline = time.monotonic() + wait_s
    with contextlib.ExitStack() as held:
        while True:
            try:
                held.enter_context(build_lock(home, kind="step"))
                break
            except BuildLocked:
                holder = _read_holder(path) or {}
                if holder.get("kind") != "step" or time.monotonic() > deadline:
                    raise
            time.sleep(0.5)
        yield


def _read_holder(path: Path, key: str | None = None) -> Any:
    """The lock file's holder record (or one key of it); None when empty or unreadable."""
    try:
        text = path.read_text().strip()
        record = json.loads(text) if text else None
    except (OSError, ValueError):
        return None
    return record.get(key) if key and isinstance(record, dict) else record


def _describe(holder: dict[str, Any] | None) -> str:
    if not holder:
        return "holder unknown"
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(holder.get("started") or 0)))
    return f"PID {holder.get('pid')} on {holder.get('host')}, started {started}"


# -- a full disk ---------------------------------------------------------------------------
_FULL = ("database or disk is full", "no space left on device", "disk quota exceeded")


def no_space(exc: BaseException, home: Path | None = None) -> str | None:
    """The one-line "no space" message when ``exc`` (or what caused it) is a full disk, else
    None. Dagster's run storage is SQLite, whose error says "database or disk is full"
    without the words a user searches for (issue 42); DuckDB and plain writes raise
    ``ENOSPC``. The CLI prints this instead of the library's first line."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        full = isinstance(cur, OSError) and cur.errno in (errno.ENOSPC, errno.EDQUOT)
        if full or any(marker in str(cur).lower() for marker in _FULL):
            where = f" under KERNELHOUSE_HOME={home}" if home else ""
            return (
                f"no space left on the device{where} ({type(cur).__name__}: "
                f"{str(cur).splitlines()[0] if str(cur) else 'ENOSPC'}); free some space and "
                "run the command again (a build resumes where it stopped)"
            )
        cur = cur.__cause__ or cur.__context__
    return None


# -- temporaries ------------------------------------------------------------------------
def orphaned_temporaries(settings: Settings, now: float | None = None) -> list[Path]:
    """Temporaries of ``write_atomically`` in the home whose writer is gone (or that are
    older than a day). A bucket lake has none: a PUT is atomic and leaves nothing."""
    now = time.time() if now is None else now
    roots = [settings.home / name for name in _SWEPT]
    if not settings.parquet_root.startswith("s3://"):
        roots.append(Path(settings.parquet_root))
    found: set[Path] = set()
    for dirpath, names in _candidate_files(settings.home, roots):
        for name in names:
            match = TEMP_NAME.match(name)
            if not match:
                continue
            path = Path(dirpath) / name
            pid = match.group("pid")
            try:
                age = now - path.stat().st_mtime
            except OSError:
                continue
            if pid is None or not pid_alive(int(pid)) or age > TEMP_MAX_AGE_S:
                found.add(path)
    return sorted(found)


def _candidate_files(home: Path, roots: list[Path]) -> Iterator[tuple[str, list[str]]]:
    """(folder, file names) to sweep: the home's own top level (where ``kernelhouse sql``
    keeps its snapshot of ``lake.duckdb`` while it reads) and every file under ``roots``."""
    if home.is_dir():
        yield str(home), [p.name for p in home.iterdir() if p.is_file()]
    for root in roots:
        if root.is_dir():
            for dirpath, _dirs, files in os.walk(root):
                yield dirpath, files


def sweep_temporaries(settings: Settings) -> list[str]:
    """Delete the orphaned temporaries; returns their paths relative to the home."""
    removed = []
    for path in orphaned_temporaries(settings):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            try:
                removed.append(str(path.relative_to(settings.home)))
            except ValueError:
                removed.append(str(path))
    return removed


# -- runs of dead builds ------------------------------------------------------------------
def fail_dead_runs(instance: Any) -> list[str]:
    """Mark failed every in-progress run the CLI started from a process other than this
    one (call it holding the build lock: then no other CLI build is alive). Returns the
    run ids."""
    import dagster as dg

    me = process_identity()
    statuses = [dg.DagsterRunStatus(s) for s in IN_PROGRESS]
    failed = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=statuses)):
        tags = run.tags or {}
        if "kernelhouse/cli" not in tags or tags.get("kernelhouse/process") == me:
            continue
        who = tags.get("kernelhouse/process", "an earlier kernelhouse")
        instance.report_run_failed(
            run,
            f"the kernelhouse build that ran this ({who}) died; marked failed by the next build",
        )
        failed.append(run.run_id)
    return failed


# -- views that no longer read --------------------------------------------------------------
def damaged_assets(defs: Any, lake: Lake) -> dict[str, str]:
    """Assets whose lake views no longer read (partition files lost), by name, with why.
    An asset names its tables in its ``tables`` metadata."""
    broken = set(lake.broken_views())
    if not broken:
        return {}
    graph = defs.resolve_asset_graph()
    out = {}
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        tables = str((node.metadata or {}).get("tables") or "")
        hit = sorted(t for t in (x.strip() for x in tables.split(",")) if t in broken)
        if hit and node.is_materializable:
            out[key.to_user_string()] = (
                f"view {', '.join(hit)} no longer reads (its partition files are missing)"
            )
    return out


_DAMAGED: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "kh_damaged", default=None
)


def damaged_now() -> dict[str, str]:
    """The damaged assets the current refresh found at its start (``exclusive_build``)."""
    return _DAMAGED.get() or {}


F = TypeVar("F", bound=Callable[..., Any])


def exclusive_build(fn: F) -> F:
    """Wrap ``execution.planner.run_build``: take the home's lock, sweep what a killed build left,
    fail its runs, and (on a refresh) find damaged views; the findings go on the outcome's
    ``notes``. ``fn``'s first two arguments are the Definitions and the instance."""

    @functools.wraps(fn)
    def wrapper(defs: Any, instance: Any, *args: Any, **kwargs: Any) -> Any:
        settings = load_settings()
        with build_lock(settings.home) as stale:
            found = Housekeeping(stale_lock=stale)
            found.swept = sweep_temporaries(settings)
            found.failed_runs = fail_dead_runs(instance)
            if kwargs.get("refresh"):
                lake = Lake(
                    settings.lake_path, settings.parquet_root, object_store=settings.object_store
                )
                found.damaged = damaged_assets(defs, lake)
            token = _DAMAGED.set(found.damaged)
            try:
                outcome = fn(defs, instance, *args, **kwargs)
            finally:
                _DAMAGED.reset(token)
            notes = getattr(outcome, "notes", None)
            if isinstance(notes, list):
                notes[:0] = found.notes()
            return outcome

    return cast(F, wrapper)  # functools.wraps: the same signature as fn
