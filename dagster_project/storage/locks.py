"""One advisory file lock for every writer that must not run twice at once on a path.

Used where whole-file replacement is not enough on its own: an export folder's swap
(``publish.atomic``) and the code model cache (``sim.model_cache``), where the lock lets
concurrent processes do expensive work once instead of each doing it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive_lock(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``lock_path`` (created if absent; POSIX
    ``flock``, released when the block ends or the process dies; a no-op on Windows)."""
    with lock_path.open("a") as fh:
        if sys.platform == "win32":
            yield
            return
        import fcntl

        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
