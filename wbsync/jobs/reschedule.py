"""The reschedule service: the one place that sets the deferral context around a job.

A processor wrapped by it runs inside ``run_with_rate_limit_deferral``. When the limiter finds a
wait longer than the threshold it raises ``RateLimitDeferred``; the service moves the job to
delayed for exactly that wait (no attempt spent), counts it, and lets the worker take the next
job. The job's data (and so its cursor) is kept; the next run continues from it. A report task
WB is still building raises ``ReportPending``
(``wbsync.observability.context.wait_for_upstream``): the same deferral, labelled with its own
reason (``report``) on the metric, in the job's data (``deferral_reason``) and on the status
page (``deferred_by``: "waiting on WB's report ...").
"""

from __future__ import annotations

import logging
from typing import Any

from wbsync.errors import RateLimitDeferred
from wbsync.jobs.handle import JobHandle, Processor
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.observability.metrics import DEFERRALS, RESCHEDULES

log = logging.getLogger(__name__)


class RescheduleService:
    """Wraps processors of long syncs so that long rate-limit waits defer the job."""

    def __init__(self, *, threshold_ms: float) -> None:
        self.threshold_ms = threshold_ms

    def wrap(self, processor: Processor) -> Processor:
        """``processor`` run under the deferral context, deferring on long waits."""

        async def deferring(job: JobHandle) -> Any:
            return await self.run(job, processor)

        return deferring

    async def run(self, job: JobHandle, processor: Processor) -> Any:
        """Run ``processor(job)``; on ``RateLimitDeferred`` move the job to delayed."""
        try:
            return await run_with_rate_limit_deferral(self.threshold_ms, lambda: processor(job))
        except RateLimitDeferred as deferred:
            reason = deferred.reason
            DEFERRALS.labels(job.queue, reason).inc()
            if reason == "rate_limit":
                RESCHEDULES.labels(job.queue, deferred.scope.group).inc()
            deferrals = int(job.data.get("deferrals", 0)) + 1
            log.info(
                "deferred for %d ms by %s (deferral %d)",
                deferred.wait_ms,
                deferred.scope if reason == "rate_limit" else deferred.waiting_on,
                deferrals,
            )
            note = {
                "deferrals": deferrals,
                "deferred_by": deferred.waiting_on,
                "deferral_reason": reason,
            }
            await job.defer(deferred.wait_ms, note=note)
