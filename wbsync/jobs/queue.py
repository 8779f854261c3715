"""The producer and inspector of one queue (``SyncQueue``), over BullMQ's Python port.

One job per (queue, cabinet): the job id is derived from both, so adding a cabinet whose job is
live (active, waiting, delayed, prioritized) adds nothing. Finished jobs are cleared first,
because BullMQ also ignores an id that sits in ``completed`` or ``failed``. Connections come from
``wbsync.redis.redis_bounds`` (bounded timeouts and retries, not BullMQ's 20 retries up to 20 s
apart).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import bullmq

from wbsync.errors import QueueError
from wbsync.jobs.model import (
    FINISHED_STATES,
    LIVE_STATES,
    EnqueueResult,
    cabinet_or_blank,
    job_id,
)
from wbsync.jobs.views import JobView, job_states, read_jobs
from wbsync.redis import keys, redis_bounds, redis_client
from wbsync.redis.redis_client import as_text, describe, is_redis_failure, redis_failures

_KEEP_FAILED = 1000
ENQUEUE_BATCH = 1000
"""Cabinets one enqueue looks up and adds per round (one pipelined EXISTS, one pipelined
``addBulk``, which redis-py precedes with a SCRIPT EXISTS: three round trips): a pass over
100,000 cabinets measured 303 round trips (``wbsync bench fanout``), each pipeline a bounded
~1,000 commands (a few hundred KB), so no single call holds Redis or the event loop long."""
# On a cluster BullMQ cannot pipeline its scripts (redis-py refuses EVALSHA in a cluster
# pipeline), so jobs are added one call each, this many in flight per queue.
CLUSTER_ADDS_IN_FLIGHT = 32


class SyncQueue:
    """A producer and inspector of one queue's jobs."""

    def __init__(
        self,
        name: str,
        *,
        redis_url: str,
        prefix: str,
        attempts: int = 3,
        backoff_ms: int = 1000,
        backoff_type: str = "exponential",
    ) -> None:
        if backoff_type not in ("exponential", "fixed"):
            raise ValueError(f"backoff_type must be 'exponential' or 'fixed', got {backoff_type!r}")
        self.name = name
        self._cluster = redis_client.is_cluster(redis_url)
        self._queue = bullmq.Queue(
            keys.bullmq_queue_name(name),
            {"connection": redis_bounds.connect(redis_url), "prefix": prefix},
        )
        self._job_options: dict[str, Any] = {
            "attempts": attempts,
            "backoff": {"type": backoff_type, "delay": backoff_ms},
            "removeOnComplete": True,
            "removeOnFail": {"count": _KEEP_FAILED},
        }
        self._closed = False

    async def enqueue(self, cabinet: str, data: Mapping[str, Any] | None = None) -> EnqueueResult:
        """Add (queue, cabinet)'s job unless one is live; a finished one is replaced."""
        [result] = await self.enqueue_many([cabinet], data)
        return result

    async def enqueue_many(
        self,
        cabinets: Sequence[str],
        data: Mapping[str, Any] | None = None,
        *,
        batch: int = ENQUEUE_BATCH,
        delay_ms: int = 0,
    ) -> list[EnqueueResult]:
        """Add each cabinet's job, all with the same ``data``, unless one is live
        (``enqueue_each``)."""
        return await self.enqueue_each(
            dict.fromkeys(cabinets, data), batch=batch, delay_ms=delay_ms
        )

    async def enqueue_each(
        self,
        data: Mapping[str, Mapping[str, Any] | None],
        *,
        batch: int = ENQUEUE_BATCH,
        delay_ms: int = 0,
    ) -> list[EnqueueResult]:
        """Add each cabinet's job (``data`` maps a cabinet to its job's data) unless one is
        live; two round trips per ``batch`` cabinets, whatever their data.

        One pipelined EXISTS per batch finds the cabinets with no stored job (the common case:
        completed jobs are removed), which are added in one pipelined ``addBulk``; BullMQ ignores
        an id a concurrent producer added first, so one job per (queue, cabinet) still holds.
        A cabinet with a stored job is skipped if the job is live, else the job is replaced;
        the live ones are told by one read of the queue's job states (``views.job_states``)
        per call, not one state lookup each (a job that fails after that read is skipped as
        live: the fan-out's failed-job retry takes it). Results follow ``data``'s order; an
        added job's state is reported as "waiting" without reading it back. With ``delay_ms``
        new jobs start delayed that long. A Redis failure raises ``QueueError``: the batches
        before it are added, and enqueueing again adds only what is missing (the job ids).
        """
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        distinct = list(data)
        results: dict[str, EnqueueResult] = {}
        live: dict[str, str] | None = None
        for start in range(0, len(distinct), batch):
            chunk = distinct[start : start + batch]
            with redis_failures(f"could not enqueue on {self.name}", QueueError):
                async with self._queue.client.pipeline(transaction=False) as pipe:
                    for cabinet in chunk:
                        pipe.exists(self._queue.toKey(job_id(self.name, cabinet)))
                    stored = await pipe.execute()
                fresh = [c for c, exists in zip(chunk, stored, strict=True) if not exists]
                await self._add([self._bulk_entry(c, data[c], delay_ms) for c in fresh])
            for cabinet in fresh:
                results[cabinet] = EnqueueResult(job_id(self.name, cabinet), True, "waiting")
            kept = [c for c, exists in zip(chunk, stored, strict=True) if exists]
            if kept and live is None:
                live = (await job_states(self._queue.client, [self]))[self.name]
            for cabinet in kept:
                state = (live or {}).get(cabinet)
                if state in LIVE_STATES:
                    results[cabinet] = EnqueueResult(job_id(self.name, cabinet), False, state)
                else:  # failed, finished or unknown: looked at on its own
                    results[cabinet] = await self._skip_or_replace(cabinet, data[cabinet])
        return [results[c] for c in distinct]

    async def _skip_or_replace(self, cabinet: str, data: Mapping[str, Any] | None) -> EnqueueResult:
        jid = job_id(self.name, cabinet)
        with redis_failures(f"could not enqueue {jid}", QueueError):
            state = await self._queue.getJobState(jid)
            if state in LIVE_STATES:
                return EnqueueResult(job_id=jid, added=False, state=state)
            if state in FINISHED_STATES:
                await self._queue.remove(jid)
            await self._add([self._bulk_entry(cabinet, data)])
        return EnqueueResult(job_id=jid, added=True, state="waiting")

    async def _add(self, entries: list[dict[str, Any]]) -> None:
        """Add jobs: one pipelined ``addBulk`` on one server, bounded parallel adds on a cluster."""
        if not entries:
            return
        if not self._cluster:
            await self._queue.addBulk(entries)
            return
        for start in range(0, len(entries), CLUSTER_ADDS_IN_FLIGHT):
            window = entries[start : start + CLUSTER_ADDS_IN_FLIGHT]
            await asyncio.gather(
                *(self._queue.add(e["name"], e["data"], e["opts"]) for e in window)
            )

    def _bulk_entry(
        self, cabinet: str, data: Mapping[str, Any] | None, delay_ms: int = 0
    ) -> dict[str, Any]:
        opts = {**self._job_options, "jobId": job_id(self.name, cabinet)}
        if delay_ms > 0:
            opts["delay"] = delay_ms
        return {"name": self.name, "data": {**(data or {}), "cabinet": cabinet}, "opts": opts}

    async def retry(self, cabinet: str) -> str:
        """Run the cabinet's failed job again with a fresh attempt budget; its state before.

        Only a failed job is moved (back to waiting, keeping its data and cursor); for any
        other state nothing changes and that state ("missing" if there is no job) is returned.
        """
        jid = job_id(self.name, cabinet)
        try:
            job = await self._queue.getJob(jid)
            if job is None:
                return "missing"
            state = str(await job.getState())
            if state == "failed":
                await job.retry("failed", {"resetAttemptsMade": True})
        except Exception as exc:  # BullMQ raises a bare Exception when the job moved meanwhile
            why = describe(exc) if is_redis_failure(exc) else str(exc)
            raise QueueError(f"could not retry {jid}: {why}") from exc
        return state

    async def promote_delayed(self) -> None:
        """Make every delayed job due now (an operator's "run the deferred jobs now")."""
        with redis_failures(f"could not promote delayed jobs of {self.name}", QueueError):
            await self._queue.promoteJobs()

    async def failed_at(self) -> dict[str, int]:
        """Every cabinet whose job sits in ``failed``, with the time (ms) it failed."""
        with redis_failures(f"could not read failed jobs of {self.name}", QueueError):
            entries = await self._queue.client.zrange(
                self._queue.keys["failed"], 0, -1, withscores=True
            )
        head = f"{self.name}."
        return {
            as_text(jid).removeprefix(head): int(score)
            for jid, score in entries
            if as_text(jid).startswith(head)
        }

    async def job(self, cabinet: str) -> JobView | None:
        """The cabinet's job in this queue, if one is stored."""
        jid = job_id(self.name, cabinet)
        with redis_failures(f"could not read a job of {self.name}", QueueError):
            try:
                job = await self._queue.getJob(jid)
            # Data or options BullMQ cannot parse (ValueError; AttributeError, TypeError for
            # options that are JSON but not an object): the view from the stored fields.
            except (ValueError, AttributeError, TypeError):
                state = await self._queue.getJobState(jid)
                return (await read_jobs(self._queue.client, [(self, cabinet, state)]))[0]
            return None if job is None else await self._view(job)

    async def live_jobs(self) -> dict[str, JobView]:
        """Every cabinet that has a live job in this queue, with that job: one read of the
        queue's states and one pipeline of the jobs' fields, however many there are."""
        states = (await job_states(self._queue.client, [self]))[self.name]
        live = [(self, cabinet, state) for cabinet, state in states.items() if state in LIVE_STATES]
        views = await read_jobs(self._queue.client, live)
        return {view.cabinet: view for view in views if view is not None}

    async def counts(self) -> dict[str, int]:
        """Number of jobs per state."""
        states = (*LIVE_STATES, *FINISHED_STATES)
        with redis_failures(f"could not count the jobs of {self.name}", QueueError):
            counts = await self._queue.getJobCounts(*states)
        return {state: int(counts.get(state, 0)) for state in states}

    async def _view(self, job: bullmq.Job) -> JobView:
        state = await job.getState()
        run_at = await self._delayed_until(job.id) if state == "delayed" else None
        return JobView(
            job_id=job.id,
            queue=self.name,
            cabinet=cabinet_or_blank(job.data),
            state=state,
            data=dict(job.data),
            attempts_made=int(job.attemptsMade or 0),
            attempts_started=int(job.attemptsStarted or 0),
            run_at_ms=int(run_at) if run_at is not None else None,
            failed_reason=job.failedReason,
        )

    async def _delayed_until(self, jid: str) -> int | None:
        # BullMQ scores a delayed job (run-at ms) * 0x1000 + a counter; this stays right whether
        # the job waits for a rate-limit window or for a retry's backoff.
        score = await self._queue.client.zscore(self._queue.keys["delayed"], jid)
        return None if score is None else int(score) // 0x1000

    async def obliterate(self) -> None:
        """Delete the queue and every job in it."""
        await self._queue.obliterate(force=True)

    async def close(self) -> None:
        """Close the queue's connection; the object cannot be used again."""
        if not self._closed:
            self._closed = True
            await self._queue.close()
