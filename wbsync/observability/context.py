"""Per-task context: the deferral threshold, the correlation id, the job being run, and where
upstream failures are counted.

Each lives in a ``contextvars.ContextVar``, so it flows through ``await`` chains without being
passed through every signature, and two jobs running at once in one process never see each
other's values (every asyncio task runs in its own copy of the context).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from wbsync.system import clock

if TYPE_CHECKING:
    from wbsync.errors import WbApiError

T = TypeVar("T")

#: Told of every upstream failure (5xx, transport, bad reply); may raise to stop the caller.
FailureListener = Callable[["WbApiError"], None]


@dataclass(frozen=True, slots=True)
class JobInfo:
    """The job whose code is running: put on log records and metric labels."""

    queue: str
    job_id: str
    cabinet: str


_deferral_threshold_ms: ContextVar[float | None] = ContextVar(
    "wbsync_deferral_threshold_ms", default=None
)
_correlation_id: ContextVar[str | None] = ContextVar("wbsync_correlation_id", default=None)
_job: ContextVar[JobInfo | None] = ContextVar("wbsync_job", default=None)
_failure_listener: ContextVar[FailureListener | None] = ContextVar(
    "wbsync_failure_listener", default=None
)


async def run_with_rate_limit_deferral(threshold_ms: float, fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn`` so that a rate-limit wait longer than ``threshold_ms`` defers instead of sleeping.

    Inside, ``RateLimiter.acquire`` raises ``RateLimitDeferred`` for such waits; the caller (the
    job layer's reschedule service) is expected to catch it.
    """
    token = _deferral_threshold_ms.set(threshold_ms)
    try:
        return await fn()
    finally:
        _deferral_threshold_ms.reset(token)


def deferral_threshold_ms() -> float | None:
    """The current deferral threshold, or None outside a deferral context."""
    return _deferral_threshold_ms.get()


async def wait_for_upstream(wait_ms: float, deferral: Callable[[], BaseException]) -> None:
    """Wait ``wait_ms`` for something WB does, not us (a report WB is building).

    Inside a deferral context the wait is never slept, however short: ``deferral()`` (a
    ``ReportPending``) is raised, so the job gives its slot back and the reschedule service
    moves it to delayed for the wait, spending no attempt. Outside one (a sync run in place, a
    tool) the wait is slept.
    """
    if _deferral_threshold_ms.get() is not None:
        raise deferral()
    await clock.sleep_ms(wait_ms)


def new_correlation_id() -> str:
    """A fresh correlation id."""
    return uuid.uuid4().hex


@contextmanager
def correlation(correlation_id: str | None = None) -> Iterator[str]:
    """Set the correlation id (a fresh one if None) for the enclosed code."""
    cid = correlation_id or new_correlation_id()
    token = _correlation_id.set(cid)
    try:
        yield cid
    finally:
        _correlation_id.reset(token)


def correlation_id() -> str | None:
    """The current correlation id, if any."""
    return _correlation_id.get()


@contextmanager
def running_job(info: JobInfo) -> Iterator[JobInfo]:
    """Mark the enclosed code as running ``info``'s job."""
    token = _job.set(info)
    try:
        yield info
    finally:
        _job.reset(token)


def current_job() -> JobInfo | None:
    """The job whose code is running, if any."""
    return _job.get()


@contextmanager
def counting_upstream_failures(listener: FailureListener) -> Iterator[None]:
    """Tell ``listener`` of every upstream failure in the enclosed code (the job's budget)."""
    token = _failure_listener.set(listener)
    try:
        yield
    finally:
        _failure_listener.reset(token)


def report_upstream_failure(error: WbApiError) -> None:
    """Count one upstream failure against the running job's budget, if there is one.

    The budget raises ``FailureBudgetExhausted`` from here once it is spent.
    """
    listener = _failure_listener.get()
    if listener is not None:
        listener(error)
