"""Fetch pull-request descriptions through PyGithub, incrementally and politely.

Contract with the caller (the ``pr_bodies`` asset):

* ``cached`` holds what the lake already has (``raw.pr_bodies`` rows by PR number). Only
  PRs that are missing, previously failed, or **stale** (``fetched_at`` older than
  ``stale_after``) are requested; ``stale_after=None`` means cached rows never go stale.
* Rows are **yielded one at a time**, as soon as each PR is settled, so the caller can
  persist each immediately: an interrupted run keeps everything it fetched.
  Fresh cached rows are not yielded (nothing changed) unless ``include_cached=True``.
* **ETag conditional requests.** A cached row's ``etag`` is sent as ``If-None-Match``
  (PyGithub's ``CompletableGithubObject.update(additional_headers=…)``); a ``304 Not
  Modified`` keeps the cached title/body and only refreshes ``fetched_at``. GitHub does
  not count 304 answers against the primary rate limit, which is what makes daily
  refreshes of thousands of PRs affordable.
* **Rate limits.** Primary limit (403/429 with ``x-ratelimit-remaining: 0``) → wait until
  ``x-ratelimit-reset``; secondary limit (403/429 with ``retry-after``, or GitHub's
  secondary-limit message) → wait ``retry-after`` seconds (else back off from 60 s). Each
  wait is reported through ``on_progress`` and performed with the injected ``sleep``.
  PyGithub's own retry/throttle machinery is switched off so that all waiting goes through
  that one injectable function (tests never really wait).
* **Errors.** 404/410/451 → ``status="missing"``. 5xx, 408 and connection errors are
  retried ``max_retries`` times with exponential backoff, then recorded as
  ``status="error"``. A 401 (bad token) or exhausting ``max_rate_limit_waits`` raises
  :class:`GitHubFetchError`, since every further request would fail the same way.
  When a *cached* row's refresh fails, its content and status are kept, ``error`` says
  what happened, and ``fetched_at`` is left unchanged so the next run retries it.
* **Offline.** ``offline=True`` performs no network access at all: the caller works from
  its cache, and ``on_progress`` reports how many PRs were left unfetched.
* **Secrets.** The token is never placed in a row, an exception message or a log line:
  every string that leaves this module is passed through :func:`redact`, and PyGithub's
  own loggers are filtered the same way while a fetch runs.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import requests
import urllib3
from github import Auth, Github, GithubException
from github.Requester import Requester

log = logging.getLogger("kernelhouse.github")

DEFAULT_BASE_URL = "https://api.github.com"

#: Columns of one ``raw.pr_bodies`` row, in order.
PR_ROW_FIELDS: tuple[str, ...] = (
    "repo",
    "number",
    "title",
    "body",
    "state",
    "merged_at",
    "url",
    "fetched_at",
    "etag",
    "status",
    "error",
)

ProgressEvent = Literal[
    "fetched", "not_modified", "missing", "error", "rate_limited", "retrying", "offline"
]


@dataclass(frozen=True)
class FetchProgress:
    """One progress report. ``done``/``total`` count PRs that needed a request."""

    event: ProgressEvent
    number: int | None
    done: int
    total: int
    wait_s: float = 0.0
    detail: str = ""


class GitHubFetchError(RuntimeError):
    """A failure that stops the whole fetch (bad credentials, rate limit never lifting).

    The message is already redacted and the original exception is not chained, so the
    token cannot leak through a traceback either.
    """


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every non-empty secret replaced by ``***``."""
    out = text
    for s in secrets:
        if s:
            out = out.replace(s, "***")
    return out


class _RedactFilter(logging.Filter):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self._secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is not ours to fix
            return True
        if any(s in message for s in self._secrets):
            record.msg = redact(message, self._secrets)
            record.args = None
        return True


_FILTERED_LOGGERS = ("github", "github.Requester", "github.GithubRetry", "kernelhouse.github")


@contextlib.contextmanager
def _redacting_logs(secrets: list[str]) -> Iterator[None]:
    if not secrets:
        yield
        return
    flt = _RedactFilter(secrets)
    loggers = [logging.getLogger(n) for n in _FILTERED_LOGGERS]
    for lg in loggers:
        lg.addFilter(flt)
    try:
        yield
    finally:
        for lg in loggers:
            lg.removeFilter(flt)


