"""Whether the outside world answers now: repository sources and observed services."""

from __future__ import annotations

import os

#: Seconds one ``git ls-remote`` may take. A refused or unresolvable host answers in
#: milliseconds; this bounds a black-holed one. All sources are probed at once.
PROBE_TIMEOUT_S = 6.0


def probe_source(source: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why ``source`` (a git URL or local path) cannot be cloned or fetched now, or None.

    A local path is checked on disk; a URL with ``git ls-remote`` (one round trip, no
    objects), with prompts off so a private URL fails instead of asking for a password.
    """
    import subprocess

    from dagster_project.settings import local_path_of

    path = local_path_of(source)
    if path is not None:
        if not path.exists():
            return f"{path} does not exist"
        if not ((path / "HEAD").exists() or (path / ".git").exists()):
            return f"{path} is not a git repository"
        return None
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
    try:
        res = subprocess.run(
            ["git", "ls-remote", "--exit-code", source, "HEAD"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"no answer within {timeout_s:.0f} s"
    except OSError as exc:  # git itself is missing
        return f"git cannot run ({exc.strerror or exc})"
    if res.returncode == 0:
        return None
    lines = [ln.strip() for ln in (res.stderr or "").splitlines() if ln.strip()]
    return (lines[-1] if lines else f"git ls-remote exited {res.returncode}")[:200]


def probe_sources(sources: dict[str, str]) -> dict[str, str]:
    """``{repo: reason}`` for every source that cannot be reached, probed in parallel
    (threads: each probe is a subprocess), so the whole check takes one probe's time."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, len(sources))) as pool:
        reasons = dict(zip(sources, pool.map(probe_source, sources.values()), strict=True))
    return {repo: why for repo, why in reasons.items() if why is not None}


def service_unreachable(service: str) -> str | None:
    """Why an observed service (``policy.HUB``, ``policy.GITHUB``) does not answer right
    now, else None. A git source (``policy.GIT``) is always tried: an unreachable one is a
    build error, reported per repo by ``probe_sources`` before anything runs."""
    from dagster_project.execution.policy import GITHUB, HUB

    if service == HUB:
        from dagster_project.mining.hub import hub_reachable

        if hub_reachable():
            return None
        return "the Hugging Face Hub is unreachable (or HF_HUB_OFFLINE=1)"
    if service == GITHUB:
        from dagster_project.github.sync import api_reachable
        from dagster_project.settings import load_settings

        url = load_settings().github_api_url
        if api_reachable(url, timeout_s=2.0):
            return None
        return f"the GitHub API ({url or 'api.github.com'}) is unreachable"
    return None
