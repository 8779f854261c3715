"""The adapter over BullMQ's Python port: the only module of wbsync that imports ``bullmq``.

What it adds to the library, and why:

* One job per (queue, cabinet): the job id is derived from both, so adding a cabinet whose job
  is live (active, waiting, delayed, prioritized) adds nothing. Finished jobs are cleared first,
  because BullMQ also ignores an id that sits in ``completed`` or ``failed``.
* Connections come from ``wbsync.redis_bounds`` (bounded timeouts and retries, not BullMQ's
  20 retries up to 20 s apart), and the worker's blocking wait is capped below the command
  timeout (``BLOCK_CEILING_S``), so the blocking pop never times out on the client side.
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
import contextlib
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import bullmq

from wbsync import clock, keys, redis_bounds, redis_client
from wbsync.context import JobInfo, correlation, running_job
from wbsync.errors import JobLockLostError, MalformedJobError, QueueError
from wbsync.jobs import contract
from wbsync.jobs.job_data import JobDataWriter, decode, encode
from wbsync.lua import lua_script
from wbsync.metrics import JOB_DURATION
from wbsync.redis_client import RedisClient, describe, is_redis_failure, redis_failures

log = logging.getLogger(__name__)

LIVE_STATES = ("active", "waiting", "delayed", "prioritized")
_FINISHED_STATES = ("completed", "failed")
_KEEP_FAILED = 1000
# Wake a little after the due time: BullMQ promotes a delayed job only once it is due.
_WAKE_MARGIN_S = 0.002
# On a cluster BullMQ cannot pipeline its scripts (redis-py refuses EVALSHA in a cluster
# pipeline), so jobs are added one call each, this many in flight per queue.
CLUSTER_ADDS_IN_FLIGHT = 32


class _Worker(bullmq.Worker):  # type: ignore[misc]
    """BullMQ's worker, made to treat Redis as infrastructure:

    * its blocking wait is capped below the client's command timeout, and its blocking
      connection named as Node BullMQ names a worker's;
    * every Redis failure of a fetch of jobs is followed by a ``FailureBackoff`` pause. BullMQ
      waits only 0.1 s after an error it does not take for a connection error, and redis-py's
      cluster client raises many (cluster down, TRYAGAIN, AttributeError while it reconnects):
      one loop per slot spun while a shard was down. Once closing it fetches nothing (BullMQ
      retries a failed fetch at once while it closes, until the grace ends);
    * a job that a fetch given up on took anyway is put back (``_put_back_taken``);
    * the end of each run (completed, retried, failed) is written through Redis failures
      (``_end``).
    """

    def __init__(self, *args: Any, connection_name: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connection_name = connection_name
        self._named = False
        self._fetches = redis_bounds.FailureBackoff()
        self._stopping = asyncio.Event()
        self._given_up: dict[str, float] = {}  # tokens of fetches given up on: when
        self._looked_at = 0.0
        # BullMQ writes a run's end through these four, once each (a job's moveToFailed picks
        # one of the last three); there is no other place to put the retry.
        for name in ("moveToCompleted", "moveToFailed", "moveToDelayed", "retryJob"):
            setattr(self.backend, name, self._persistent(getattr(self.backend, name)))

    @property
    def maximumBlockTimeout(self) -> float:
        return redis_bounds.BLOCK_CEILING_S

    async def nextJobFromJobData(
        self,
        job_data: dict[str, Any] | None = None,
        job_id: str | None = None,
        limit_until: int = 0,
        delay_until: int = 0,
        token: str | None = None,
    ) -> Any:
        # BullMQ parses a fetched job's data here, after moving it to active: data it cannot
        # parse would raise out of the fetch and leave the job active without a run, for the
        # stalled check to put back, again and again (the stall limit is applied only once the
        # job is parsed). Such a job fails now instead, through BullMQ's own deferred failure.
        if job_data and job_data.get("data") is not None:
            try:
                decode(job_data["data"])
            except MalformedJobError as exc:
                log.error("job %s of %s is malformed and fails: %s", job_id, self.name, exc)
                job_data = {**job_data, "data": "{}", "defa": str(exc)}
        return await super().nextJobFromJobData(job_data, job_id, limit_until, delay_until, token)

    async def _ensure_client_names(self) -> None:
        # Replaces the port's naming of every connection: Node names only the blocking one, and
        # counts one worker per connection of that name. The name survives reconnects.
        if not self._named:
            await self.blockingRedisConnection.set_client_name(self._connection_name)
            self._named = True

    def isConnectionError(self, error: Exception) -> bool:
        # BullMQ retries these after ``runRetryDelay`` (0: ``getNextJob`` takes the pause).
        return is_redis_failure(error) or bool(super().isConnectionError(error))

    async def close(self, force: bool = False) -> None:
        self._stopping.set()
        await super().close(force)

    async def getNextJob(self, token: str) -> Any:
        if self.closing:
            return None
        try:
            job = await super().getNextJob(token)
        except Exception as exc:
            if not self.isConnectionError(exc):
                raise
            # A fetch that timed out may still run on the server (a half-open link).
            self._given_up[token] = clock.monotonic()
            pause = self._fetches.failed()
            if self._fetches.failures == 1:
                log.warning(
                    "%s: fetching jobs failed (%s); trying again after pauses of %.0f s "
                    "doubling up to %.0f s",
                    self.name,
                    describe(exc),
                    pause,
                    redis_bounds.OUTAGE_BACKOFF_CAP_S,
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), pause)
            raise
        if self._fetches.failures:
            log.info("%s: fetching jobs again", self.name)
        self._fetches.succeeded()
        if self._given_up and clock.monotonic() - self._looked_at >= redis_bounds.RECONNECT_DELAY_S:
            await self._put_back_taken()
        return job

    async def _put_back_taken(self) -> None:
        """Put back (due now, no attempt spent) the jobs locked by a fetch this worker gave up
        on: over a half-open link a ``moveToActive`` that timed out on the client can run once
        the link heals, leaving a job active under a lock nobody renews until the stalled-job
        check (one to two lock periods later). Looked for at a fetch (at most once per
        ``RECONNECT_DELAY_S``) while such a fetch is younger than a lock period; past that its
        lock has expired and the check takes over."""
        self._looked_at = clock.monotonic()
        horizon = clock.monotonic() - self.opts["lockDuration"] / 1000.0
        self._given_up = {t: at for t, at in self._given_up.items() if at > horizon}
        tokens = set(self._given_up)
        try:
            put = await _put_back_locked(self.client, self.backend, lambda t: t in tokens)
        except Exception as exc:
            if not is_redis_failure(exc):
                raise
            return  # looked for again at the next fetch
        for jid, token in put:
            self._given_up.pop(token, None)
            log.warning(
                "%s: job %s was taken by a fetch this worker had given up on (Redis answered "
                "late); put back",
                self.name,
                jid,
            )

    def _persistent(self, write: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def written(*args: Any, **kwargs: Any) -> Any:
            return await self._end(write, *args, **kwargs)

        return written

    async def _end(self, write: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """Write a run's end; after a Redis failure, again after a ``FailureBackoff`` pause
        while the job's lock is surely still ours (half its duration: the lock was renewed at
        most that long before the first failure).

        BullMQ writes the end once: a failure there failed the job with the Redis error (an
        attempt spent) or, when that write failed too, left it active with nothing logged.
        Past the lock, BullMQ is told to write nothing more (``DelayedError``) and the
        stalled-job check puts the job back once its lock has expired.
        """
        jid = getattr(args[0], "id", args[0])
        backoff = redis_bounds.FailureBackoff()
        give_up_at = clock.monotonic() + self.opts["lockDuration"] / 2000.0
        while True:
            try:
                return await write(*args, **kwargs)
            except Exception as exc:
                if not self.isConnectionError(exc):
                    raise
                pause = backoff.failed()
                if self.forceClosing or clock.monotonic() + pause > give_up_at:
                    log.warning(
                        "job %s: the end of its run could not be written (%s); the stalled-job "
                        "check puts it back once its lock expired",
                        jid,
                        describe(exc),
                    )
                    raise bullmq.DelayedError() from exc
                log.warning(
                    "job %s: the end of its run could not be written (%s); trying again in %.0f s",
                    jid,
                    describe(exc),
                    pause,
                )
                await asyncio.sleep(pause)


async def _put_back_locked(
    client: RedisClient, backend: Any, locked_by: Callable[[str], bool]
) -> list[tuple[str, str]]:
    """Move the active jobs whose lock ``locked_by`` matches to delayed, due now, without
    spending an attempt (BullMQ's lock-checked ``moveToDelayed``); the (job id, lock) moved.

    One job that cannot be moved is logged and left to the stalled-job check; the others are
    still moved.
    """
    active = [_text(j) for j in await client.lrange(backend.keys["active"], 0, -1)]
    if not active:
        return []
    async with client.pipeline(transaction=False) as pipe:
        for jid in active:
            pipe.get(f"{backend.toKey(jid)}:lock")
        locks = await pipe.execute()
    moved = []
    for jid, lock in zip(active, locks, strict=True):
        token = _text(lock) if lock else None
        if token is None or not locked_by(token):
            continue
        try:
            now = math.ceil(clock.now_ms())
            await backend.moveToDelayed(jid, now, 0, token, {"skipAttempt": True})
        except Exception as exc:
            log.warning("could not put back job %s (it is taken over later): %s", jid, exc)
            continue
        moved.append((jid, token))
    return moved


def job_id(queue: str, cabinet: str) -> str:
    """The id of (queue, cabinet)'s job: at most one such job is live at a time."""
    return f"{queue}.{cabinet}"


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    """What ``enqueue`` did: ``added`` is False when the cabinet's job was already live."""

    job_id: str
    added: bool
    state: str


@dataclass(frozen=True, slots=True)
class JobView:
    """A stored job as the rest of wbsync sees it."""

    job_id: str
    queue: str
    cabinet: str
    state: str
    data: Mapping[str, Any]
    attempts_made: int
    attempts_started: int
    run_at_ms: int | None  # for a delayed job: when it may run again
    failed_reason: str | None
    created_ms: int | None = None  # when the job was added
    finished_ms: int | None = None  # for a failed job: when its last attempt ended


# The BullMQ structures that hold job ids, by the state they mean ("paused" jobs wait too).
_STATE_LISTS = (("active", "active"), ("wait", "waiting"), ("paused", "waiting"))
_STATE_ZSETS = (("prioritized", "prioritized"), ("delayed", "delayed"), ("failed", "failed"))
# BullMQ writes attempts made as "atm" (older versions: "attemptsMade").
_JOB_FIELDS = ("data", "atm", "attemptsMade", "failedReason", "timestamp", "finishedOn")
_STATES_SCRIPT = lua_script("wbsync.jobs", "states.lua")


class _Deferred(Exception):
    """Raised out of a processor after the job was moved to delayed (see ``JobHandle.defer``)."""


class JobFailedForGood(Exception):
    """Raised by a processor to fail its job now, whatever attempts are left; the message is
    the job's failedReason."""


MoveToDelayed = Callable[[str, str, int, Mapping[str, Any]], Awaitable[None]]
ProgressFields = Callable[[], Mapping[str, Any]]


class JobHandle:
    """What a processor gets: the job's data, a cursor store, and the way to defer.

    Every write is checked against the job's lock: once this worker lost it (the job stalled and
    another worker took it over), writes raise ``JobLockLostError`` and change nothing.
    """

    def __init__(
        self,
        job: bullmq.Job,
        token: str,
        queue: str,
        *,
        writer: JobDataWriter,
        move_to_delayed: MoveToDelayed,
        wake_at: Callable[[int], None],
    ) -> None:
        self._job = job
        self._token = token
        self._writer = writer
        self._move_to_delayed = move_to_delayed
        self._wake_at = wake_at
        self._progress: list[Callable[[], None]] = []
        self._carried: list[ProgressFields] = []
        self.queue = queue
        self.id: str = job.id
        self.cabinet: str = contract.cabinet_of(job.data)

    @property
    def data(self) -> Mapping[str, Any]:
        """The job's data as last stored."""
        return dict(self._job.data)

    @property
    def cursor(self) -> Any:
        """The cursor saved by an earlier run of this job, or None."""
        return self._job.data.get("cursor")

    @property
    def attempts_made(self) -> int:
        """Attempts spent (deferrals do not spend any)."""
        return int(self._job.attemptsMade or 0)

    def on_progress(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` on every ``save_cursor``, before the data is written."""
        self._progress.append(callback)

    def carry(self, fields: ProgressFields) -> None:
        """Store ``fields()`` with every write of the job's data (cursor saves and deferrals)."""
        self._carried.append(fields)

    async def save_cursor(self, cursor: Any, extra: Mapping[str, Any] | None = None) -> None:
        """Store ``cursor`` (and ``extra`` fields) in the job's data, so a resumed or recovered
        run continues from it.

        A saved cursor is progress: the ``on_progress`` callbacks run first.
        """
        for callback in self._progress:
            callback()
        await self.update_data({**(extra or {}), "cursor": cursor})

    async def update_data(self, changes: Mapping[str, Any]) -> None:
        """Merge ``changes`` into the job's stored data (while this worker holds the lock)."""
        data = self._merged(changes)
        await self._writer.save(self.id, self._token, data)
        self._job.data = data

    def _merged(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        data = dict(self._job.data)
        for fields in self._carried:
            data.update(fields())
        data.update(changes)
        return data

    async def put_back(self) -> None:
        """Move the job to delayed, due now, without spending an attempt (its cursor stays)."""
        await self._move_to_delayed(self.id, self._token, math.ceil(clock.now_ms()), self.data)

    async def defer(self, wait_ms: int, *, note: Mapping[str, Any]) -> NoReturn:
        """Move the job to delayed for ``wait_ms`` without spending an attempt; never returns.

        ``note`` is merged into the job's data (e.g. the deferral count and scope), with
        ``resume_at_ms``, the time the job may run again; data and move are one lock-checked
        step (BullMQ's ``moveToDelayed`` with fields to update).
        """
        resume_at = math.ceil(clock.now_ms() + wait_ms)
        data = self._merged({**note, "resume_at_ms": resume_at})
        await self._move_to_delayed(self.id, self._token, resume_at, data)
        self._job.data = data
        self._wake_at(resume_at)
        raise _Deferred()


Processor = Callable[[JobHandle], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one run of a job ended: "completed", "deferred" or "failed" (an attempt failed)."""

    outcome: str
    queue: str
    cabinet: str
    job_id: str


OutcomeListener = Callable[[Outcome], None]


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
        batch: int = 1000,
        delay_ms: int = 0,
    ) -> list[EnqueueResult]:
        """Add each cabinet's job unless one is live; a few round trips per ``batch``.

        One pipelined EXISTS per batch finds the cabinets with no stored job (the common case:
        completed jobs are removed), which are added in one pipelined ``addBulk``; BullMQ ignores
        an id a concurrent producer added first, so one job per (queue, cabinet) still holds.
        A cabinet with a stored job is skipped if the job is live, else the job is replaced.
        Results follow the order of the distinct cabinets; an added job's state is reported as
        "waiting" without reading it back. With ``delay_ms`` new jobs start delayed that long.
        """
        distinct = list(dict.fromkeys(cabinets))
        results: dict[str, EnqueueResult] = {}
        for start in range(0, len(distinct), batch):
            chunk = distinct[start : start + batch]
            with redis_failures(f"could not enqueue on {self.name}", QueueError):
                async with self._queue.client.pipeline(transaction=False) as pipe:
                    for cabinet in chunk:
                        pipe.exists(self._queue.toKey(job_id(self.name, cabinet)))
                    stored = await pipe.execute()
                fresh = [c for c, exists in zip(chunk, stored, strict=True) if not exists]
                await self._add([self._bulk_entry(c, data, delay_ms) for c in fresh])
            for cabinet in fresh:
                results[cabinet] = EnqueueResult(job_id(self.name, cabinet), True, "waiting")
            for cabinet, exists in zip(chunk, stored, strict=True):
                if exists:
                    results[cabinet] = await self._skip_or_replace(cabinet, data)
        return [results[c] for c in distinct]

    async def _skip_or_replace(self, cabinet: str, data: Mapping[str, Any] | None) -> EnqueueResult:
        jid = job_id(self.name, cabinet)
        with redis_failures(f"could not enqueue {jid}", QueueError):
            state = await self._queue.getJobState(jid)
            if state in LIVE_STATES:
                return EnqueueResult(job_id=jid, added=False, state=state)
            if state in _FINISHED_STATES:
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
            _text(jid).removeprefix(head): int(score)
            for jid, score in entries
            if _text(jid).startswith(head)
        }

    async def job(self, cabinet: str) -> JobView | None:
        """The cabinet's job in this queue, if one is stored."""
        jid = job_id(self.name, cabinet)
        with redis_failures(f"could not read a job of {self.name}", QueueError):
            try:
                job = await self._queue.getJob(jid)
            except ValueError:  # data BullMQ cannot parse: the view from the stored fields
                state = await self._queue.getJobState(jid)
                return (await read_jobs(self._queue.client, [(self, cabinet, state)]))[0]
            return None if job is None else await self._view(job)

    async def live_jobs(self) -> dict[str, JobView]:
        """Every cabinet that has a live job in this queue, with that job."""
        with redis_failures(f"could not read the jobs of {self.name}", QueueError):
            jobs = await self._queue.getJobs(list(LIVE_STATES))
            views = await asyncio.gather(*(self._view(job) for job in jobs if job))
        return {view.cabinet: view for view in views if view.state in LIVE_STATES}

    async def counts(self) -> dict[str, int]:
        """Number of jobs per state."""
        states = (*LIVE_STATES, *_FINISHED_STATES)
        with redis_failures(f"could not count the jobs of {self.name}", QueueError):
            counts = await self._queue.getJobCounts(*states)
        return {state: int(counts.get(state, 0)) for state in states}

    async def _view(self, job: bullmq.Job) -> JobView:
        state = await job.getState()
        run_at = await self._delayed_until(job.id) if state == "delayed" else None
        return JobView(
            job_id=job.id,
            queue=self.name,
            cabinet=_cabinet_or_blank(job.data),
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


def _cabinet_or_blank(data: Any) -> str:
    try:
        return contract.cabinet_of(data)
    except MalformedJobError:
        return ""


async def job_states(client: RedisClient, queues: Sequence[SyncQueue]) -> dict[str, dict[str, str]]:
    """Per queue, every cabinet with a stored job and that job's state.

    One ``states.lua`` call per queue, pipelined: job ids only, joined into one string per
    state server-side, so tens of thousands of jobs cost a few bulk strings to parse.
    """
    lists = [name for name, _ in _STATE_LISTS]
    zsets = [name for name, _ in _STATE_ZSETS]
    script = client.register_script(_STATES_SCRIPT)
    calls = [
        (
            script,
            [queue._queue.keys[name] for name in (*lists, *zsets)],
            [len(lists), len(queue.name) + 1],
        )
        for queue in queues
    ]
    with redis_failures("could not read job states", QueueError):
        replies = await redis_client.run_scripts(client, calls)
    out: dict[str, dict[str, str]] = {}
    for queue, joined in zip(queues, replies, strict=True):
        states: dict[str, str] = {}
        for (_, state), ids in zip((*_STATE_LISTS, *_STATE_ZSETS), joined, strict=True):
            text = _text(ids)
            if text:
                states.update(dict.fromkeys(text.split(","), state))
        out[queue.name] = states
    return out


async def read_jobs(
    client: RedisClient, jobs: Sequence[tuple[SyncQueue, str, str]]
) -> list[JobView | None]:
    """The stored jobs of (queue, cabinet, state) triples, in one pipeline; None where gone.

    A delayed job's time to run again is read with it.
    """
    with redis_failures("could not read jobs", QueueError):
        async with client.pipeline(transaction=False) as pipe:
            for queue, cabinet, state in jobs:
                jid = job_id(queue.name, cabinet)
                pipe.hmget(queue._queue.toKey(jid), list(_JOB_FIELDS))
                if state == "delayed":
                    pipe.zscore(queue._queue.keys["delayed"], jid)
            replies = iter(await pipe.execute())
    views: list[JobView | None] = []
    for queue, cabinet, state in jobs:
        fields = next(replies)
        score = next(replies) if state == "delayed" else None
        data, atm, attempts, reason, created, finished = (_text(f) if f else None for f in fields)
        if data is None:
            views.append(None)
            continue
        views.append(
            JobView(
                job_id=job_id(queue.name, cabinet),
                queue=queue.name,
                cabinet=cabinet,
                state=state,
                data=_readable(data),
                attempts_made=int(atm or attempts or 0),
                attempts_started=0,
                run_at_ms=int(score) // 0x1000 if score is not None else None,
                failed_reason=reason,
                created_ms=int(created) if created else None,
                finished_ms=int(finished) if finished else None,
            )
        )
    return views


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
        self._closed = False

    async def start(self) -> None:
        """Start taking jobs."""
        if self._closed or self._worker is not None:
            raise QueueError(f"worker of {self.name} cannot be started twice or after close")
        options = {**self._options, "connection": redis_bounds.connect(self._redis_url)}
        self._worker = _Worker(
            keys.bullmq_queue_name(self.name),
            self._process,
            options,
            connection_name=keys.bullmq_worker_connection_name(self._options["prefix"], self.name),
        )
        self._writer = JobDataWriter(self._worker.client, self._worker.backend.scripts.toKey)
        # BullMQ emits these once the job's new state is stored, so listeners can rely on it.
        self._worker.on("completed", lambda job, _result: self._notify("completed", job.data))
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
            put = await _put_back_locked(queue.client, queue.backend, lambda t: t.startswith(ours))
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
            except _Deferred:
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
            except Exception:
                log.exception("job %s failed", handle.id)
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

    def _notify(self, outcome: str, data: Mapping[str, Any]) -> None:
        if self._on_outcome is not None:
            cabinet = _cabinet_or_blank(data)
            self._on_outcome(Outcome(outcome, self.name, cabinet, job_id(self.name, cabinet)))


def _readable(raw: str) -> Mapping[str, Any]:
    """Stored data as a view shows it: ``{}`` when it cannot be read (a worker fails such a job,
    naming why in its failedReason)."""
    try:
        data = decode(raw)
    except MalformedJobError:
        return {}
    return data if isinstance(data, Mapping) else {}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _delayed_fields(data: Mapping[str, Any], now_ms: int) -> dict[str, Any]:
    """The job hash fields a deferral writes: the data, and ``timestamp`` = now.

    With ``timestamp`` reset, ``timestamp + delay`` (what dashboards such as Bull Board show as
    the next run) is the time the deferred job resumes.
    """
    return {"data": encode(data), "timestamp": now_ms}


def _log_failure(task: asyncio.Future[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("could not wake the queue: %s", task.exception())