def _as_datetime(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return dt if dt.tzinfo else dt.replace(tzinfo=UTC)
    return None


def select_pending(
    numbers: Iterable[int],
    cached: Mapping[int, Mapping[str, Any]],
    *,
    stale_after: timedelta | None,
    now: datetime,
) -> list[int]:
    """PR numbers that need a request: not cached, cached as ``error``, or stale."""
    out: list[int] = []
    for n in dict.fromkeys(int(x) for x in numbers):
        row = cached.get(n)
        if row is None or row.get("status") not in ("ok", "missing"):
            out.append(n)
            continue
        if stale_after is None:
            continue
        fetched = _as_datetime(row.get("fetched_at"))
        if fetched is None or now - fetched >= stale_after:
            out.append(n)
    return out


def _rate_limit_wait(
    status: int,
    headers: Mapping[str, Any],
    data: Any,
    now_epoch: float,
    backoff_round: int,
    max_wait_s: float,
) -> tuple[float, str] | None:
    """``(seconds, kind)`` to wait before retrying, or ``None`` if not a rate-limit answer.

    ``kind`` is ``"primary"`` (wait for ``x-ratelimit-reset``), ``"secondary"`` (wait
    ``retry-after``) or ``"backoff"`` (a secondary limit without ``retry-after``: GitHub
    asks for at least a minute, growing exponentially on repeats).
    """
    if status not in (403, 429):
        return None
    h = {str(k).lower(): v for k, v in (headers or {}).items()}
    retry_after = h.get("retry-after")
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 1.0), max_wait_s), "secondary"
        except ValueError:
            pass
    if str(h.get("x-ratelimit-remaining", "")).strip() == "0" and h.get("x-ratelimit-reset"):
        try:
            reset = float(h["x-ratelimit-reset"])
        except ValueError:
            reset = now_epoch + 60
        return min(max(reset - now_epoch, 0.0) + 1.0, max_wait_s), "primary"
    message = data.get("message", "") if isinstance(data, dict) else ""
    if status == 429 or Requester.isSecondaryRateLimitError(message):
        return min(60.0 * (2**backoff_round), max_wait_s), "backoff"
    return None


def _row_from_pr(pr: Any, repo: str, number: int, fetched_at: datetime) -> dict[str, Any]:
    merged = pr.merged_at
    return {
        "repo": repo,
        "number": number,
        "title": pr.title,
        "body": pr.body or "",
        "state": pr.state,
        "merged_at": merged.astimezone(UTC) if merged is not None else None,
        "url": pr.html_url,
        "fetched_at": fetched_at,
        "etag": pr.etag,
        "status": "ok",
        "error": None,
    }


def _empty_row(repo: str, number: int) -> dict[str, Any]:
    return dict.fromkeys(PR_ROW_FIELDS) | {"repo": repo, "number": number}


def _redact_row(row: dict[str, Any], secrets: list[str]) -> dict[str, Any]:
    return {k: (redact(v, secrets) if isinstance(v, str) else v) for k, v in row.items()}


