"""The fan-out: on an interval per queue, one job per (queue, cabinet) for every active cabinet.

Each cabinet has its own time in each queue's interval (``offset_ms``: stable across processes,
hosts and restarts), and the queue's leader enqueues it when that time comes, so the queue sees
a steady flow of jobs instead of every cabinet at each interval's start (with N cabinets, any
1/k of the interval gets at most about N/k of them). The job's data says when it was due
(``DUE_FIELD``), so its start measures the lag (``wbsync.jobs.lag``). The schedule (how far each
queue was fanned out) is kept in Redis: a new leader or a restarted process continues it, and
cabinets whose time passed while no process led are enqueued at once. A queue never fanned out
(a new deployment, or Redis lost its data) enqueues every cabinet at once, then each at its time.

It relies on the queue's anti-overlap (one live job per (queue, cabinet)), so a cabinet whose
sync is still running or deferred is never given a second one; it reports per queue how many
jobs it added and how many it skipped as live. With many processes, only the leader of a queue
(``wbsync.jobs.leader``) fans it out, on the schedule shared in Redis.

A cabinet whose job failed is not left until the queue's next interval (up to hours): once the
job has sat in ``failed`` for ``failed_retry_s``, the queue's leader enqueues the cabinet again.
Until then the failed job, with its reason, is what the status page shows. Failed jobs are looked
for every quarter of ``failed_retry_s``, so the retry comes at most that much late.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import logging
import math
from bisect import bisect_left, bisect_right
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from wbsync.errors import WbSyncError
from wbsync.jobs.lag import DUE_FIELD
from wbsync.jobs.leader import FanOutLeases, Held
from wbsync.jobs.queue import SyncQueue
from wbsync.redis.redis_bounds import FailureBackoff
from wbsync.system import clock

log = logging.getLogger(__name__)

SPREAD_STEPS = 60
"""The leader wakes at most this many times per queue interval: with many cabinets, the ones
due within one step (interval / 60: 1 s for a minute, 6 min for six hours) go in together."""
_GOLDEN = (math.sqrt(5) - 1) / 2
_EXACT_ID_DIGITS = 15  # n * _GOLDEN keeps its fraction exact enough below 10**15
_FRACTIONS_CACHED = 65536  # hashed cabinet references and queue names, computed once each

ActiveCabinets = Callable[[], Awaitable[Sequence[str]]]
Serves = Callable[[str, str], bool]
"""Whether a cabinet's token can serve a queue (queue, cabinet): the others are not enqueued."""
OnLead = Callable[[Sequence[str]], Awaitable[None]]
"""Called on every poll with the queues this process leads (e.g. to start a retention pass)."""


@dataclass(frozen=True, slots=True)
class FanOutReport:
    """One queue's result of one fan-out pass."""

    added: int
    skipped_live: int


