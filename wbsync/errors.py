"""Every error wbsync raises, in one tree.

::

    WbSyncError                      root: catch this to catch anything of ours
    ├── ConfigError                  bad or missing setting; says which and how to fix it
    ├── RedisUnavailableError        Redis could not be reached or started
    ├── RateLimitDeferred            control signal, not a failure: a job should wait wait_ms
    │   └── ReportPending            the same signal for WB building a report the job asked for
    ├── RateLimitExceeded            local rate limit on a path with no "later" (HTTP): retry_after
    ├── TokenError                   a WB token is malformed, expired or lacks a category;
    │                                raised before any request is sent
    ├── WbApiError                   a call to WB failed (carries method, status, request_id,
    │                                and WB's words: what WB said, bounded and sanitised)
    │   ├── WbAuthError              401   ┐ refusals no retry fixes (with some 400s): they
    │   ├── WbPaymentRequiredError   402   │ suspend what they apply to, ``section`` names the
    │   ├── WbPermissionError        403   ┘ method's WB section (``wbsync.wb.refusals``)
    │   ├── WbRateLimitedError       429 (after the client's own handling gave up)
    │   ├── WbRequestError           any other 4xx: WB rejected the request itself
    │   │   ├── WbMethodDisabledError  404 "method is disabled" / "deprecated", or a method
    │   │   │                        configured as off: WB has switched it off; try again much later
    │   │   └── WbPathNotFoundError  404 "path not found": a wrong host or path on our side (a base
    │   │                            URL setting); the section stops for the process, no retries
    │   ├── WbReportError            a report task WB did not build within the deadline, or kept
    │   │                            losing (purged, canceled, unknown) past the bound
    │   ├── WbServerError            5xx
    │   ├── WbTransportError         timeout, reset, refused
    │   ├── WbBadResponseError       unparseable or schema-violating body, unexpected status
    │   │   └── WbBodyTooLargeError  a reply body past the configured maximum (not read on)
    │   └── FailureBudgetExhausted   a job spent its budget of upstream failures; names the last
    ├── StoreError                   the database refused or lost an operation
    │   ├── StoreUnavailableError    the database could not be reached (down, restarting, locked)
    │   ├── CabinetNotFoundError     no cabinet of that name or id
    │   └── FeedCursorError          a change-feed cursor is empty, malformed, another dataset's
    │       │                        or beyond the feed's end (``reason`` says which)
    │       └── FeedCursorGoneError  a cursor below the feed's low-water mark: deletes after it
    │                                were pruned; resynchronise (``low_water``)
    ├── QueueError                   the job queue refused an operation
    │   └── JobLockLostError         this worker no longer holds the job's lock (another owns it)
    ├── MalformedJobError            a job's data breaks the job contract (not JSON, no or bad
    │                                ``cabinet``, a count that is not one, a cursor not of its
    │                                sync's shape): the job fails at once, no retries
    └── LoaderError                  a loader's request to wbsync's API failed (transport, or a
                                     status it does not handle), or the reply broke the feed's
                                     contract; names the route and the API's words

``RateLimitDeferred`` sits outside ``WbApiError`` on purpose: it tells the job layer to move a
job to ``delayed``; a retry policy or an HTTP error mapping written against ``WbApiError`` never
sees it. Foreign errors (redis, aiohttp, bullmq, SQLAlchemy) are translated into these at the
boundary where they happen; every Redis client's, single or cluster, by one function
(``wbsync.redis.redis_client.redis_failures``). No message here ever contains a WB token or an
API key.

Two kinds of failure matter to the job layer: upstream failures (``WbServerError``,
``WbTransportError``, ``WbBadResponseError``) spend a job's failure budget; infrastructure
failures (``RedisUnavailableError``, ``StoreUnavailableError``, ``QueueError``) are not the job's
fault and only delay it.
"""

from __future__ import annotations

from wbsync.values.scope import BucketScope

__all__ = [
    "CabinetNotFoundError",
    "ConfigError",
    "FailureBudgetExhausted",
    "FeedCursorError",
    "FeedCursorGoneError",
    "JobLockLostError",
    "LoaderError",
    "MalformedJobError",
    "QueueError",
    "RateLimitDeferred",
    "RateLimitExceeded",
    "RedisUnavailableError",
    "ReportPending",
    "StoreError",
    "StoreUnavailableError",
    "TokenError",
    "WbApiError",
    "WbAuthError",
    "WbBadResponseError",
    "WbBodyTooLargeError",
    "WbMethodDisabledError",
    "WbPathNotFoundError",
    "WbPaymentRequiredError",
    "WbPermissionError",
    "WbRateLimitedError",
    "WbReportError",
    "WbRequestError",
    "WbServerError",
    "WbSyncError",
    "WbTransportError",
]


