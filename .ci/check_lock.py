"""Fail when the installed environment is not the lock (constraints.txt).

CI installs with ``-c constraints.txt``. A constraints file only bounds what pip picks; a
package the lock does not name (a new dependency, or a new transitive one) would still be
resolved freely, which is exactly how an unbounded dependency slipped through before
(dask 2026.11 with distributed 2021.4). So after installing, CI checks that every
package ``pip freeze`` lists is locked at that version, and names every difference:
re-run ``bash .ci/lock`` and commit.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

IGNORED = {"pip", "setuptools", "wheel"}


def _pins(lines: list[str]) -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line or "==" not in line:
            continue
        name, version = line.split("==", 1)
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key not in IGNORED:
            pins[key] = version.strip()
    return pins


def main() -> int:
    lock_path = Path(sys.argv[1] if len(sys.argv) > 1 else "constraints.txt")
    locked = _pins(lock_path.read_text().splitlines())
    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable", "--all"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    installed = _pins(frozen)
    # A locked package may be absent where an environment marker leaves it out (zipp and
    # importlib-metadata are needed below Python 3.12 only); anything installed must be
    # locked, at the locked version.
    problems = [
        f"  {name}: installed {version}, locked {locked.get(name, '(absent)')}"
        for name, version in sorted(installed.items())
        if locked.get(name) != version
    ]
    absent = sorted(set(locked) - set(installed))
    if absent:
        print(f"{lock_path}: locked but not needed on this Python: {', '.join(absent)}")
    if problems:
        print(f"{lock_path}: the installed set differs from the lock:", *problems, sep="\n")
        print("Re-resolve with `bash .ci/lock` and commit constraints.txt.")
        return 1
    print(f"{lock_path}: {len(installed)} installed packages match the lock")
    return 0


if __name__ == "__main__":
    sys.exit(main())