def fetch_pull_requests(
    repo_slug: str,
    numbers: Iterable[int],
    cached: Mapping[int, Mapping[str, Any]],
    *,
    token: str | None,
    base_url: str | None = None,
    stale_after: timedelta | None,
    on_progress: Callable[[FetchProgress], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    max_retries: int = 3,
    offline: bool = False,
    repo: str | None = None,
    include_cached: bool = False,
    clock: Callable[[], float] = time.time,
    timeout_s: int = 15,
    min_interval_s: float = 0.0,
    backoff_base_s: float = 1.0,
    max_backoff_s: float = 60.0,
    max_rate_limit_waits: int = 10,
    max_rate_limit_wait_s: float = 3900.0,
) -> Generator[dict[str, Any], None, None]:
    """Yield ``raw.pr_bodies`` rows (:data:`PR_ROW_FIELDS`) for PRs that need fetching.

    ``repo_slug`` is ``owner/name`` on GitHub; ``repo`` is the name stored in rows
    (default: the slug's name part, e.g. ``vllm``). ``base_url`` points at GitHub
    Enterprise or a test server. ``min_interval_s`` spaces requests out (GitHub asks
    integrators to avoid bursts; the default 0 relies on rate-limit handling instead).
    See the module docstring for caching, rate-limit, error and secrecy behaviour.
    """
    if "/" not in repo_slug:
        raise ValueError(f"repo_slug must be 'owner/name', got {repo_slug!r}")
    secrets = [token] if token else []
    repo_name = repo or repo_slug.rsplit("/", 1)[-1]
    now = datetime.fromtimestamp(clock(), tz=UTC)
    wanted = list(dict.fromkeys(int(n) for n in numbers))
    pending = select_pending(wanted, cached, stale_after=stale_after, now=now)
    total = len(pending)

    def report(
        event: ProgressEvent, number: int | None, done: int, wait_s: float = 0.0, detail: str = ""
    ) -> None:
        if on_progress is not None:
            on_progress(FetchProgress(event, number, done, total, wait_s, redact(detail, secrets)))

    if include_cached:
        pending_set = set(pending)
        for n in wanted:
            if n not in pending_set and n in cached:
                yield dict(cached[n])
    if not pending:
        return
    if offline:
        report("offline", None, 0, detail=f"{total} PR(s) not fetched (offline)")
        log.info("offline: %d PR(s) of %s left unfetched", total, repo_slug)
        return

    gh = Github(
        base_url=(base_url or DEFAULT_BASE_URL).rstrip("/"),
        auth=Auth.Token(token) if token else None,
        retry=None,
        seconds_between_requests=None,
        seconds_between_writes=None,
        timeout=int(timeout_s),
        lazy=True,
    )
    unexpected: str | None = None
    try:
        with _redacting_logs(secrets):
            gh_repo = gh.get_repo(repo_slug)
            requests_made = 0
            for done, number in enumerate(pending, start=1):
                prev = cached.get(number)
                etag = None
                if prev is not None and prev.get("status") == "ok" and prev.get("body") is not None:
                    etag = prev.get("etag") or None
                transient = limited = backoff_round = 0
                while True:
                    if requests_made and min_interval_s > 0:
                        sleep(min_interval_s)
                    requests_made += 1
                    # Decide what to do *outside* the except blocks below, so that a raised
                    # GitHubFetchError carries no __context__ holding the server's answer.
                    failure: tuple[int, dict[str, Any], Any] | None = None
                    transport: str | None = None
                    try:
                        pr = gh_repo.get_pull(number)
                        changed = pr.update(
                            additional_headers={"If-None-Match": etag} if etag else None
                        )
                        fetched_at = datetime.fromtimestamp(clock(), tz=UTC)
                        if not changed and prev is not None:
                            row = dict(prev) | {
                                "fetched_at": fetched_at,
                                "status": "ok",
                                "error": None,
                            }
                            event: ProgressEvent = "not_modified"
                        else:
                            row = _row_from_pr(pr, repo_name, number, fetched_at)
                            event = "fetched"
                    except GithubException as exc:
                        failure = (int(exc.status or 0), dict(exc.headers or {}), exc.data)
                    except (
                        requests.exceptions.RequestException,
                        urllib3.exceptions.HTTPError,
                        OSError,
                    ) as exc:
                        transport = type(exc).__name__
                    if failure is None and transport is None:
                        report(event, number, done)
                        yield _redact_row(row, secrets)
                        break
                    if transport is not None:
                        transient += 1
                        if transient <= max_retries:
                            backoff = min(backoff_base_s * 2 ** (transient - 1), max_backoff_s)
                            report("retrying", number, done, wait_s=backoff, detail=transport)
                            sleep(backoff)
                            continue
                        err = f"connection error: {transport}"
                        yield _redact_row(
                            _failed_row(prev, repo_name, number, err, secrets), secrets
                        )
                        report("error", number, done, detail=err)
                        break
                    assert failure is not None
                    status, headers, data = failure
                    if status in (404, 410, 451):
                        row = (dict(prev) if prev else _empty_row(repo_name, number)) | {
                            "status": "missing",
                            "error": f"HTTP {status}",
                            "fetched_at": datetime.fromtimestamp(clock(), tz=UTC),
                        }
                        report("missing", number, done, detail=f"HTTP {status}")
                        yield _redact_row(row, secrets)
                        break
                    if status == 401:
                        raise GitHubFetchError(
                            f"GitHub answered 401 for {repo_slug}#{number}: the token is invalid or "
                            "lacks access (check GITHUB_TOKEN)"
                        )
                    limit = _rate_limit_wait(
                        status, headers, data, clock(), backoff_round, max_rate_limit_wait_s
                    )
                    if limit is not None:
                        wait, kind = limit
                        limited += 1
                        if limited > max_rate_limit_waits:
                            raise GitHubFetchError(
                                f"GitHub rate limit did not lift after {max_rate_limit_waits} waits "
                                f"({repo_slug}#{number}); rows fetched so far were yielded"
                            )
                        backoff_round += kind == "backoff"
                        log.warning(
                            "GitHub %s rate limit on %s#%d: waiting %.0fs",
                            kind,
                            repo_slug,
                            number,
                            wait,
                        )
                        report(
                            "rate_limited",
                            number,
                            done,
                            wait_s=wait,
                            detail=f"{kind} rate limit (HTTP {status})",
                        )
                        sleep(wait)
                        continue
                    if status >= 500 or status == 408:
                        transient += 1
                        if transient <= max_retries:
                            backoff = min(backoff_base_s * 2 ** (transient - 1), max_backoff_s)
                            report(
                                "retrying", number, done, wait_s=backoff, detail=f"HTTP {status}"
                            )
                            sleep(backoff)
                            continue
                    message = data.get("message") if isinstance(data, dict) else None
                    err = f"HTTP {status}" + (f": {message}" if message else "")
                    yield _redact_row(_failed_row(prev, repo_name, number, err, secrets), secrets)
                    report("error", number, done, detail=err)
                    break
    except GitHubFetchError:
        raise
    except Exception as exc:  # anything unexpected: never let the token out in a message
        unexpected = redact(f"{type(exc).__name__}: {exc}", secrets)
    finally:
        gh.close()
    if unexpected is not None:
        raise GitHubFetchError(unexpected)


def _failed_row(
    prev: Mapping[str, Any] | None, repo: str, number: int, error: str, secrets: list[str]
) -> dict[str, Any]:
    """A failed attempt: cached content and status kept (fetched_at too, so it is retried)."""
    log.warning("fetching %s#%d failed: %s", repo, number, redact(error, secrets))
    if prev is not None and prev.get("status") in ("ok", "missing"):
        return dict(prev) | {"error": error}
    return _empty_row(repo, number) | {"status": "error", "error": error}
