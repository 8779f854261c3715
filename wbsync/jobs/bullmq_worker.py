"""BullMQ's worker, made to treat Redis as infrastructure (see ``BullmqWorker``).

Connections come from ``wbsync.redis.redis_bounds`` (bounded timeouts and retries, not BullMQ's 20
retries up to 20 s apart), and the blocking wait is capped below the command timeout
(``BLOCK_CEILING_S``), so the blocking pop never times out on the client side.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import bullmq

from wbsync.errors import MalformedJobError
from wbsync.jobs.job_data import decode
from wbsync.redis import redis_bounds
from wbsync.redis.redis_client import RedisClient, as_text, describe, is_redis_failure
from wbsync.system import clock

log = logging.getLogger(__name__)

QUOTED_CHARS = 40
"""How much of a malformed field a failed job's reason quotes."""
GIVEN_UP_KEPT = 256
"""Fetches given up on that a worker remembers (to put back a job one took late). Only those
younger than a lock period count, and a slot fails a fetch at most once per
``RECONNECT_DELAY_S`` (5 slots and a 30 s lock: 150); past the bound the oldest is forgotten,
and a job it took late waits for the stalled-job check instead."""


class BullmqWorker(bullmq.Worker):  # type: ignore[misc]
    """BullMQ's worker, made to treat Redis as infrastructure:

    * its blocking wait is capped below the client's command timeout, and its blocking
      connection named as Node BullMQ names a worker's;
    * every Redis failure of a fetch of jobs is followed by a ``FailureBackoff`` pause. BullMQ
      waits only 0.1 s after an error it does not take for a connection error, and redis-py's
      cluster client raises many (cluster down, TRYAGAIN, AttributeError while it reconnects):
      one loop per slot spun while a shard was down. Once closing it fetches nothing (BullMQ
      retries a failed fetch at once while it closes, until the grace ends);
    * a job that a fetch given up on took anyway is put back (``_put_back_taken``);
    * a completed run's end takes the queue's next job in the same script call, as Node's
      worker does (``_completed``): a job costs one round trip to Redis fewer;
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
        # one of the last three; moveToCompleted goes through ``_completed``); there is no
        # other place to put the retry.
        for name in ("moveToFailed", "moveToDelayed", "retryJob"):
            setattr(self.backend, name, self._persistent(getattr(self.backend, name)))
        self._complete = self.backend.moveToCompleted
        self.backend.moveToCompleted = self._completed
        self._taken: dict[str, list[Any]] = {}  # by token: the next job a completion took

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
        # Options (BullMQ's ``opts``) that are not a JSON object raise there too, and fail the
        # same way: the job runs on BullMQ's defaults for its failure, its stored hash is left
        # as it is for the operator.
        if job_data and job_data.get("data") is not None:
            try:
                decode(job_data["data"])
            except MalformedJobError as exc:
                log.error("job %s of %s is malformed and fails: %s", job_id, self.name, exc)
                job_data = {**job_data, "data": "{}", "defa": str(exc)}
        if job_data and job_data.get("opts") is not None:
            fault = options_fault(job_data["opts"])
            if fault is not None:
                log.error("job %s of %s is malformed and fails: %s", job_id, self.name, fault)
                job_data = {**job_data, "opts": "{}", "defa": fault}
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
        if self.drained and self.waiting is not None:
            # Another slot's blocking wait already covers the drained queue: asking too would
            # be a ``moveToActive`` (7 commands) that finds nothing. The port's run loop starts
            # every free slot's fetch before the first sets ``waiting`` (Node's sets it before
            # the others start), so an idle worker of C slots asked C times per wait. The slot
            # is filled again once the wait ends (a job came, or its timeout).
            return None
        try:
            job = await super().getNextJob(token)
        except Exception as exc:
            if not self.isConnectionError(exc):
                raise
            # A fetch that timed out may still run on the server (a half-open link).
            self._give_up(token)
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

    def _give_up(self, token: str) -> None:
        """Remember a fetch given up on: only those younger than a lock period, at most
        ``GIVEN_UP_KEPT`` (the newest), whether or not Redis answers again meanwhile."""
        now = clock.monotonic()
        horizon = now - self.opts["lockDuration"] / 1000.0
        kept = [(t, at) for t, at in self._given_up.items() if at > horizon and t != token]
        kept.append((token, now))
        self._given_up = dict(kept[-GIVEN_UP_KEPT:])

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
            put = await put_back_locked(self.client, self.backend, lambda t: t in tokens)
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

    async def processJob(self, job: bullmq.Job, token: str) -> bullmq.Job | None:
        if self.closing:
            # A job handed to the run loop as the close began (by a fetch, or taken by a run's
            # end) is not run: the close waits only for the runs it saw, then closes the
            # connections and the lock renewal. The job stays locked by this worker, and
            # ``SyncWorker.close`` puts back every such job, no attempt spent.
            return None
        await super().processJob(job, token)
        taken = self._taken.pop(token, None)
        if taken is None:
            return None
        data, jid, limit_until, delay_until = taken
        # No job (an empty queue) marks the worker drained, as a fetch that found none does:
        # the slot's next fetch waits on the queue's marker instead of asking again. A job is
        # returned to the port's run loop, which runs it as it runs one a fetch returns.
        return await self.nextJobFromJobData(
            data, jid, int(limit_until or 0), int(delay_until or 0), token
        )

    async def _completed(
        self, job: bullmq.Job, result: Any, remove: Any, token: str, fetch_next: bool = False
    ) -> Any:
        """Write a completed run's end (through Redis failures, as ``_end``) and, unless the
        worker is closing or paused, take the queue's next job under the same lock token in
        the same call (BullMQ's ``fetchNext``; the port's worker asks for it in a second
        round trip, ``moveToActive``). ``processJob`` hands the taken job to the run loop.

        A first try that failed may still have run on the server and taken a job: its token
        is given up on (``_put_back_taken`` puts such a job back), and the retries take none.
        The port's own ``fetch_next`` (always False) is replaced by that choice.
        """
        fetch = not (self.closing or self.paused)

        async def write(*args: Any) -> Any:
            nonlocal fetch
            try:
                return await self._complete(*args, fetch_next=fetch)
            except Exception:
                if fetch:
                    self._give_up(token)
                    fetch = False
                raise

        done = await self._end(write, job, result, remove, token)
        if fetch:
            self._taken[token] = done["result"]
        return done

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


async def put_back_locked(
    client: RedisClient, backend: Any, locked_by: Callable[[str], bool]
) -> list[tuple[str, str]]:
    """Move the active jobs whose lock ``locked_by`` matches to delayed, due now, without
    spending an attempt (BullMQ's lock-checked ``moveToDelayed``); the (job id, lock) moved.

    One job that cannot be moved is logged and left to the stalled-job check; the others are
    still moved.
    """
    active = [as_text(j) for j in await client.lrange(backend.keys["active"], 0, -1)]
    if not active:
        return []
    async with client.pipeline(transaction=False) as pipe:
        for jid in active:
            pipe.get(f"{backend.toKey(jid)}:lock")
        locks = await pipe.execute()
    moved = []
    for jid, lock in zip(active, locks, strict=True):
        token = as_text(lock) if lock else None
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


def options_fault(raw: str | bytes) -> str | None:
    """What is wrong with a job's stored options (BullMQ's ``opts`` field), or None: they must
    be a JSON object. The stored text is quoted up to ``QUOTED_CHARS`` characters."""
    try:
        opts = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError, and UnicodeDecodeError for bytes
        why = str(exc)
    else:
        if isinstance(opts, dict):
            return None
        why = f"a JSON {type(opts).__name__}"
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    quoted = text[:QUOTED_CHARS] + ("..." if len(text) > QUOTED_CHARS else "")
    return f"job options are not a JSON object: {why}; they read {quoted!r}"
