"""Workers of the sync queues, composed from the Runtime: each sync becomes a processor, long ones
wrapped for deferral."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from wbsync import clock
from wbsync.config import Settings
from wbsync.errors import MalformedJobError, RateLimitDeferred, WbSyncError
from wbsync.jobs.failures import FailurePolicy
from wbsync.jobs.handle import JobHandle, Processor
from wbsync.jobs.job_data import StreamEntry
from wbsync.jobs.lag import STARTED_FIELD, start_lag_ms
from wbsync.jobs.model import OutcomeListener
from wbsync.jobs.reschedule import RescheduleService
from wbsync.jobs.worker import SyncWorker
from wbsync.metrics import SYNC_PAGES, SYNC_ROWS
from wbsync.redis_client import is_cluster
from wbsync.runtime import Runtime
from wbsync.store.changes import ChangeEvent
from wbsync.store.runs import failure_reason
from wbsync.syncs import SYNCS, Sync, SyncInput, SyncPage, run_sync

log = logging.getLogger(__name__)


def sync_processor(sync: Sync, runtime: Runtime) -> Processor:
    """A processor running ``sync`` for the job's cabinet, from the job's or the stored cursor.

    The job's own cursor (a resumed, retried or recovered run) comes first; a new job of an
    incremental sync takes the ``wb_sync_cursors`` table's; other new jobs start from scratch.
    Each stored page's change-stream event and the run's start lag go in the script call that
    saves the job's cursor (on a Redis Cluster the stream is on another slot: its event goes
    apart); a lag no save took is stored when the run ends.
    """
    stream = runtime.change_stream
    with_cursor = not is_cluster(runtime.redis_url)
    pages_counter, rows_counter = SYNC_PAGES.labels(sync.name), SYNC_ROWS.labels(sync.name)

    async def process(job: JobHandle) -> dict[str, Any]:
        _measure_lag(runtime, job)
        try:
            return await run(job)
        finally:
            sample = job.unsent_lag()
            if sample is not None:
                await runtime.lag.write(sample)

    async def run(job: JobHandle) -> dict[str, Any]:
        store = runtime.store
        if not job.cabinet.isdecimal():
            raise MalformedJobError(f"job data 'cabinet' must be a cabinet id, got {job.cabinet!r}")
        cursor = job.cursor
        if cursor is None and sync.incremental:
            # A new run of an incremental sync goes on from the last run's cursor (read with the
            # cabinet); the others start over (their cursor only resumes the job that saved it).
            cabinet, cursor = await store.cabinets.with_cursor(int(job.cabinet), sync.name)
        else:
            cabinet = await store.cabinets.get(int(job.cabinet))
        if not cabinet.active:
            log.info("cabinet %s is inactive; nothing to do", cabinet.name)
            return {"skipped": "inactive"}

        # Pages and rows of the whole job, over its deferrals: each run continues the count.
        done = {"pages": int(job.data.get("pages", 0)), "rows": int(job.data.get("rows", 0))}

        async def saved(page: SyncPage, event: ChangeEvent | None) -> None:
            count = None
            if page.dataset is not None:
                done["pages"] += 1
                done["rows"] += len(page.rows)
                pages_counter.inc()
                rows_counter.inc(len(page.rows))
                count = runtime.throughput.count_page(job.queue)  # with the cursor: one call
            entry = None
            if event is not None and with_cursor:
                entry = StreamEntry(
                    stream.key, stream.fields(event), stream.maxlen, counter=stream.counter
                )
            elif event is not None:
                await stream.publish(event)
            await job.save_cursor(page.cursor, done, count=count, entry=entry)

        inp = SyncInput(
            client=runtime.client(cabinet),
            store=store,
            cabinet_id=cabinet.id,
            cursor=cursor,
            today=clock.wb_today(),  # WB reads every date as Moscow's
            options=runtime.sync_options,
        )
        try:
            totals = await run_sync(sync, inp, on_page=saved, announce=False)
        except RateLimitDeferred:
            raise  # not a failure: the reschedule service moves the job to delayed
        except Exception as exc:
            await _record_failure(runtime, cabinet.id, sync.name, exc, job.attempts_made + 1)
            raise
        runtime.run_log.succeeded(cabinet.id, sync.name, **done)  # written behind
        return {"pages": totals.pages, "rows": totals.rows, "job_pages": done["pages"]}

    return process


def _measure_lag(runtime: Runtime, job: JobHandle) -> None:
    """Measure how late a scheduled run starts, at its first start only (``wbsync.jobs.lag``);
    the sample goes with the run's first write of the job's data."""
    now = clock.now_ms()
    lag_ms = start_lag_ms(job.data, now)
    if lag_ms is not None:
        job.carry(lambda: {STARTED_FIELD: int(now)})  # stored with the run's first write
        job.note_lag(runtime.lag.sample(job.queue, lag_ms))


async def _record_failure(
    runtime: Runtime, cabinet_id: int, sync: str, exc: Exception, attempts: int
) -> None:
    """Keep the failure's reason for the operator; a failing record never hides the failure."""
    reason = failure_reason(exc)
    try:
        await runtime.store.runs.failed(cabinet_id, sync, reason=reason, attempts=attempts)
    except WbSyncError as record_exc:
        log.warning("could not record the failure of %s: %s", sync, record_exc)


def queue_concurrency(settings: Settings, queue: str) -> int:
    """Jobs ``queue``'s worker runs at once: its entry in WBSYNC_QUEUE_CONCURRENCY, else its
    sync's own figure (``Sync.concurrency``), else WBSYNC_SYNC_QUEUE_CONCURRENCY."""
    named = settings.queue_concurrency.get(queue)
    if named is not None:
        return named
    sync = SYNCS.get(queue)
    own = None if sync is None else sync.concurrency
    return own if own is not None else settings.sync_queue_concurrency


def build_workers(
    runtime: Runtime,
    names: Iterable[str] | None = None,
    *,
    concurrency: int | None = None,
    on_outcome: OutcomeListener | None = None,
) -> list[SyncWorker]:
    """One (unstarted) worker per named queue (all by default); long syncs defer long waits."""
    settings = runtime.settings
    scale = settings.time_scale
    service = RescheduleService(threshold_ms=settings.defer_threshold_ms * scale)
    policy = FailurePolicy(
        budget=settings.job_failure_budget,
        retry_ms=settings.infra_retry_ms * scale,
        retry_max_ms=settings.infra_retry_max_ms * scale,
        disabled_retry_ms=settings.disabled_retry_s * 1000.0 * scale,
        lock_ms=settings.job_lock_ms,
    )
    workers = []
    for name in names if names is not None else SYNCS:
        sync = SYNCS[name]
        processor = sync_processor(sync, runtime)
        workers.append(
            SyncWorker(
                name,
                policy.wrap(service.wrap(processor) if sync.long else processor),
                redis_url=runtime.redis_url,
                prefix=runtime.queue_prefix,
                concurrency=concurrency or queue_concurrency(settings, name),
                lock_duration_ms=settings.job_lock_ms,
                on_outcome=on_outcome,
            )
        )
    return workers
