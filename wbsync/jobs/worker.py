"""The worker of one queue (``SyncWorker``): runs a processor for its jobs, defers, puts back.

* Resume on time. Two causes made deferred jobs late: (1) the worker rounds its blocking wait up
  to whole seconds until it has asked the blocking connection for the server's version (only then
  does it know that Redis >= 6 takes fractional timeouts), and the port never asks on that
  connection: up to 1 s late. ``SyncWorker.start`` asks. (2) Redis expires blocking commands
  from its cron, ``hz`` times a second (10 by default): up to 100 ms late. So the worker that
  defers a job also wakes the queue when the job is due, by adding a marker as BullMQ does when
  a job is added; a blocked worker then promotes the job at once.
* Seen by the rest of the BullMQ world (docs/interop.md). A worker's blocking connection is
  named as Node BullMQ names its own (``keys.bullmq_worker_connection_name``; the port names
  every connection ``<prefix>:<queue>``, which Node's ``getWorkersCount()`` and Bull Board do not
  count). A deferral sets the job's ``timestamp`` to the moment it is deferred, so
  ``timestamp + delay``, which dashboards show as "will run at", is the resume time. A job whose
  data breaks the contract (``wbsync.jobs.contract``) fails at once, without retries.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Mapping
from typing import Any

import bullmq

from wbsync.errors import JobLockLostError, MalformedJobError, QueueError
from wbsync.jobs import contract
from wbsync.jobs.bullmq_worker import BullmqWorker, put_back_locked
from wbsync.jobs.handle import JobHandle, Processor
from wbsync.jobs.job_data import JobDataWriter, encode
from wbsync.jobs.model import (
    Deferred,
    JobFailedForGood,
    Outcome,
    OutcomeListener,
    cabinet_or_blank,
    job_id,
)
from wbsync.observability.context import JobInfo, correlation, running_job
from wbsync.observability.metrics import JOB_DURATION
from wbsync.redis import keys, redis_bounds
from wbsync.redis.redis_client import redis_failures
from wbsync.system import clock

log = logging.getLogger(__name__)

# Wake a little after the due time: BullMQ promotes a delayed job only once it is due.
_WAKE_MARGIN_S = 0.002


class SyncWorker:
    """Runs ``processor`` for one queue's jobs, ``concurrency`` at a time."""

    def __init__(
        self,
        name: str,
        processor: Processor,
        *,
        redis_url: str,
        prefix: str,
        concurrency: int = 1,
        lock_duration_ms: int = 30_000,
        on_outcome: OutcomeListener | None = None,
    ) -> None:
        self.name = name
        self._processor = processor
        self._on_outcome = on_outcome
        self._redis_url = redis_url
        self._prefix = prefix
        self._options: dict[str, Any] = {
            "prefix": prefix,
            "concurrency": concurrency,
            "autorun": False,
            "lockDuration": lock_duration_ms,
            "stalledInterval": lock_duration_ms,
            "maxStalledCount": 10,
            "drainDelay": redis_bounds.BLOCK_CEILING_S,
            # After a Redis error BullMQ asks again at once (its default: 15 s later): the
            # worker's own fetch has paused for a ``FailureBackoff`` before it gave up.
            "runRetryDelay": 0,
        }
        self._worker: bullmq.Worker | None = None
        self._writer: JobDataWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._wakers: set[asyncio.TimerHandle] = set()
        self._cut = asyncio.Event()
        self._cutting = False  # the runs still going are being cancelled
        self._closed = False

    async def start(self) -> None:
        """Start taking jobs."""
        if self._closed or self._worker is not None:
            raise QueueError(f"worker of {self.name} cannot be started twice or after close")
        options = {**self._options, "connection": redis_bounds.connect(self._redis_url)}
        self._worker = BullmqWorker(
            keys.bullmq_queue_name(self.name),
            self._process,
            options,
            connection_name=keys.bullmq_worker_connection_name(self._options["prefix"], self.name),
        )
        self._writer = JobDataWriter(self._worker.client, self._worker.backend.scripts.toKey)
        # BullMQ emits these once the job's new state is stored, so listeners can rely on it.
        self._worker.on(
            "completed", lambda job, result: self._notify("completed", job.data, result)
        )
        self._worker.on("failed", lambda job, _err: self._notify("failed", job.data))
        # Learn the server's version on the blocking connection: without it the worker rounds
        # its blocking wait up to whole seconds and delayed jobs resume up to 1 s late.
        await self._worker.blockingRedisConnection.getRedisVersion()
        self._task = asyncio.create_task(self._worker.run(), name=f"worker:{self.name}")

    async def close(self, *, grace_s: float | None = None) -> None:
        """Stop taking jobs and wait for running ones to finish (or defer).

        After ``grace_s`` seconds (or at ``cut_short``) the runs still going are cancelled and
        their jobs put back as delayed, due now, keeping the cursor of their last stored page.
        A job fetched while the stop was under way, never run, is put back too.
        """
        if self._closed:
            return
        self._closed = True
        for waker in self._wakers:
            waker.cancel()
        if self._worker is not None:
            await self._close_worker(self._worker, grace_s)
            await self._put_back_unrun(self._worker.id)
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _put_back_unrun(self, worker_id: str) -> None:
        """Put back the active jobs still locked by this (closed) worker: a fetch that raced
        the stop moved them to active, and BullMQ's loop had already ended.

        Each job is moved by its id, without reading its data, and on its own: one that cannot
        be moved (or whose data cannot be read) does not keep the others active.
        """
        queue = bullmq.Queue(
            keys.bullmq_queue_name(self.name),
            {"connection": redis_bounds.connect(self._redis_url), "prefix": self._prefix},
        )
        try:
            ours = f"{worker_id}:"
            put = await put_back_locked(queue.client, queue.backend, lambda t: t.startswith(ours))
            for jid, _ in put:
                log.info("%s: put back job %s, fetched as the worker stopped", self.name, jid)
        except Exception as exc:
            log.warning("%s: could not check for unrun jobs (taken over later): %s", self.name, exc)
        finally:
            await queue.close()

    def cut_short(self) -> None:
        """Cancel the running jobs now instead of after the grace (a second stop signal)."""
        self._cut.set()

    async def _close_worker(self, worker: bullmq.Worker, grace_s: float | None) -> None:
        closing = asyncio.ensure_future(worker.close())
        cut = asyncio.ensure_future(self._cut.wait())
        await asyncio.wait({closing, cut}, timeout=grace_s, return_when=asyncio.FIRST_COMPLETED)
        cut.cancel()
        if not closing.done():
            log.warning(
                "%s: cancelling the jobs still running %s; they are put back and resume "
                "from their cursors",
                self.name,
                "at a second stop signal" if self._cut.is_set() else f"after {grace_s:.0f} s",
            )
            # What close(force=True) does, on the close already under way: BullMQ writes no
            # completion or failure for the cancelled runs; each run puts its job back itself.
            # A run whose cancel was lost stops at its next cursor save (``JobHandle``).
            self._cutting = True
            worker.forceClosing = True
            worker.cancelProcessing()
        await closing

    async def _process(self, job: bullmq.Job, token: str) -> Any:
        await self._check_contract(job)
        assert self._writer is not None
        handle = JobHandle(
            job,
            token,
            self.name,
            writer=self._writer,
            move_to_delayed=self._move_to_delayed,
            wake_at=self._wake_at,
            cut=lambda: self._cutting,
        )
        info = JobInfo(queue=self.name, job_id=handle.id, cabinet=handle.cabinet)
        started = clock.monotonic()
        outcome = "failed"
        with correlation(), running_job(info):
            try:
                result = await self._processor(handle)
                outcome = "completed"
                return result
            except asyncio.CancelledError:  # a stop cut the run short: not the job's failure
                outcome = "cancelled"
                await self._put_back(handle)
                raise
            except Deferred:
                outcome = "deferred"
                self._notify("deferred", handle.data)
                raise bullmq.DelayedError() from None
            except JobFailedForGood as exc:
                raise bullmq.UnrecoverableError(str(exc)) from None
            except JobLockLostError as exc:
                # The job is another worker's now (or will be once it is found stalled): leave
                # it alone. BullMQ's failure path would only fail again on the missing lock.
                outcome = "abandoned"
                log.warning("job %s abandoned: %s", handle.id, exc)
                raise bullmq.DelayedError() from None
            except MalformedJobError as exc:  # found by the processor: as final as ours
                log.error("job %s of %s is malformed and fails: %s", handle.id, self.name, exc)
                raise bullmq.UnrecoverableError(str(exc)) from None
            except Exception as exc:
                # The reason in the line itself (WB's words included), not only in the trace.
                log.exception("job %s failed: %s", handle.id, exc)
                raise
            finally:
                JOB_DURATION.labels(self.name, outcome).observe(clock.monotonic() - started)

    async def _move_to_delayed(
        self, jid: str, token: str, resume_at_ms: int, data: Mapping[str, Any]
    ) -> None:
        """BullMQ's ``moveToDelayed`` (no attempt spent) that also stores ``data``, atomically.

        The script checks the lock before it writes anything: a worker that lost the lock
        changes neither the data nor the state (``JobLockLostError``).
        """
        assert self._worker is not None
        scripts = self._worker.backend.scripts
        now = math.floor(clock.now_ms())
        options = {"skipAttempt": True, "fieldsToUpdate": _delayed_fields(data, now)}
        keys, args = scripts.moveToDelayedArgs(jid, now, token, max(0, resume_at_ms - now), options)
        with redis_failures(f"could not defer job {jid}", QueueError):
            result = await scripts.commands["moveToDelayed"](keys=keys, args=args)
        if isinstance(result, int) and result < 0:
            # -1 no job, -2 no lock, -3 not active, -6 another token's lock: not ours any more.
            raise JobLockLostError(f"job {jid}: lock lost before it could be deferred")

    async def _put_back(self, handle: JobHandle) -> None:
        try:
            await handle.put_back()
        except Exception as exc:
            log.warning("could not put back job %s (it is taken over later): %s", handle.id, exc)

    async def _check_contract(self, job: bullmq.Job) -> None:
        """A malformed job fails now, for good; a numeric cabinet is stored as its string."""
        try:
            fixed = contract.normalised(job.data)
        except MalformedJobError as exc:
            log.error("job %s of %s is malformed and fails: %s", job.id, self.name, exc)
            raise bullmq.UnrecoverableError(str(exc)) from None
        if fixed is not None:
            with redis_failures(f"could not save data of job {job.id}", QueueError):
                await job.updateData(fixed)

    def _wake_at(self, at_ms: int) -> None:
        """Add a queue marker just after ``at_ms``, so a blocked worker takes the job on time."""
        delay_s = max(0.0, (at_ms - clock.now_ms()) / 1000.0) + _WAKE_MARGIN_S

        def wake() -> None:
            self._wakers.discard(handle)
            if self._worker is not None and not self._closed:
                task = asyncio.ensure_future(self._add_marker())
                task.add_done_callback(_log_failure)

        handle = asyncio.get_running_loop().call_later(delay_s, wake)
        self._wakers.add(handle)

    async def _add_marker(self) -> None:
        assert self._worker is not None
        await self._worker.client.zadd(self._worker.keys["marker"], {"0": 0})

    def _notify(self, outcome: str, data: Mapping[str, Any], result: Any = None) -> None:
        if self._on_outcome is not None:
            cabinet = cabinet_or_blank(data)
            jid = job_id(self.name, cabinet)
            self._on_outcome(Outcome(outcome, self.name, cabinet, jid, result))


def _delayed_fields(data: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
    """The job hash fields a deferral writes: the data, and ``timestamp`` = now.

    With ``timestamp`` reset, ``timestamp + delay`` (what dashboards such as Bull Board show as
    the next run) is the time the deferred job resumes.
    """
    return {"data": encode(data), "timestamp": now_ms}


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not wake the queue: %s", task.exception())
