"""The job layer's failure semantics: what a failure costs a job, and when it comes back.

* **Upstream failures** (WB 5xx, transport errors, unusable replies) spend the job's failure
  budget. The count lives in the job's data (``failures``), so it survives deferrals, retries and
  takeovers; a stored page is progress and resets it. When a call gives up below the budget the
  job goes back to ``delayed`` with a backoff (no attempt spent); the failure that reaches the
  budget fails the job for good, with the method, status and WB request id of the last failure
  in its failedReason, an ERROR line and ``wbsync_job_failure_budget_exhausted_total``. So a
  method that always fails costs at most ``budget`` requests per cabinet per run.
* **Infrastructure failures** (the database or Redis unavailable, a queue operation refused) are
  not the job's fault: the job goes back to ``delayed`` with a backoff doubling from
  ``infra_retry_ms`` up to ``infra_retry_max_ms`` (``infra_retries`` in its data, reset by
  progress), spending neither the budget nor an attempt.
* **A short queue's local rate limit** (``RateLimitExceeded``: the wait is past the ceiling)
  defers the job by the ``retry_after`` it names, instead of burning attempts on BullMQ's backoff.
* **A lost lock** means the job is another worker's: nothing more is written (``queue.py``).
* **A method WB has switched off** (``WbMethodDisabledError``) defers the job by
  ``disabled_retry_ms``: one request (or none, when configured off) per cabinet per interval,
  one WARNING each, and the queue neither fails nor hammers WB.
* **A URL WB does not serve** (``WbPathNotFoundError``, 404 "path not found": a base URL
  setting is wrong) fails the job at once, whatever attempts are left: no retry can fix a
  setting, and the client has already stopped the section in the process.
* **A refusal no retry fixes** (a dead token, a missing category, a token type, no balance:
  ``wbsync.wb.refusals``) never reaches this policy: the sync's processor suspends what it
  applies to and completes the job as ``needs_attention`` (``wbsync.cabinets.suspending``).
* Anything else (WB refused the request, a token error, a bug) spends a BullMQ attempt.

Every failure reason is the error's message, so WB's words travel with it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from wbsync.errors import (
    FailureBudgetExhausted,
    JobLockLostError,
    QueueError,
    RateLimitExceeded,
    RedisUnavailableError,
    StoreUnavailableError,
    WbApiError,
    WbBadResponseError,
    WbMethodDisabledError,
    WbPathNotFoundError,
    WbServerError,
    WbTransportError,
)
from wbsync.jobs.handle import JobHandle, Processor
from wbsync.jobs.model import JobFailedForGood
from wbsync.observability.context import counting_upstream_failures
from wbsync.observability.metrics import FAILURE_BUDGET_EXHAUSTED, JOB_RETRIES
from wbsync.system import clock

__all__ = ["FailureBudget", "FailurePolicy", "backoff_ms"]

log = logging.getLogger(__name__)

_UPSTREAM = (WbServerError, WbTransportError, WbBadResponseError)
# Every Redis failure reaches here as one of these: ``wbsync.redis.redis_client.redis_failures``
# translates them where the call is made (the limiter, the throughput counts, the job queue).
_INFRASTRUCTURE = (StoreUnavailableError, RedisUnavailableError, QueueError)


def backoff_ms(retry: int, *, base_ms: float, max_ms: float) -> float:
    """The wait before retry number ``retry`` (from 1): ``base_ms`` doubling, up to ``max_ms``."""
    return float(min(max_ms, base_ms * 2.0 ** max(0, retry - 1)))


@dataclass(slots=True)
class FailureBudget:
    """A job's upstream failures since its last progress; raises when ``limit`` is reached."""

    limit: int
    spent: int = 0
    last: str | None = None
    _last_error: WbApiError | None = field(default=None, repr=False)

    def spend(self, error: WbApiError) -> None:
        """Count ``error`` (once, however often it is reported); raise at the budget."""
        if error is self._last_error:
            return
        self.spent += 1
        self.last, self._last_error = str(error), error
        if self.spent >= self.limit:
            raise FailureBudgetExhausted(self.limit, error)

    def reset(self) -> None:
        """Progress was made: the next failure is the first again."""
        self.spent, self.last, self._last_error = 0, None, None


