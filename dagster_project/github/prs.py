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
* **Retries are PyGithub's.** Waiting and retrying is :class:`github.GithubRetry` (a
  ``urllib3.Retry``) mounted on the client: primary limit (403 with
  ``x-ratelimit-remaining: 0``) → wait until ``x-ratelimit-reset``; secondary limit
  (``Retry-After``, or GitHub's secondary-limit message) → ``Retry-After`` seconds, else
  60 s; 5xx, 408 and connection errors → urllib3's exponential backoff, ``max_retries``
  times; a 403 that is not a rate limit is never retried. A thin subclass (:class:`_Retry`)
  only routes each wait through the injected ``sleep`` and ``on_progress`` (tests never
  really wait), gives rate-limit waits their own budget (``max_rate_limit_waits``) and
  reads ``x-ratelimit-reset`` on a 429, which the library does only for 403.
* **Errors.** 404/410/451 → ``status="missing"``. Server or connection errors left after
  the retries are recorded as ``status="error"``. A 401 (bad token), exhausting
  ``max_rate_limit_waits`` or a rate-limit wait longer than ``max_rate_limit_wait_s``
  raises :class:`GitHubFetchError`, since every further request would fail the same way.
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
from typing import Any, Literal, cast

import requests
import urllib3
from github import Auth, Github, GithubException, GithubRetry
from github.GithubException import RateLimitExceededExceedsMaxWait
from github.Requester import Requester
from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.util.retry import Retry

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


def _is_rate_limited(status: int, headers: Mapping[str, Any], data: Any) -> bool:
    """Does a *final* 403/429 answer say "rate limit" (rather than "forbidden")?

    Used only to word the outcome once PyGithub's retry has given up; the waiting itself
    is :class:`_Retry`'s (that is, PyGithub's and urllib3's).
    """
    if status not in (403, 429):
        return False
    h = {str(k).lower(): v for k, v in (headers or {}).items()}
    if status == 429 or "retry-after" in h or str(h.get("x-ratelimit-remaining", "")) == "0":
        return True
    message = data.get("message", "") if isinstance(data, dict) else ""
    return bool(message) and Requester.isRateLimitError(str(message))


class _Retry(GithubRetry):
    """PyGithub's :class:`~github.GithubRetry` (a ``urllib3.Retry``) with three additions.

    Why a subclass rather than the plain class: the library's waiting is right (Retry-After,
    ``x-ratelimit-reset`` for the primary limit, a fixed wait for the secondary one,
    exponential backoff for 5xx and connection errors, a plain 403 not retried at all), but
    (1) it sleeps with ``time.sleep`` and says nothing, while callers need each wait in
    their progress and tests must not really wait: :meth:`sleep` computes the same wait and
    hands it to an injected function; (2) it counts rate-limit waits against the same
    budget as server errors, while a rate limit that lifts after an hour is not a transient
    failure: rate-limit retries get their own budget (``rate_limit_waits``); (3) GitHub's
    primary limit may come as a 429 with ``x-ratelimit-reset`` and no Retry-After, which
    the library only knows for 403: that wait is taken from the reset header here.
    """

    def __init__(
        self,
        *,
        sleep_fn: Callable[[float], None] = time.sleep,
        on_wait: Callable[[float, str, bool], None] | None = None,
        on_rate_limit_exhausted: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.time,
        rate_limit_waits: int = 10,
        **kwargs: Any,
    ) -> None:
        self.sleep_fn = sleep_fn
        self.on_wait = on_wait
        self.on_rate_limit_exhausted = on_rate_limit_exhausted
        self.clock = clock
        self.rate_limit_waits = rate_limit_waits
        super().__init__(**kwargs)

    def new(self, **kw: Any) -> Any:
        kw.setdefault("sleep_fn", self.sleep_fn)
        kw.setdefault("on_wait", self.on_wait)
        kw.setdefault("on_rate_limit_exhausted", self.on_rate_limit_exhausted)
        kw.setdefault("clock", self.clock)
        kw.setdefault("rate_limit_waits", self.rate_limit_waits)
        return super().new(**kw)

    # GithubRetry.increment returns Retry (urllib3's says Self), with its own ignore.
    def increment(  # type: ignore[override]  # see above
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: Any = None,
    ) -> Retry:
        limited = response is not None and response.status in (403, 429)
        # GithubRetry raises here for a 403 that is not a rate limit (never retried).
        retry = super().increment(method, url, response, error, _pool, _stacktrace)
        if not limited:
            return retry
        if self.rate_limit_waits <= 0:
            # urllib3 hands the last answer back (raise_on_status=False), but GithubRetry
            # has read its body (the secondary-limit message), so say it here.
            if self.on_rate_limit_exhausted is not None:
                self.on_rate_limit_exhausted()
            raise MaxRetryError(_pool, url or "", ResponseError("rate limit did not lift"))
        assert isinstance(retry, _Retry)
        retry.rate_limit_waits = self.rate_limit_waits - 1
        retry.status = self.status  # a rate-limit wait is not a server error
        retry.total = self.total
        return retry

    def sleep(self, response: Any = None) -> None:
        wait: float | None = None
        if response is not None and self.respect_retry_after_header:
            wait = self.get_retry_after(response)
            if wait is None and response.status == 429:
                reset = response.headers.get("X-RateLimit-Reset")
                if reset and str(reset).isdigit():
                    wait = max(float(reset) - self.clock(), 0.0) + 1.0
        if wait is None:
            wait = self.get_backoff_time()
        status = int(response.status) if response is not None else 0
        limited = status in (403, 429)
        detail = f"HTTP {status}" if status else "connection error"
        if self.on_wait is not None:
            self.on_wait(float(wait), detail, limited)
        self.sleep_fn(float(wait))


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
    now = datetime.fromtimestamp(clock(), tz=UTC)
    wanted = list(dict.fromkeys(int(n) for n in numbers))
    pending = select_pending(wanted, cached, stale_after=stale_after, now=now)
    run = _FetchRun(
        repo_slug,
        repo or repo_slug.rsplit("/", 1)[-1],
        cached,
        secrets,
        clock,
        on_progress,
        total=len(pending),
        max_rate_limit_waits=max_rate_limit_waits,
        max_rate_limit_wait_s=max_rate_limit_wait_s,
    )
    if include_cached:
        pending_set = set(pending)
        yield from (dict(cached[n]) for n in wanted if n not in pending_set and n in cached)
    if not pending:
        return
    if offline:
        run.report("offline", None, 0, detail=f"{run.total} PR(s) not fetched (offline)")
        log.info("offline: %d PR(s) of %s left unfetched", run.total, repo_slug)
        return
    retry = _Retry(
        total=None,
        connect=max_retries,
        read=max_retries,
        status=max_retries,
        other=0,
        status_forcelist=[*range(500, 600), 408, 429],
        backoff_factor=backoff_base_s,
        backoff_max=max_backoff_s,
        retry_after_max=int(max_rate_limit_wait_s),
        max_rate_limit_wait=max_rate_limit_wait_s,
        raise_on_status=False,  # the last answer comes back, and is worded below
        sleep_fn=sleep,
        on_wait=run.on_wait,
        on_rate_limit_exhausted=run.on_rate_limit_exhausted,
        clock=clock,
        rate_limit_waits=max_rate_limit_waits,
    )
    gh = Github(
        base_url=(base_url or DEFAULT_BASE_URL).rstrip("/"),
        auth=Auth.Token(token) if token else None,
        retry=retry,
        seconds_between_requests=None,
        seconds_between_writes=None,
        timeout=int(timeout_s),
        lazy=True,
    )
    unexpected: str | None = None
    try:
        with _redacting_logs(secrets):
            gh_repo = gh.get_repo(repo_slug)
            for done, number in enumerate(pending, start=1):
                run.number, run.done = number, done
                if done > 1 and min_interval_s > 0:
                    sleep(min_interval_s)
                yield from run.settle(gh_repo, number, done)
    except GitHubFetchError:
        raise
    except Exception as exc:  # anything unexpected: never let the token out in a message
        unexpected = redact(f"{type(exc).__name__}: {exc}", secrets)
    finally:
        gh.close()
    if unexpected is not None:
        raise GitHubFetchError(unexpected)


@dataclass
class _Attempt:
    """What one request for a PR came to, decided inside the except blocks but acted on
    outside them, so that a raised ``GitHubFetchError`` carries no ``__context__`` holding
    the server's answer: a row, or an HTTP failure, a transport error, or a rate-limit
    wait too long to make."""

    row: dict[str, Any] | None = None
    event: ProgressEvent = "fetched"
    failure: tuple[int, dict[str, Any], Any] | None = None
    transport: str | None = None
    waited_too_long: float | None = None


def _etag(prev: Mapping[str, Any] | None) -> str | None:
    """The ETag to send as ``If-None-Match``: only for a cached row that has a body."""
    if prev is not None and prev.get("status") == "ok" and prev.get("body") is not None:
        return prev.get("etag") or None
    return None


def _request_pr(
    gh_repo: Any,
    number: int,
    prev: Mapping[str, Any] | None,
    clock: Callable[[], float],
    repo_name: str,
) -> _Attempt:
    """One conditional request for PR ``number`` (PyGithub retries and waits inside it)."""
    etag = _etag(prev)
    try:
        pr = gh_repo.get_pull(number)
        changed = pr.update(additional_headers={"If-None-Match": etag} if etag else None)
        fetched_at = datetime.fromtimestamp(clock(), tz=UTC)
        if not changed and prev is not None:
            row = dict(prev) | {"fetched_at": fetched_at, "status": "ok", "error": None}
            return _Attempt(row=row, event="not_modified")
        return _Attempt(row=_row_from_pr(pr, repo_name, number, fetched_at), event="fetched")
    except RateLimitExceededExceedsMaxWait as exc:
        # GithubRetry raises it with the wait it would have needed, never without one.
        return _Attempt(waited_too_long=float(cast(float, exc.wait)))
    except GithubException as exc:
        return _Attempt(failure=(int(exc.status or 0), dict(exc.headers or {}), exc.data))
    except (
        requests.exceptions.RequestException,
        urllib3.exceptions.HTTPError,
        OSError,
    ) as exc:
        return _Attempt(transport=type(exc).__name__)


class _FetchRun:
    """One ``fetch_pull_requests`` call's state: where the request loop is (for the
    retry's progress reports and its rate-limit budget), and how each PR is settled."""

    def __init__(
        self,
        repo_slug: str,
        repo_name: str,
        cached: Mapping[int, Mapping[str, Any]],
        secrets: list[str],
        clock: Callable[[], float],
        on_progress: Callable[[FetchProgress], None] | None,
        *,
        total: int,
        max_rate_limit_waits: int,
        max_rate_limit_wait_s: float,
    ) -> None:
        self.repo_slug = repo_slug
        self.repo_name = repo_name
        self.cached = cached
        self.secrets = secrets
        self.clock = clock
        self.on_progress = on_progress
        self.total = total
        self.max_rate_limit_waits = max_rate_limit_waits
        self.max_rate_limit_wait_s = max_rate_limit_wait_s
        self.number = 0
        self.done = 0
        self.limit_exhausted = 0

    def report(
        self,
        event: ProgressEvent,
        number: int | None,
        done: int,
        wait_s: float = 0.0,
        detail: str = "",
    ) -> None:
        """One progress report to ``on_progress``, its detail redacted."""
        if self.on_progress is not None:
            self.on_progress(
                FetchProgress(event, number, done, self.total, wait_s, redact(detail, self.secrets))
            )

    def on_rate_limit_exhausted(self) -> None:
        """The retry's rate-limit budget ran out on the PR being requested now."""
        self.limit_exhausted = self.number

    def on_wait(self, wait_s: float, detail: str, limited: bool) -> None:
        """The retry is about to wait: log a rate limit, and report either kind of wait."""
        if limited:
            log.warning(
                "GitHub rate limit on %s#%d (%s): waiting %.0fs",
                self.repo_slug,
                self.number,
                detail,
                wait_s,
            )
            self.report("rate_limited", self.number, self.done, wait_s, f"rate limit ({detail})")
        else:
            self.report("retrying", self.number, self.done, wait_s, detail)

    def settle(self, gh_repo: Any, number: int, done: int) -> Iterator[dict[str, Any]]:
        """Request PR ``number`` and yield its row (fetched, not modified, or failed), or
        raise ``GitHubFetchError`` when a rate-limit wait would be too long."""
        prev = self.cached.get(number)
        attempt = _request_pr(gh_repo, number, prev, self.clock, self.repo_name)
        if attempt.waited_too_long is not None:
            raise GitHubFetchError(
                f"GitHub rate limit on {self.repo_slug}#{number} would need a "
                f"{attempt.waited_too_long:.0f}s "
                f"wait (more than {self.max_rate_limit_wait_s:.0f}s); "
                "rows fetched so far were yielded"
            )
        if attempt.failure is None and attempt.transport is None:
            assert attempt.row is not None  # a request that neither failed nor raised
            self.report(attempt.event, number, done)
            yield _redact_row(attempt.row, self.secrets)
            return
        if attempt.transport is not None:
            err = f"connection error: {attempt.transport}"
            yield self._failed(prev, number, err)
            self.report("error", number, done, detail=err)
            return
        assert attempt.failure is not None
        yield from self._http_failure(prev, number, done, *attempt.failure)

    def _http_failure(
        self,
        prev: Mapping[str, Any] | None,
        number: int,
        done: int,
        status: int,
        headers: dict[str, Any],
        data: Any,
    ) -> Iterator[dict[str, Any]]:
        """An HTTP error left after the retries: a missing PR's row, a failed attempt's
        row, or ``GitHubFetchError`` for a bad token or a rate limit that never lifted."""
        if status in (404, 410, 451):
            row = (dict(prev) if prev else _empty_row(self.repo_name, number)) | {
                "status": "missing",
                "error": f"HTTP {status}",
                "fetched_at": datetime.fromtimestamp(self.clock(), tz=UTC),
            }
            self.report("missing", number, done, detail=f"HTTP {status}")
            yield _redact_row(row, self.secrets)
            return
        if status == 401:
            raise GitHubFetchError(
                f"GitHub answered 401 for {self.repo_slug}#{number}: the token is invalid or "
                "lacks access (check GITHUB_TOKEN)"
            )
        if self.limit_exhausted == number or _is_rate_limited(status, headers, data):
            raise GitHubFetchError(
                f"GitHub rate limit did not lift after {self.max_rate_limit_waits} waits "
                f"({self.repo_slug}#{number}); rows fetched so far were yielded"
            )
        message = data.get("message") if isinstance(data, dict) else None
        err = f"HTTP {status}" + (f": {message}" if message else "")
        yield self._failed(prev, number, err)
        self.report("error", number, done, detail=err)

    def _failed(self, prev: Mapping[str, Any] | None, number: int, err: str) -> dict[str, Any]:
        """A failed attempt's row, redacted (``_failed_row`` logs it)."""
        return _redact_row(
            _failed_row(prev, self.repo_name, number, err, self.secrets), self.secrets
        )


def _failed_row(
    prev: Mapping[str, Any] | None, repo: str, number: int, error: str, secrets: list[str]
) -> dict[str, Any]:
    """A failed attempt: cached content and status kept (fetched_at too, so it is retried)."""
    log.warning("fetching %s#%d failed: %s", repo, number, redact(error, secrets))
    if prev is not None and prev.get("status") in ("ok", "missing"):
        return dict(prev) | {"error": error}
    return _empty_row(repo, number) | {"status": "error", "error": error}
