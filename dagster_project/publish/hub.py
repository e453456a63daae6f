"""Push an export folder to a Hugging Face dataset repo as one commit.

One commit per dataset, built from the export folder alone: every local file is an
addition, and every file the repo has that the export no longer has is a deletion (a stale
batch file or a renamed split must not linger next to the new card). ``plan_commit`` is that
rule as a pure function, so the exact operations can be checked without a server; the Hub
itself skips additions whose content it already has, so re-pushing an unchanged export
changes nothing.

The token is handed to ``huggingface_hub`` per call and never stored, logged or returned;
results are scrubbed of it anyway, and so are error messages, in case a server echoes it.
A push never happens while a blocking check is failing: the caller passes the names of the
failed gates and gets ``PublishBlocked`` before any network call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagster_project.frames import Json

from .kernel_opt_rl import snapshot_label

if TYPE_CHECKING:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    from dagster_project.settings import Settings
    from dagster_project.storage.lake import Lake

__all__ = [
    "KEEP_REMOTE",
    "PublishBlocked",
    "hub_push",
    "local_files",
    "plan_commit",
    "snapshot_commit_message",
]

logger = logging.getLogger(__name__)

#: Remote files an export never owns: the Hub creates ``.gitattributes`` (LFS rules) itself.
KEEP_REMOTE: tuple[str, ...] = (".gitattributes",)


class PublishBlocked(RuntimeError):
    """A blocking data-quality gate failed, so nothing was pushed."""

    def __init__(self, gates: Sequence[str]) -> None:
        self.gates = list(gates)
        super().__init__(f"not pushing: blocking checks failed: {', '.join(self.gates)}")


def local_files(export_dir: Path) -> list[str]:
    """Every regular file under ``export_dir`` as a POSIX path relative to it, sorted."""
    root = Path(export_dir)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def plan_commit(
    export_dir: Path,
    existing_files: Iterable[str],
    *,
    keep: Iterable[str] = KEEP_REMOTE,
) -> list[CommitOperationAdd | CommitOperationDelete]:
    """The operations of the one commit that makes the repo equal to ``export_dir``.

    Additions come first (sorted by path), then deletions of ``existing_files`` that the
    export does not have, except the ``keep`` ones. Files are referenced by path, not read
    into memory; ``huggingface_hub`` streams them when it uploads.
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    root = Path(export_dir)
    files = local_files(root)
    if "README.md" not in files:
        raise ValueError(f"{root} has no README.md: not an export folder")
    ops: list[CommitOperationAdd | CommitOperationDelete] = [
        CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(root / rel)) for rel in files
    ]
    stale = sorted(set(existing_files) - set(files) - set(keep))
    ops.extend(CommitOperationDelete(path_in_repo=rel, is_folder=False) for rel in stale)
    return ops


def snapshot_commit_message(
    dataset: str, snapshot: Sequence[Mapping[str, Any]] | Mapping[str, Any]
) -> str:
    """A commit summary naming what the export was built from.

    ``snapshot`` is either the repo heads of a mined dataset (``read_snapshot``) or the
    build facts of a simulated one (generator version, seed).
    """
    if isinstance(snapshot, Mapping):
        facts = ", ".join(f"{k}={v}" for k, v in snapshot.items())
        return f"{dataset}: build {facts}" if facts else f"{dataset}: build"
    return f"{dataset}: snapshot {snapshot_label(snapshot)}"


def _scrub(value: Any, secret: str) -> Any:
    if isinstance(value, str):
        return value.replace(secret, "***")
    if isinstance(value, list):
        return [_scrub(v, secret) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v, secret) for k, v in value.items()}
    return value