class FailurePolicy:
    """Wraps a queue's processor with the failure semantics above (every sync queue has one)."""

    def __init__(
        self,
        *,
        budget: int,
        retry_ms: float,
        retry_max_ms: float,
        disabled_retry_ms: float = 3_600_000.0,
        lock_ms: float = 30_000.0,
    ) -> None:
        if budget < 1 or retry_ms <= 0 or retry_max_ms < retry_ms or disabled_retry_ms <= 0:
            raise ValueError(
                "need budget >= 1, 0 < retry_ms <= retry_max_ms and disabled_retry_ms > 0"
            )
        self.disabled_retry_ms = disabled_retry_ms
        self.lock_ms = lock_ms
        self.budget = budget
        self.retry_ms = retry_ms
        self.retry_max_ms = retry_max_ms

    def wrap(self, processor: Processor) -> Processor:
        """``processor`` under this policy."""

        async def guarded(job: JobHandle) -> Any:
            return await self.run(job, processor)

        return guarded

    async def run(self, job: JobHandle, processor: Processor) -> Any:
        """Run ``processor(job)``, counting upstream failures and deciding what a failure costs."""
        data = job.data
        budget = FailureBudget(self.budget, int(data.get("failures", 0)), data.get("last_failure"))
        infra = _Counter(int(data.get("infra_retries", 0)))

        def progress() -> None:
            budget.reset()
            infra.value = 0

        job.on_progress(progress)
        job.carry(
            lambda: {
                "failures": budget.spent,
                "last_failure": budget.last,
                "infra_retries": infra.value,
            }
        )
        try:
            with counting_upstream_failures(budget.spend):
                return await processor(job)
        except FailureBudgetExhausted as exc:
            raise _failed_for_good(job, exc) from exc
        except JobLockLostError:
            raise
        except WbPathNotFoundError as exc:
            log.error("job %s failed for good: %s", job.id, exc)
            raise JobFailedForGood(str(exc)) from exc
        except _UPSTREAM as exc:
            try:
                budget.spend(exc)  # an unusable reply found outside the client counts here
            except FailureBudgetExhausted as spent:
                # Raised inside this handler, it would escape the one above: end it here.
                raise _failed_for_good(job, spent) from exc
            wait = backoff_ms(budget.spent, base_ms=self.retry_ms, max_ms=self.retry_max_ms)
            await self._retry_later(job, "upstream", wait, f"{exc} (failure {budget.spent})")
        except _INFRASTRUCTURE as exc:
            infra.value += 1
            wait = backoff_ms(infra.value, base_ms=self.retry_ms, max_ms=self.retry_max_ms)
            # One line per job and retry would bury the one an operator needs: the dependency
            # monitor (wbsync.observability.health) logs the outage once; the retries are counted.
            await self._retry_later(job, "infrastructure", wait, str(exc), level=logging.DEBUG)
        except RateLimitExceeded as exc:
            wait = exc.retry_after * 1000.0
            await self._retry_later(job, "rate_limit", wait, str(exc), level=logging.INFO)
        except WbMethodDisabledError as exc:
            # Shown where a delayed job's reason is (the status page's "delayed on").
            # No status: WB was not asked, the method is off by this deployment's setting.
            by = "WB" if exc.status is not None else "WBSYNC_WB_DISABLED_METHODS"
            said = f": {exc.words}" if exc.words else ""
            why = {"deferred_by": f"{exc.method} (switched off by {by}{said})"}
            await self._retry_later(job, "disabled", self.disabled_retry_ms, str(exc), note=why)

    async def _retry_later(
        self,
        job: JobHandle,
        reason: str,
        wait_ms: float,
        why: str,
        *,
        level: int = logging.WARNING,
        note: dict[str, str] | None = None,
    ) -> None:
        JOB_RETRIES.labels(job.queue, reason).inc()
        log.log(level, "job %s: %s; retrying in %.0f ms", job.id, why, wait_ms)
        # Redis itself may be away (a restart): keep trying to defer, with the backoff, while
        # the job's lock can still be ours, so a Redis that is back within the lock's lifetime
        # costs no takeover. Past it the job is left to the stalled-job check, which puts it
        # back to wait once its lock expired (its stored cursor is kept).
        give_up_at = clock.monotonic() + self.lock_ms / 1000.0
        tries = 0
        while True:
            try:
                await job.defer(round(wait_ms), note={"retry_reason": reason, **(note or {})})
            except JobLockLostError:
                raise
            except QueueError as exc:
                tries += 1
                pause_ms = backoff_ms(tries, base_ms=self.retry_ms, max_ms=self.retry_max_ms)
                if clock.monotonic() + pause_ms / 1000.0 >= give_up_at:
                    raise JobLockLostError(f"job {job.id} could not be deferred: {exc}") from exc
                log.debug(
                    "job %s: deferral failed (%s); trying again in %.0f ms", job.id, exc, pause_ms
                )
                await clock.sleep_ms(pause_ms)


def _failed_for_good(job: JobHandle, exc: FailureBudgetExhausted) -> JobFailedForGood:
    """The job's end once its budget is spent: one ERROR line, the metric, no more attempts."""
    FAILURE_BUDGET_EXHAUSTED.labels(job.queue).inc()
    log.error("job %s failed for good: %s", job.id, exc)
    return JobFailedForGood(str(exc))


@dataclass(slots=True)
class _Counter:
    value: int
