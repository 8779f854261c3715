"""What ``capacity`` measures: the lags of a steady state and the database's CPU.

Freshness lag of a (cabinet, queue) due time: the pair's completion (``sync_runs.success_at``)
minus the time it was due (the fan-out's ``offset_ms`` in every interval, the schedule the
leader follows). It is split in two: the start lag, the run's first start minus its due time,
which the workers record in Redis (``wbsync.jobs.lag``: waiting for the leader's step, in the
queue and for a slot), and the rest, the run itself (its requests, WB's windows between pages
of a multi-page sync, its Redis and database writes).

A fleet-wide queue (``Sync.fleet``) has one entry for the whole fleet, :data:`FLEET_JOB`, due
at its own offset as a cabinet is, whichever cabinet's token carried its run: its runs count
for that one entry, not for the cabinet that carried them.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from wbsync.jobs.contract import FLEET_JOB
from wbsync.jobs.fanout import offset_ms
from wbsync.jobs.lag import LAG_SAMPLES
from wbsync.redis import keys
from wbsync.redis.redis_client import RedisClient
from wbsync.store import Database
from wbsync.store.schema import sync_runs
from wbsync_bench.common import percentile
from wbsync_bench.processes import process_cpu_s

# --- CPU of the database's backends --------------------------------------------------------


async def backend_pids(database: Database, url: str, own: set[int]) -> list[int]:
    """PostgreSQL's backends serving ``url``'s database on this host (none for SQLite), less
    the benchmark's own: each connection this asks on is added to ``own``."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        return []
    async with database.connection() as conn:
        rows = list(
            await conn.execute(
                text("SELECT pid, pg_backend_pid() FROM pg_stat_activity WHERE datname = :name"),
                {"name": parsed.database},
            )
        )
    own.update(int(mine) for _, mine in rows)
    return [int(pid) for pid, _ in rows if int(pid) not in own]


class Backends:
    """CPU of the PostgreSQL backends serving the run's database over the window.

    The workers' pools may open and close connections as load comes and goes, so the backends
    are looked for at every poll: one there at the window's start counts from its CPU then, one
    that appears later from zero (its start is the database's work too), each up to the last
    reading (a backend that exits loses at most one poll's CPU). ``opened`` counts the ones
    that appeared during the window: connections the pools opened under load.
    """

    def __init__(self) -> None:
        self.base: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.own: set[int] = set()  # the benchmark's own connections: its polling is not ours
        self.opened = 0

    def sample(self, pids: list[int], *, started: bool) -> None:
        for pid in pids:
            with contextlib.suppress(OSError, IndexError, ValueError):  # it exited meanwhile
                cpu = process_cpu_s(pid)
                if pid not in self.base:
                    self.base[pid] = 0.0 if started else cpu
                    self.opened += started
                self.last[pid] = cpu

    def cpu_s(self) -> float:
        return sum(self.last[p] - self.base[p] for p in self.last if p not in self.own)


def scheduled_s(pids: list[int]) -> tuple[float, float]:
    """Seconds the threads of processes ``pids`` ran on a core, and waited on the kernel's run
    queue for one (``/proc/<pid>/task/<tid>/schedstat``), so far. The wait is how long work
    that was ready could not run: a run's wall time that is neither I/O nor its own CPU."""
    ran = waited = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError, IndexError):
                    with open(f"/proc/{pid}/task/{task}/schedstat", encoding="ascii") as stat:
                        fields = stat.read().split()
                    ran += int(fields[0])
                    waited += int(fields[1])
    return ran / 1e9, waited / 1e9


# --- the lag --------------------------------------------------------------------------------