def hub_push(
    export_dir: Path,
    repo_id: str,
    *,
    token: str,
    endpoint: str | None = None,
    commit_message: str,
    api: HfApi | None = None,
    failing_gates: Sequence[str] = (),
    private: bool | None = None,
) -> dict[str, Any]:
    """Create the dataset repo if needed and commit ``export_dir`` to it in one commit.

    Raises ``PublishBlocked`` (before touching the network) when ``failing_gates`` is not
    empty. ``endpoint`` points at another Hub (tests use a local server); ``api`` lets a
    caller supply its own ``HfApi``. Returns the repo id, the commit id and URL, the
    message and the added/deleted paths — never the token.
    """
    if failing_gates:
        raise PublishBlocked(failing_gates)
    if not token:
        raise ValueError("no Hugging Face token given (set HF_TOKEN): refusing an anonymous push")
    if not commit_message or not commit_message.strip():
        raise ValueError("commit_message must name the snapshot the export was built from")
    root = Path(export_dir)

    from huggingface_hub import CommitOperationAdd, HfApi

    hub = api if api is not None else HfApi(endpoint=endpoint)
    try:
        hub.create_repo(repo_id, repo_type="dataset", exist_ok=True, private=private, token=token)
        existing = hub.list_repo_files(repo_id, repo_type="dataset", token=token)
        ops = plan_commit(root, existing)
        added = [op.path_in_repo for op in ops if isinstance(op, CommitOperationAdd)]
        deleted = [op.path_in_repo for op in ops if not isinstance(op, CommitOperationAdd)]
        logger.info(
            "pushing %s to dataset repo %s: %d files, %d deletions",
            root.name,
            repo_id,
            len(added),
            len(deleted),
        )
        info = hub.create_commit(
            repo_id, operations=ops, commit_message=commit_message, repo_type="dataset", token=token
        )
    except Exception as exc:
        text = str(exc)
        if token in text:  # never let a server echo carry the secret into logs or tracebacks
            raise RuntimeError(text.replace(token, "***")) from None
        raise
    result = {
        "repo_id": repo_id,
        "commit_oid": info.oid,
        "commit_url": str(info.commit_url),
        "commit_message": commit_message,
        "added": added,
        "deleted": deleted,
    }
    logger.info("pushed %s: commit %s", repo_id, info.oid)
    return _scrub(result, token)


#: The exports a build pushes, in push order; only kernel-opt-rl is mined data, so only
#: it carries the mined snapshot and is held back by the blocking gates of its tables.
PUSHED_EXPORTS = ("kernel-opt-rl", "kernelinfer", "kernelswarm", "measured_configs")
#: Exports built from the simulator's seed (their commit message names it).
SIMULATED_EXPORTS = ("kernelinfer", "kernelswarm")
#: The asset checks whose failure blocks pushing kernel-opt-rl.
GATED_ASSETS = ("tuned_configs", "kernel_commits", "pr_gains")


def push_exports(lake: Lake, settings: Settings, log: Callable[[str], None]) -> dict[str, Any]:
    """One Hub commit per built export (``KERNELHOUSE_HUB_REPO_PREFIX``-<name>, with
    ``HF_TOKEN``); a no-op that says why when either is unset. Returns the asset's
    metadata (what was pushed, the commit URLs)."""
    from dagster_project.publish.kernel_opt_rl import read_snapshot
    from dagster_project.quality.results import failing_gates

    if not (settings.hub_repo_prefix and settings.hf_token):
        log("hub push skipped: set KERNELHOUSE_HUB_REPO_PREFIX and HF_TOKEN to publish")
        return {"pushed": 0, "skipped": "not configured"}
    # pr_tasks (issue 41) is gated where the export holds it (it is written only when built).
    pr_tasks = (settings.exports_dir / "kernel-opt-rl" / "pr_tasks").exists()
    gates = failing_gates(lake, [*GATED_ASSETS, *(["pr_tasks"] if pr_tasks else [])])
    pushed: dict[str, str] = {}
    for name in PUSHED_EXPORTS:
        folder = settings.exports_dir / name
        if not folder.exists():
            continue
        mined = name == "kernel-opt-rl"
        seed = {"seed": settings.sim_seed} if name in SIMULATED_EXPORTS else {}
        snapshot = read_snapshot(lake) if mined else {"dataset": name, **seed}
        res = hub_push(
            folder,
            f"{settings.hub_repo_prefix}-{name}",
            token=settings.hf_token.get(),
            commit_message=snapshot_commit_message(name, snapshot),
            failing_gates=gates if mined else (),
        )
        pushed[name] = str(res.get("commit_url") or res.get("oid") or "ok")
    return {"pushed": len(pushed), "commits": Json(pushed)}