class WbSyncError(Exception):
    """Root of every error wbsync raises."""


class ConfigError(WbSyncError):
    """A setting is missing or invalid; the message names it and says what to do."""


class RedisUnavailableError(WbSyncError):
    """Redis could not be reached, or the embedded server could not be started."""


class RateLimitDeferred(WbSyncError):
    """A job must wait ``wait_ms`` for ``scope``'s bucket: move it to delayed, do not retry.

    Raised only inside a deferral context (``wbsync.observability.context``). Not a
    ``WbApiError``. ``reason`` labels the deferral (metric, job data): ``"rate_limit"`` here;
    ``waiting_on`` is what the status page says the job waits for (the limit group).
    """

    reason = "rate_limit"

    def __init__(self, wait_ms: int, scope: BucketScope) -> None:
        super().__init__(f"rate limit window of {scope}: defer for {wait_ms} ms")
        self.wait_ms = wait_ms
        self.scope = scope

    @property
    def waiting_on(self) -> str:
        """What the job waits for, as the status page shows it."""
        return self.scope.group


class ReportPending(RateLimitDeferred):
    """WB is still building the report task ``task_id`` of ``report``: the job gives its slot
    back for ``wait_ms`` (the status method's poll interval; ``scope`` is its bucket), spends no
    attempt, and polls again from its cursor. Raised only inside a deferral context
    (``wbsync.observability.context.wait_for_upstream``); outside one the caller sleeps instead.
    """

    reason = "report"

    def __init__(self, wait_ms: int, scope: BucketScope, *, report: str, task_id: str) -> None:
        super().__init__(wait_ms, scope)
        self.args = (f"WB is building report {report} (task {task_id}): defer for {wait_ms} ms",)
        self.report = report
        self.task_id = task_id

    @property
    def waiting_on(self) -> str:
        """What the job waits for, as the status page shows it."""
        return f"waiting on WB's report {self.report} (task {self.task_id})"


class RateLimitExceeded(WbSyncError):
    """The local limiter refused: waiting would pass the ceiling. Retry after ``retry_after`` s."""

    def __init__(self, retry_after: float, scope: BucketScope) -> None:
        super().__init__(f"rate limit of {scope}: retry after {retry_after:.3f} s")
        self.retry_after = retry_after
        self.scope = scope


class TokenError(WbSyncError):
    """A WB token cannot be used: malformed, expired, or without the method's category."""

    def __init__(self, message: str, *, cabinet: str | None = None) -> None:
        prefix = f"cabinet {cabinet!r}: " if cabinet else ""
        super().__init__(prefix + message)
        self.cabinet = cabinet


class WbApiError(WbSyncError):
    """A call to the WB API failed.

    ``words`` is what WB said in its reply, already cleaned and bounded by the client
    (``wbsync.wb.words``), or None when WB said nothing; the message says it too.
    """

    def __init__(
        self,
        message: str,
        *,
        method: str,
        status: int | None = None,
        request_id: str | None = None,
        words: str | None = None,
    ) -> None:
        details = [f"method={method}"]
        if status is not None:
            details.append(f"status={status}")
        if request_id:
            details.append(f"request_id={request_id}")
        said = f'; WB said: "{words}"' if words else ""
        super().__init__(f"{message}{said} ({', '.join(details)})")
        self.message = message
        """Our message alone, without WB's words, the method, status and request id."""
        self.method = method
        self.status = status
        self.request_id = request_id
        self.words = words
        self.section: str | None = None
        """The WB section of the method refused (set by the client on a 4xx), else None."""


class WbAuthError(WbApiError):
    """WB answered 401: the token is missing, malformed, expired or revoked, or (WB's status
    table) its categories do not match the method's; the message carries WB's detail."""


class WbPaymentRequiredError(WbApiError):
    """WB answered 402: a paid service with an empty balance."""


class WbPermissionError(WbApiError):
    """WB answered 403: the token's type or categories do not cover the method."""