class Ledger:
    """Completions per (entry, queue) and start lags per queue, as they are observed: an
    entry is a cabinet (its id as text), or :data:`FLEET_JOB` for a fleet-wide queue."""

    def __init__(self, intervals_s: dict[str, float], fleet: Iterable[str] = ()) -> None:
        self.intervals_ms = {q: max(1, round(s * 1000)) for q, s in intervals_s.items()}
        self.fleet = frozenset(fleet)
        """The fleet-wide queues: one entry each (``FLEET_JOB``), not one per cabinet."""
        self.last: dict[tuple[str, str], datetime] = {}
        self.completions: dict[tuple[str, str], list[tuple[float, int]]] = defaultdict(list)
        self.failures = 0
        self._failed_seen: dict[tuple[str, str], datetime] = {}
        self.starts: dict[str, set[tuple[int, int]]] = defaultdict(set)  # (started, lag) ms

    def _key(self, cabinet: int, queue: str) -> tuple[str, str]:
        return (FLEET_JOB if queue in self.fleet else str(cabinet), queue)

    def ran(self, cabinet: int, queue: str, at: datetime, pages: int) -> None:
        key = self._key(cabinet, queue)
        if key in self.last and at <= self.last[key]:
            return
        self.last[key] = at
        self.completions[key].append((at.timestamp() * 1000.0, pages))

    def failed(self, cabinet: int, queue: str, at: datetime) -> None:
        key = self._key(cabinet, queue)
        if self._failed_seen.get(key) != at:
            self._failed_seen[key] = at
            self.failures += 1

    def started(self, queue: str, entries: list[Any]) -> None:
        """The workers' start-lag samples (``<started ms>:<lag ms>``) of ``queue``."""
        for entry in entries:
            started, _, lag = (entry.decode() if isinstance(entry, bytes) else entry).partition(":")
            self.starts[queue].add((int(started), int(lag)))

    def _entries(self, queue: str, cabinets: int) -> int:
        return 1 if queue in self.fleet else cabinets

    def not_yet_run(self, cabinets: int) -> dict[str, int]:
        """Per queue, how many of its entries (the cabinets; a fleet-wide queue's one) have
        neither completed nor failed yet."""
        seen = self.completions.keys() | self._failed_seen.keys()
        out = {
            q: self._entries(q, cabinets) - sum(1 for _, name in seen if name == q)
            for q in self.intervals_ms
        }
        return {q: left for q, left in out.items() if left}

    def first_pass_done(self, cabinets: int) -> bool:
        """Whether every entry of every queue has completed or failed once."""
        wanted = sum(self._entries(q, cabinets) for q in self.intervals_ms)
        return len(self.completions.keys() | self._failed_seen.keys()) >= wanted

    def lags(self, start_ms: float, end_ms: float, now_ms: float) -> dict[str, list[float]]:
        """Per queue: the lag (ms) of every cabinet's run for every time it was due in
        [start, end).

        An (entry, queue) is due at its own offset in every interval (the fan-out's
        ``offset_ms``, epoch-aligned), and that due time is served by the pair's first
        completion after it that served no earlier one: a completion before it (a run still
        going when it came, whose job the fan-out skipped as live) does not count for it. The
        pairing starts at the last due time before the window. One unserved by ``now_ms`` gets
        ``-(now - due)``: negative marks it missed.
        """
        out: dict[str, list[float]] = defaultdict(list)
        cabinets = {c for c, q in self.completions if q not in self.fleet}
        for queue, interval in self.intervals_ms.items():
            for cabinet in {FLEET_JOB} if queue in self.fleet else cabinets:
                offset = offset_ms(cabinet, queue, interval)
                first = start_ms - (start_ms - offset) % interval
                moments = [
                    first + k * interval for k in range(int((end_ms - first) // interval) + 1)
                ]
                done = [at for at, _ in self.completions.get((cabinet, queue), [])]
                i = 0
                for moment in moments:
                    while i < len(done) and done[i] <= moment:
                        i += 1
                    lag = done[i] - moment if i < len(done) else -(now_ms - moment)
                    i += 1
                    if start_ms <= moment < end_ms:
                        out[queue].append(lag)
        return out

    def start_lags(self, start_ms: float, end_ms: float) -> dict[str, list[float]]:
        """Per queue: the start lag (ms) of every run due in [start, end) that started."""
        out: dict[str, list[float]] = defaultdict(list)
        for queue, samples in self.starts.items():
            out[queue] = [lag for at, lag in samples if start_ms <= at - lag < end_ms]
        return out

    def pages(self, start_ms: float, end_ms: float) -> int:
        return sum(
            pages
            for runs in self.completions.values()
            for at, pages in runs
            if start_ms <= at < end_ms
        )


async def observe(
    ledger: Ledger, database: Database, redis: RedisClient, prefix: str, since: datetime
) -> None:
    """Read the completions and failures since ``since`` and the queues' start-lag samples."""
    async with database.connection() as conn:
        rows = await conn.execute(
            select(
                sync_runs.c.cabinet_id,
                sync_runs.c.sync,
                sync_runs.c.success_at,
                sync_runs.c.success_pages,
                sync_runs.c.failure_at,
            ).where((sync_runs.c.success_at >= since) | (sync_runs.c.failure_at >= since))
        )
        for cabinet, queue, success_at, pages, failure_at in rows:
            if success_at is not None and success_at >= since:
                ledger.ran(int(cabinet), queue, success_at, int(pages or 0))
            if failure_at is not None and failure_at >= since:
                ledger.failed(int(cabinet), queue, failure_at)
    queues = list(ledger.intervals_ms)
    async with redis.pipeline(transaction=False) as pipe:
        for queue in queues:
            pipe.lrange(keys.lag_key(prefix, queue), 0, LAG_SAMPLES - 1)
        replies = await pipe.execute()
    for queue, entries in zip(queues, replies, strict=True):
        ledger.started(queue, entries)


def lag_figures(
    lags: dict[str, list[float]], starts: dict[str, list[float]], intervals: dict[str, float]
) -> dict[str, Any]:
    """Per queue and pooled (as shares of each queue's interval): the freshness lag's p50,
    p95 and max, and the start lag's p50 and p95."""
    per_queue = {}
    shares: list[float] = []
    start_shares: list[float] = []
    missed = 0
    for queue, values in sorted(lags.items()):
        seconds = [abs(v) / 1000.0 for v in values]
        started = [v / 1000.0 for v in starts.get(queue, [])]
        missed_here = sum(1 for v in values if v < 0)
        missed += missed_here
        shares += [s / intervals[queue] for s in seconds]
        start_shares += [s / intervals[queue] for s in started]
        per_queue[queue] = {
            "interval_s": intervals[queue],
            "runs": len(values),
            "missed": missed_here,
            "lag_p50_s": percentile(seconds, 50),
            "lag_p95_s": percentile(seconds, 95),
            "lag_max_s": max(seconds, default=float("nan")),
            "start_lag_p50_s": percentile(started, 50),
            "start_lag_p95_s": percentile(started, 95),
        }
    return {
        "runs": len(shares),
        "missed": missed,
        "lag_share_p50": percentile(shares, 50),
        "lag_share_p95": percentile(shares, 95),
        "lag_share_max": max(shares, default=float("nan")),
        "start_lag_share_p50": percentile(start_shares, 50),
        "start_lag_share_p95": percentile(start_shares, 95),
        "per_queue": per_queue,
    }
