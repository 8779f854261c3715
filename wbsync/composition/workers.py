"""Workers of the sync queues, composed from the Runtime: each sync becomes a processor, long ones
wrapped for deferral."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from wbsync.cabinets.suspending import PROBE_FIELD, SuspensionGate
from wbsync.config import QUEUE_OPTIONS, Settings
from wbsync.errors import MalformedJobError, RateLimitDeferred, WbSyncError
from wbsync.jobs.failures import FailurePolicy
from wbsync.jobs.handle import JobHandle, Processor
from wbsync.jobs.job_data import StreamEntry
from wbsync.jobs.lag import STARTED_FIELD, start_lag_ms
from wbsync.jobs.model import OutcomeListener
from wbsync.jobs.reschedule import RescheduleService
from wbsync.jobs.worker import SyncWorker
from wbsync.observability.metrics import SYNC_PAGES, SYNC_ROWS, SYNC_ROWS_WRITTEN
from wbsync.redis.redis_client import is_cluster
from wbsync.shared.runtime import Runtime
from wbsync.store.changes import ChangeEvent
from wbsync.store.runs import failure_reason
from wbsync.syncs import SYNCS, Sync, SyncInput, SyncPage, SyncTotals, run_sync
from wbsync.system import clock
from wbsync.wb.refusals import refusal_for_good

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
    settings = runtime.settings
    gate = SuspensionGate(
        runtime.store, probe_ms=settings.suspension_probe_s * 1000.0 * settings.time_scale
    )
    with_cursor = not is_cluster(runtime.redis_url)
    pages_counter, rows_counter = SYNC_PAGES.labels(sync.name), SYNC_ROWS.labels(sync.name)
    written_counter = SYNC_ROWS_WRITTEN.labels(sync.name)

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
        # What WB refused for good is not asked again (one probe per probe interval).
        admission = await gate.admit(sync, cabinet, job.data)
        if admission.held is not None:
            return admission.held
        if admission.probing:
            job.carry(lambda: {PROBE_FIELD: True})

        # The whole job's counts, over its deferrals: each run continues them.
        totals = _carried(job.data)
        before = SyncTotals(totals.pages, totals.rows, totals.tombstoned, totals.fetched)
        written = totals.rows

        async def saved(page: SyncPage, event: ChangeEvent | None) -> None:
            nonlocal written
            count = None
            if page.dataset is not None:
                pages_counter.inc()
                rows_counter.inc(len(page.rows))
                written_counter.inc(totals.rows - written)
                written = totals.rows
                count = runtime.throughput.count_page(job.queue)  # with the cursor: one call
            done = _counts(totals)
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
            await run_sync(sync, inp, on_page=saved, announce=False, totals=totals)
        except RateLimitDeferred:
            raise  # not a failure: the reschedule service moves the job to delayed
        except Exception as exc:
            refusal = refusal_for_good(exc)
            if refusal is not None:  # no retry fixes it: suspend, spend no attempt
                return await gate.suspend(cabinet, sync, refusal)
            await _record_failure(runtime, cabinet.id, sync.name, exc, job.attempts_made + 1)
            raise
        if admission.probing:
            await gate.accepted(cabinet, admission.probing)
        # ``rows`` of the run log are rows fetched, as they always were (docs/api.md).
        runtime.run_log.succeeded(
            cabinet.id, sync.name, pages=totals.pages, rows=totals.fetched
        )  # written behind
        return {
            "pages": totals.pages - before.pages,  # this run's (after the last deferral)
            "rows": totals.rows - before.rows,  # rows written by this run
            "job_pages": totals.pages,
            "rows_fetched": totals.fetched,  # the whole job's
            "rows_written": totals.rows,
        }

    return process


def _carried(data: Mapping[str, Any]) -> SyncTotals:
    """The counts a job's earlier runs saved in its data (``rows`` is rows fetched)."""
    return SyncTotals(
        pages=int(data.get("pages", 0)),
        rows=int(data.get("rows_written", 0)),
        tombstoned=int(data.get("tombstoned", 0)),
        fetched=int(data.get("rows", 0)),
    )


def _counts(totals: SyncTotals) -> dict[str, int]:
    """What a job's data keeps of its counts (``jobs.contract.COUNTS``)."""
    return {
        "pages": totals.pages,
        "rows": totals.fetched,
        "rows_written": totals.rows,
        "tombstoned": totals.tombstoned,
    }


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


def queue_option(settings: Settings, queue: str, key: str) -> float:
    """Per-queue option ``key`` of ``queue`` (``wbsync.config.QUEUE_OPTIONS``), unscaled: its
    entry in the option's setting, else its sync's own figure, else the option's fallback
    setting. ``KeyError`` for a key no option has."""
    option = QUEUE_OPTIONS[key]
    named: float | None = getattr(settings, option.field).get(queue)
    if named is not None:
        return named
    sync = SYNCS.get(queue)
    own: float | None = getattr(sync, option.own) if sync and option.own else None
    if own is not None:
        return own
    if option.fallback is None:
        raise WbSyncError(f"{option.variable}: queue {queue!r} is not loaded here")
    fallback: float = getattr(settings, option.fallback)
    return fallback


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
    workers = []
    for name in names if names is not None else SYNCS:
        sync = SYNCS[name]
        processor = sync_processor(sync, runtime)
        if sync.long:
            threshold_ms = queue_option(settings, name, "defer_threshold_ms") * scale
            processor = RescheduleService(threshold_ms=threshold_ms).wrap(processor)
        policy = FailurePolicy(
            budget=int(queue_option(settings, name, "failure_budget")),
            retry_ms=settings.infra_retry_ms * scale,
            retry_max_ms=settings.infra_retry_max_ms * scale,
            disabled_retry_ms=settings.disabled_retry_s * 1000.0 * scale,
            lock_ms=settings.job_lock_ms,
        )
        workers.append(
            SyncWorker(
                name,
                policy.wrap(processor),
                redis_url=runtime.redis_url,
                prefix=runtime.queue_prefix,
                concurrency=concurrency or int(queue_option(settings, name, "concurrency")),
                lock_duration_ms=settings.job_lock_ms,
                on_outcome=on_outcome,
            )
        )
    return workers