class WbRateLimitedError(WbApiError):
    """WB answered 429 and the client could not wait for the window on this path."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.retry_after = retry_after


class WbRequestError(WbApiError):
    """WB answered another 4xx (400, 404, 409, 422, ...): the request itself was rejected."""


class WbMethodDisabledError(WbRequestError):
    """WB has switched the method off (WB answers 404 on its path with "method is disabled" or
    "This method is deprecated"; WB's documents mark some methods "temporarily disabled"), or
    ``WBSYNC_WB_DISABLED_METHODS`` lists it (nothing sent). ``words`` says which WB gave.

    Not a failure of the job: the job layer tries again after ``WBSYNC_DISABLED_RETRY_S``.
    """


class WbPathNotFoundError(WbRequestError):
    """WB answered 404 "path not found": no such path on that host, so the URL is wrong on our
    side (a base URL setting sends the section to another section's host, or elsewhere).

    A configuration error, not WB switching a method off: the first one stops the section's
    requests in the process (later calls raise it again without sending), and a job that meets
    it fails at once, without retries. ``url`` is the URL not found, ``section`` its section
    and ``setting`` the setting to fix.
    """

    def __init__(self, message: str, *, url: str, section: str, setting: str, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.url = url
        self.section = section
        self.setting = setting


class WbReportError(WbApiError):
    """A report task failed on WB's side in a way polling cannot fix: WB did not finish it
    within ``WBSYNC_REPORT_DEADLINE_S`` of its creation, or lost it (purged, canceled, unknown
    id) more than ``WBSYNC_REPORT_RECREATE_MAX`` times for one window. The job's attempt fails
    with this reason; its next attempt asks WB for the window again."""


class WbServerError(WbApiError):
    """WB answered 5xx, and retries within the budget did not help."""


class WbTransportError(WbApiError):
    """The request did not get an answer: timeout, reset, refused connection."""


class WbBadResponseError(WbApiError):
    """WB answered with a body that cannot be parsed or breaks the method's schema."""


class WbBodyTooLargeError(WbBadResponseError):
    """WB's reply body passed ``max_bytes``; reading stopped after ``read_bytes``."""

    def __init__(self, message: str, *, read_bytes: int, max_bytes: int, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.read_bytes = read_bytes
        self.max_bytes = max_bytes


class FailureBudgetExhausted(WbApiError):
    """A job's upstream failures reached its budget: it fails now instead of retrying forever.

    Carries the method, status and request id of the last failure.
    """

    def __init__(self, budget: int, last: WbApiError) -> None:
        reason = str(last).rsplit(" (", 1)[0]
        super().__init__(
            f"{budget} upstream failures in a row without progress, the last: {reason}",
            method=last.method,
            status=last.status,
            request_id=last.request_id,
        )
        # Not passed on as words: the last failure's message above already says them.
        self.words = last.words
        self.budget = budget
        self.last = last


class StoreError(WbSyncError):
    """The database refused or lost an operation."""


class StoreUnavailableError(StoreError):
    """The database could not be reached or is busy (down, restarting, locked): try again later."""


class CabinetNotFoundError(StoreError):
    """No cabinet of that name or id."""


class FeedCursorError(StoreError):
    """A change-feed cursor (``after``) that is not a sequence number the feed has given out.

    ``reason``: ``empty``, ``malformed``, ``other-dataset``, ``future`` (beyond the feed's end),
    ``limit`` (a page size out of range) or ``gone`` (:class:`FeedCursorGoneError`).
    """

    def __init__(self, message: str, *, reason: str = "malformed") -> None:
        super().__init__(message)
        self.reason = reason


class FeedCursorGoneError(FeedCursorError):
    """A cursor below the feed's low-water mark: tombstones after it were pruned, so the feed
    from it would miss deletes. ``low_water`` is the lowest cursor still complete."""

    def __init__(self, message: str, *, low_water: int) -> None:
        super().__init__(message, reason="gone")
        self.low_water = low_water


class QueueError(WbSyncError):
    """The job queue refused an operation."""


class JobLockLostError(QueueError):
    """This worker's lock on a job is gone (expired, or another worker took the job over).

    Nothing may be written for the job any more: its new owner's data would be overwritten.
    """


class MalformedJobError(WbSyncError):
    """A job's data breaks the job contract (``wbsync.jobs.contract``), or its cursor is not of
    the sync's declared shape; it is not retried."""


class LoaderError(WbSyncError):
    """A loader could not read wbsync's API: says which route, the status and the API's detail."""
