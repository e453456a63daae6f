"""The process boundary of the execution reward: ``run_candidate``.

A policy's candidate file is untrusted code. It runs in its own Python process, started
here, with a wall-clock limit, in a fresh temporary folder that holds only the two files
and the job; the parent never imports it and reads back one JSON object. The verdict
comes back through a pipe, not a file: the child's judge writes it tagged with a random
token the parent sent on stdin (read before the candidate is imported), and the parent
takes the first message carrying that token. A candidate can write into its folder and
the pipe too, but cannot know the token: a forged ``result.json`` (which once earned the
maximum reward, found by the exploit suite) or a message written before or after the
judge's is ignored. This is the one
function the exploit-hardening work (``dagster_project/rewards/guard/``) wraps: keep every
launch of candidate code behind it.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Default wall-clock limit of one candidate's process, seconds (compile + check + time).
DEFAULT_TIMEOUT_S = 300.0

#: The package root the child imports ``dagster_project`` from.
_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CandidateResult:
    """What the child reported (``status`` ``timeout``/``crashed`` when it reported nothing)."""

    status: str
    speedup: float | None = None
    ci_lo: float | None = None
    ci_hi: float | None = None
    significant: bool = False
    detail: dict[str, Any] = field(default_factory=dict)


def run_candidate(
    row: dict[str, str],
    before_code: str,
    candidate_code: str,
    *,
    random_shapes: int = 2,
    time_it: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    python: str = sys.executable,
    siblings: Mapping[str, str] | None = None,
    candidate_siblings: Mapping[str, str] | None = None,
) -> CandidateResult:
    """Check and time ``candidate_code`` against ``before_code`` through the row's harness
    (``row``: ``id``, ``repo``, ``sha``, ``path``) in a separate process.

    ``siblings``: the texts of the modules the row's spec imports as real files
    (``Spec.siblings_for``; repo path -> text at ``sha^``, ``materialise.sibling_texts``).
    ``before`` imports them as they are, the task's world at ``sha^``; the candidate imports
    ``candidate_siblings`` when given (the same paths as the completion edited them,
    ``commit_reward.patched_files``), else the same ones. Without them those modules are
    stubs, which a row that calls into them cannot run on (stop 42: the 4 such rows of 25
    all ended ``run_error``)."""
    with tempfile.TemporaryDirectory(prefix="commit_exec_cand_") as tmp:
        folder = Path(tmp)
        write_task(folder, row["path"], before_code, candidate_code, siblings, candidate_siblings)
        job = {
            **{k: row[k] for k in ("id", "repo", "sha", "path")},
            "before": str(folder / "before.py"),
            "candidate": str(folder / "candidate.py"),
            "random_shapes": random_shapes,
            "time": time_it,
        }
        (folder / "job.json").write_text(json.dumps(job))
        token = secrets.token_hex(16)
        env = {**os.environ, "PYTHONPATH": str(_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
        read_fd, write_fd = os.pipe()
        try:
            proc = subprocess.run(
                [
                    python,
                    "-m",
                    "dagster_project.commit_exec.device.candidate",
                    str(folder / "job.json"),
                    str(write_fd),
                ],
                cwd=folder,
                env=env,
                input=token + "\n",
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
                start_new_session=True,
                pass_fds=(write_fd,),
            )
        except subprocess.TimeoutExpired:
            os.close(read_fd)
            return CandidateResult("timeout", detail={"timeout_s": timeout_s})
        finally:
            os.close(write_fd)
        with os.fdopen(read_fd, "r") as channel:
            data = _verdict(channel.read(), token)
        if data is None:
            return CandidateResult(
                "crashed", detail={"rc": proc.returncode, "stderr": proc.stderr[-800:]}
            )
    return CandidateResult(
        status=data.get("status", "crashed"),
        speedup=data.get("speedup"),
        ci_lo=data.get("ci_lo"),
        ci_hi=data.get("ci_hi"),
        significant=bool(data.get("significant", False)),
        detail=data,
    )


def write_task(
    folder: Path,
    path: str,
    before_code: str,
    candidate_code: str,
    siblings: Mapping[str, str] | None = None,
    candidate_siblings: Mapping[str, str] | None = None,
) -> None:
    """The two sides as the harness loads them: ``before.py`` with ``siblings`` and
    ``candidate.py`` with ``candidate_siblings`` (default: the same), each side's siblings
    in its own tree (``write_sibling_sides``). Both trees hold the same paths: a completion
    edits the task's files, it does not add or drop one."""
    cand = siblings if candidate_siblings is None else candidate_siblings
    if set(cand or ()) != set(siblings or ()):
        raise ValueError("candidate_siblings must name the same paths as siblings")
    (folder / "before.py").write_text(before_code)
    (folder / "candidate.py").write_text(candidate_code)
    if not siblings or not cand:
        return
    write_sibling_sides(folder, path, siblings, ("before",))
    write_sibling_sides(folder, path, cand, ("candidate",))


def write_sibling_sides(
    folder: Path, path: str, siblings: Mapping[str, str], sides: tuple[str, ...]
) -> None:
    """The loader's layout (``loader.side_modules``): each sibling under
    ``folder/<side>_siblings/<repo path>`` for every side, and ``siblings.json`` naming the
    row's own path. A repo path that is absolute or climbs out of its folder is refused."""
    for side in sides:
        root = (folder / f"{side}_siblings").resolve()
        for rel, text in siblings.items():
            target = (root / rel).resolve()
            if Path(rel).is_absolute() or not target.is_relative_to(root):
                raise ValueError(f"sibling path {rel!r} leaves its folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    (folder / "siblings.json").write_text(json.dumps({"path": path, "siblings": sorted(siblings)}))


def _verdict(channel: str, token: str) -> dict[str, Any] | None:
    """The first message on the channel that carries ``token`` (its payload), else None."""
    for line in channel.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict) and message.get("token") == token:
            payload = message.get("result")
            return payload if isinstance(payload, dict) else None
    return None