class FanOut:
    """Enqueues every active cabinet's job on each queue's interval."""

    def __init__(
        self,
        queues: Mapping[str, SyncQueue],
        active_cabinets: ActiveCabinets,
        intervals_s: Mapping[str, float],
        *,
        failed_retry_s: float = 300.0,
        serves: Serves | None = None,
        on_lead: OnLead | None = None,
    ) -> None:
        if failed_retry_s <= 0:
            raise ValueError("failed_retry_s must be > 0")
        missing = set(queues) - set(intervals_s)
        if missing:
            raise ValueError(f"no fan-out interval for queues {sorted(missing)}")
        self._queues = dict(queues)
        self._active_cabinets = active_cabinets
        self._intervals_s = dict(intervals_s)
        self._failed_retry_s = failed_retry_s
        self._serves = serves
        self._known: tuple[float, Sequence[str]] | None = None
        self._schedules: dict[str, tuple[Sequence[str], Schedule]] = {}
        """Each queue's schedule, with the read of the active cabinets it was last used for."""
        self._on_lead = on_lead

    async def run_once(self, names: Iterable[str] | None = None) -> dict[str, FanOutReport]:
        """Enqueue every active cabinet on the named queues (all by default), once."""
        cabinets = await self._active_cabinets()
        reports = {}
        for name in names if names is not None else self._queues:
            results = await self._queues[name].enqueue_many(self._served(name, cabinets))
            added = sum(1 for r in results if r.added)
            reports[name] = FanOutReport(added=added, skipped_live=len(results) - added)
            log.info("fan-out %s: %d added, %d skipped as live", name, added, len(results) - added)
        return reports

    async def retry_failed(self, names: Iterable[str] | None = None) -> dict[str, int]:
        """Enqueue again every active cabinet whose job failed ``failed_retry_s`` ago or more,
        on the named queues (all by default)."""
        cutoff_ms = clock.now_ms() - self._failed_retry_s * 1000.0
        due = {}
        for name in names if names is not None else self._queues:
            failed = await self._queues[name].failed_at()
            ready = [cabinet for cabinet, at in failed.items() if at <= cutoff_ms]
            if ready:
                due[name] = ready
        if not due:
            return {}
        active = set(await self._active_cabinets())
        added = {}
        for name, ready in due.items():
            cabinets = self._served(name, [c for c in ready if c in active])
            results = await self._queues[name].enqueue_many(cabinets) if cabinets else []
            added[name] = sum(1 for r in results if r.added)
            if added[name]:
                log.info("fan-out %s: %d failed jobs enqueued again", name, added[name])
        return added

    def _served(self, queue: str, cabinets: Sequence[str]) -> list[str]:
        """The cabinets whose token can serve ``queue`` (a job it cannot serve would only fail)."""
        if self._serves is None:
            return list(cabinets)
        return [c for c in cabinets if self._serves(queue, c)]

    async def run(self, stop: asyncio.Event, leases: FanOutLeases) -> None:
        """Until ``stop`` is set: lead what this process can; enqueue each cabinet of a led
        queue at its own time in the queue's interval (``offset_ms``), continuing the schedule
        shared in Redis (every cabinet at once on a queue never fanned out); enqueue failed
        jobs' cabinets again ``failed_retry_s`` after they failed."""
        names = list(self._queues)
        look_every = self._failed_retry_s / 4
        look_at = clock.monotonic() + look_every
        failing = FailureBackoff()
        try:
            while not stop.is_set():
                timeout = leases.poll_s
                leading = False
                try:
                    held = await leases.hold(names)
                    leading = bool(held.queues)
                    timeout = min(timeout, await self.fan_out_due(held, leases))
                    if leading and self._on_lead is not None:
                        await self._on_lead(held.queues)
                    if leading and look_at <= clock.monotonic():
                        look_at = clock.monotonic() + look_every
                        await self.retry_failed(held.queues)
                except WbSyncError as exc:  # Redis or the database hiccuped: try again later
                    # A poll is short when a fan-out is due; an outage must not make it a spin.
                    timeout = max(timeout, failing.failed())
                    log.warning("fan-out failed: %s; trying again in %.0f s", exc, timeout)
                else:
                    failing.succeeded()
                if leading:  # a follower waits for the lease only: it looks at no failed jobs
                    timeout = min(timeout, max(0.0, look_at - clock.monotonic()))
                try:
                    await asyncio.wait_for(stop.wait(), timeout=timeout)
                except TimeoutError:
                    pass
        finally:
            try:
                await leases.release(names)
            except WbSyncError as exc:
                log.warning("could not give up the fan-out leases (they expire): %s", exc)

    async def fan_out_due(self, held: Held, leases: FanOutLeases) -> float:
        """Enqueue, on the led queues, the cabinets whose time came since the schedule's last
        step, up to ``held.now_ms`` (every cabinet on a queue never fanned out); the seconds
        until the next cabinet is due, at least a step (``SPREAD_STEPS``)."""
        if not held.queues:
            return leases.poll_s
        through = await leases.through_ms(held.queues)
        cabinets = await self._cabinets(leases.poll_s)
        now = held.now_ms
        waits, done, enqueues = [], {}, []
        for name in held.queues:
            schedule = self._schedule(name, cabinets)
            since = through[name]
            due = schedule.due(since, now)
            if due:
                at_once = since is None or now - since >= schedule.interval_ms
                enqueues.append(self._enqueue_due(name, due, at_once=at_once))
            # Never backwards: the cabinets due up to `since` were enqueued, whatever clock
            # this leader reads (a Redis failed over to a host whose clock is behind); a
            # schedule set ahead holds the fan-out until then (docs/scaling.md, "The fan-out's
            # pass").
            done[name] = now if since is None else max(since, now)
            next_at = schedule.next_at(done[name])
            step_ms = schedule.interval_ms / SPREAD_STEPS
            waits.append(max(next_at - now, step_ms) / 1000.0)
        # The queues at once (each has its own connections): a pass takes the round trips of
        # one queue, not of every queue in turn, which on a busy process made it late by the
        # sum of their waits for the event loop (docs/scaling.md, "The fan-out's pass"). Every
        # queue is tried; the first failure is raised after, and the schedule is not advanced.
        results = await asyncio.gather(*enqueues, return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            raise failures[0]
        await leases.set_through_ms(done)
        return min(waits)

    async def _cabinets(self, fresh_s: float) -> Sequence[str]:
        """The active cabinets, read again when the last read is ``fresh_s`` old."""
        if self._known is None or self._known[0] + fresh_s <= clock.monotonic():
            self._known = (clock.monotonic(), await self._active_cabinets())
        return self._known[1]

    async def _enqueue_due(self, name: str, due: Mapping[str, int], *, at_once: bool) -> None:
        """Enqueue the cabinets due, each with the time it was due (``DUE_FIELD``) in its data:
        in batches of ``ENQUEUE_BATCH`` whatever their times (three round trips a batch)."""
        data = {cabinet: {DUE_FIELD: at} for cabinet, at in due.items()}
        results = await self._queues[name].enqueue_each(data)
        added = sum(1 for r in results if r.added)
        # Every cabinet at once is the pass an operator looks for; the steady trickle is debug.
        log.log(
            logging.INFO if at_once else logging.DEBUG,
            "fan-out %s: %d added, %d skipped as live",
            name,
            added,
            len(due) - added,
        )

    def _schedule(self, queue: str, cabinets: Sequence[str]) -> Schedule:
        """``queue``'s schedule of the ``cabinets`` it serves, built again only when they
        change (each read of the active cabinets is a new list, mostly of the same ones)."""
        kept = self._schedules.get(queue)
        if kept is not None and kept[0] is cabinets:
            return kept[1]
        served = self._served(queue, cabinets)
        if kept is None or kept[1].cabinets != served:
            interval_ms = max(1, round(self._intervals_s[queue] * 1000))
            kept = (cabinets, Schedule(queue, interval_ms, served))
        self._schedules[queue] = (cabinets, kept[1])
        return kept[1]


class Schedule:
    """One queue's cabinets in the order of their times in its interval (``offset_ms``).

    A pass finds the cabinets due since the schedule's last step by bisection, in time
    proportional to their number and the logarithm of all: visiting every cabinet on every
    pass cost the leader ~110 ms of CPU a pass at 10,000 cabinets on the built-in queues, and passes
    come every step of the shortest interval (a second for the booking monitor's minute).
    """

    __slots__ = ("_offsets", "_ordered", "cabinets", "interval_ms")

    def __init__(self, queue: str, interval_ms: int, cabinets: list[str]) -> None:
        self.cabinets = cabinets
        """The cabinets scheduled, in the order given."""
        self.interval_ms = interval_ms
        placed = sorted((offset_ms(c, queue, interval_ms), c) for c in cabinets)
        self._offsets = [at for at, _ in placed]
        self._ordered = [c for _, c in placed]

    def due(self, since: int | None, now: int) -> dict[str, int]:
        """Each cabinet whose time came in (``since``, ``now``], with that time (its latest);
        every cabinet, due ``now``, when ``since`` is None (never fanned out)."""
        if since is None:
            return dict.fromkeys(self.cabinets, now)
        span, interval = now - since, self.interval_ms
        if span <= 0:
            return {}
        chosen: Iterable[int]
        if span >= interval:
            chosen = range(len(self._ordered))
        else:  # the times in (since, now] fall at these places in the interval, maybe wrapping
            first, last = (since + 1) % interval, now % interval
            start, end = bisect_left(self._offsets, first), bisect_right(self._offsets, last)
            if first <= last:
                chosen = range(start, end)
            else:
                chosen = itertools.chain(range(start, len(self._offsets)), range(end))
        return {self._ordered[i]: _last_time(now, self._offsets[i], interval) for i in chosen}

    def next_at(self, after: int) -> int:
        """When the next cabinet is due after ``after`` (``after`` plus the interval when none
        is)."""
        if not self._offsets:
            return after + self.interval_ms
        index = bisect_right(self._offsets, after % self.interval_ms)
        at = self._offsets[index] if index < len(self._offsets) else self._offsets[0]
        return _last_time(after, at, self.interval_ms) + self.interval_ms


def offset_ms(cabinet: str, queue: str, interval_ms: int) -> int:
    """Where in each ``interval_ms`` (counted from the epoch) the cabinet's run on ``queue``
    falls: the same in every process, on every host and after every restart.

    A cabinet id n is placed at the fractional part of n times the golden ratio's inverse (a
    Weyl sequence): N consecutive ids fall evenly over the interval, any 1/k of it holding at
    most ceil(N/k) + 2 of them (deleted ids only leave gaps), where a hash bunches them at
    random (up to twice the average in some stretch). A cabinet reference that is not a
    decimal id is hashed. Each queue is shifted by a hash of its name, so the queues do not
    start their cabinets in step. Hashes are BLAKE2 (Python's ``hash`` differs per process).
    """
    if cabinet.isdecimal() and len(cabinet) <= _EXACT_ID_DIGITS:
        place = (int(cabinet) * _GOLDEN) % 1.0
    else:
        place = _fraction(f"cabinet:{cabinet}")
    return int(((place + _fraction(f"queue:{queue}")) % 1.0) * interval_ms)


@functools.lru_cache(maxsize=_FRACTIONS_CACHED)
def _fraction(text: str) -> float:
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _last_time(now: float, offset: int, interval_ms: int) -> int:
    """The latest time <= ``now`` that is ``offset`` into an interval."""
    return int(now - (now - offset) % interval_ms)
