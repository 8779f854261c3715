"""The fan-out spreads each queue's cabinets over its interval, at times stable across processes,
and a new leader continues the schedule kept in Redis."""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from wbsync.errors import QueueError
from wbsync.jobs.fanout import SPREAD_STEPS, FanOut, Schedule, offset_ms
from wbsync.jobs.lag import (
    DUE_FIELD,
    LAG_SAMPLES,
    LAG_WINDOW_S,
    STARTED_FIELD,
    LagHistory,
    start_lag_ms,
)
from wbsync.jobs.leader import FanOutLeases, Held
from wbsync.jobs.queue import ENQUEUE_BATCH, SyncQueue
from wbsync.redis import keys
from wbsync.system import clock

QUEUE = "qspread"
CABINETS = [str(i) for i in range(1, 121)]
INTERVAL_S = 3600.0
INTERVAL_MS = int(INTERVAL_S * 1000)
K = 8  # the interval is looked at in eighths...
SUBSTEPS = 4  # ...sliding by a quarter of an eighth


@pytest.fixture
async def queue(redis_url: str, redis: Redis, prefix: str) -> AsyncIterator[SyncQueue]:
    q = SyncQueue(QUEUE, redis_url=redis_url, prefix=f"{prefix}:q")
    try:
        yield q
    finally:
        await q.obliterate()
        await q.close()


async def _cabinets() -> list[str]:
    return CABINETS


async def _waiting(queue: SyncQueue) -> dict[str, int]:
    """The waiting jobs' cabinets with the time each was due."""
    return {c: int(job.data[DUE_FIELD]) for c, job in (await queue.live_jobs()).items()}


async def test_cabinets_are_enqueued_spread_over_the_interval_and_a_new_leader_goes_on(
    redis: Redis, prefix: str, queue: SyncQueue
) -> None:
    """Stepping one interval past a fan-out (on Redis's clock as the leader reads it), any 1/K
    of it enqueues at most ceil(N/K) + 2 of the N cabinets (every cabinet at once before); a
    second fan-out with its own lease, as after a restart, continues where the first stopped:
    over the interval every cabinet is enqueued exactly once, at its own time."""
    first = FanOut({QUEUE: queue}, _cabinets, {QUEUE: INTERVAL_S})
    second = FanOut({QUEUE: queue}, _cabinets, {QUEUE: INTERVAL_S})
    lease_a = FanOutLeases(redis, prefix=prefix, lease_ms=60_000, owner="a")
    lease_b = FanOutLeases(redis, prefix=prefix, lease_ms=60_000, owner="b")
    t0 = 1_800_000_000_000 + 12_345  # any time: the interval need not start on a boundary
    await lease_a.set_through_ms({QUEUE: t0})

    step_ms = INTERVAL_MS / (K * SUBSTEPS)
    steps = [t0 + round(j * step_ms) for j in range(K * SUBSTEPS + 1)]
    added: list[int] = []
    for j, now in enumerate(steps[1:], start=1):
        fanout, lease = (first, lease_a) if j <= K * SUBSTEPS // 2 else (second, lease_b)
        before = (await queue.counts())["waiting"]
        wait_s = await fanout.fan_out_due(Held(now_ms=now, queues=(QUEUE,)), lease)
        assert wait_s > 0
        added.append((await queue.counts())["waiting"] - before)

    seen = await _waiting(queue)
    assert sorted(seen, key=int) == CABINETS  # each exactly once: live jobs are never added twice
    assert sum(added) == len(CABINETS)
    # Each step added exactly the cabinets whose time fell in it.
    for j, count in enumerate(added, start=1):
        assert count == sum(1 for at in seen.values() if steps[j - 1] < at <= steps[j]), j
    bound = math.ceil(len(CABINETS) / K) + 2
    windows = [sum(added[i : i + SUBSTEPS]) for i in range(len(added) - SUBSTEPS + 1)]
    assert max(windows) <= bound, windows
    # Each cabinet came at its own time in the interval, the same the offset function gives.
    assert all((seen[c] - offset_ms(c, QUEUE, INTERVAL_MS)) % INTERVAL_MS == 0 for c in CABINETS)


async def test_a_queue_never_fanned_out_enqueues_every_cabinet_at_once(
    redis: Redis, prefix: str, queue: SyncQueue
) -> None:
    """No schedule in Redis (a new deployment, or Redis lost its data): every cabinet now, due
    now; then nothing until each cabinet's own time."""
    fanout = FanOut({QUEUE: queue}, _cabinets, {QUEUE: INTERVAL_S})
    lease = FanOutLeases(redis, prefix=prefix, lease_ms=60_000, owner="a")
    now = 1_800_000_000_000
    wait_s = await fanout.fan_out_due(Held(now_ms=now, queues=(QUEUE,)), lease)
    assert await _waiting(queue) == dict.fromkeys(CABINETS, now)
    assert await lease.through_ms([QUEUE]) == {QUEUE: now}
    # The next cabinet is due sooner than a step (an interval / SPREAD_STEPS): the leader still
    # waits the step, and takes the cabinets due meanwhile together.
    soonest_ms = min((offset_ms(c, QUEUE, INTERVAL_MS) - now) % INTERVAL_MS for c in CABINETS)
    assert soonest_ms < INTERVAL_MS / SPREAD_STEPS
    assert wait_s == INTERVAL_S / SPREAD_STEPS


def test_offsets_are_the_same_in_another_process() -> None:
    """Python's own ``hash`` of a string differs per process; the offsets must not."""
    here = [offset_ms(c, q, INTERVAL_MS) for q in (QUEUE, "other") for c in [*CABINETS, "cab-x"]]
    code = (
        "import json, sys; from wbsync.jobs.fanout import offset_ms; "
        f"print(json.dumps([offset_ms(c, q, {INTERVAL_MS}) "
        f"for q in ({QUEUE!r}, 'other') for c in [*{CABINETS!r}, 'cab-x']]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(out.stdout) == here
    assert len(set(here)) == len(here)  # no two (cabinet, queue) share a time


def test_offsets_spread_any_number_of_consecutive_cabinets() -> None:
    """The bound the fan-out documents, over many sizes and window counts: for N consecutive
    ids, any 1/k of the interval holds at most ceil(N/k) + 2 of them."""
    for n in (1, 2, 7, 50, 150, 999):
        times = sorted(offset_ms(str(i), QUEUE, INTERVAL_MS) for i in range(1, n + 1))
        wrapped = times + [t + INTERVAL_MS for t in times]
        for k in (2, 3, 5, 10, 20):
            width = INTERVAL_MS / k
            most = max(bisect.bisect_left(wrapped, t + width) - i for i, t in enumerate(times))
            assert most <= math.ceil(n / k) + 2, (n, k, most)


async def test_the_lag_history_keeps_its_bound_and_its_window(redis: Redis, prefix: str) -> None:
    """Past LAG_SAMPLES runs the oldest go; runs older than the window are not in the figure."""
    history = LagHistory(redis, prefix=prefix)
    for lag_ms in range(LAG_SAMPLES + 5):
        await history.write(history.sample(QUEUE, lag_ms))
    key = keys.lag_key(prefix, QUEUE)
    assert await redis.llen(key) == LAG_SAMPLES
    figure = (await history.recent([QUEUE, "idle"]))[QUEUE]
    assert figure.runs == LAG_SAMPLES and "idle" not in await history.recent([QUEUE, "idle"])
    assert figure.max_s == (LAG_SAMPLES + 4) / 1000 and figure.p50_s < figure.p95_s
    # A run that started before the window counts no more.
    await redis.rpush(key, f"{int(clock.now_ms() - (LAG_WINDOW_S + 60) * 1000)}:999999")
    await redis.ltrim(key, 1, -1)
    assert (await history.recent([QUEUE]))[QUEUE].runs == LAG_SAMPLES - 1
    assert start_lag_ms({DUE_FIELD: 1000, STARTED_FIELD: 1500}, 2000) is None  # measured once
    assert start_lag_ms({DUE_FIELD: 2500}, 2000) == 0.0  # clock skew is no negative lag
    assert start_lag_ms({DUE_FIELD: "soon"}, 2000) is None


async def test_a_pass_over_more_cabinets_than_a_batch_enqueues_each_once_with_its_own_time(
    redis: Redis, prefix: str, queue: SyncQueue
) -> None:
    """One pass catching up a whole interval (every cabinet due, each at its own time) over
    more than two batches (``ENQUEUE_BATCH``): every cabinet enqueued exactly once, with its
    own due time; a second pass over the same times finds every job live and adds none."""
    many = [str(i) for i in range(1, 2 * ENQUEUE_BATCH + 38)]

    async def cabinets() -> list[str]:
        return many

    fanout = FanOut({QUEUE: queue}, cabinets, {QUEUE: INTERVAL_S})
    lease = FanOutLeases(redis, prefix=prefix, lease_ms=60_000, owner="a")
    now = 1_800_000_000_000
    await lease.set_through_ms({QUEUE: now - INTERVAL_MS + 1})
    await fanout.fan_out_due(Held(now_ms=now, queues=(QUEUE,)), lease)
    seen = await _waiting(queue)
    assert sorted(seen, key=int) == many
    assert (await queue.counts())["waiting"] == len(many)
    assert all((at - offset_ms(c, QUEUE, INTERVAL_MS)) % INTERVAL_MS == 0 for c, at in seen.items())
    assert len(set(seen.values())) > ENQUEUE_BATCH  # the times differ: one batch holds many

    await lease.set_through_ms({QUEUE: now - INTERVAL_MS + 1})
    again = await queue.enqueue_each({c: {DUE_FIELD: now} for c in many})
    assert not any(r.added for r in again)
    assert {r.state for r in again} == {"waiting"}
    await fanout.fan_out_due(Held(now_ms=now, queues=(QUEUE,)), lease)
    assert await _waiting(queue) == seen  # nothing replaced, nothing added twice


async def test_a_schedule_ahead_of_the_clock_holds_and_is_not_moved_back(
    redis: Redis, prefix: str, queue: SyncQueue
) -> None:
    """A schedule recorded ahead of the leader's clock (another clock, or set ahead on
    purpose): a pass enqueues nothing, leaves the schedule where it was, and waits for the
    next cabinet due after it; once the clock passes it, the pass enqueues what came due."""
    fanout = FanOut({QUEUE: queue}, _cabinets, {QUEUE: INTERVAL_S})
    lease = FanOutLeases(redis, prefix=prefix, lease_ms=60_000, owner="a")
    now = 1_800_000_000_000
    ahead = now + INTERVAL_MS // 2
    await lease.set_through_ms({QUEUE: ahead})
    wait_s = await fanout.fan_out_due(Held(now_ms=now, queues=(QUEUE,)), lease)
    assert await _waiting(queue) == {}
    assert await lease.through_ms([QUEUE]) == {QUEUE: ahead}
    assert wait_s * 1000 > ahead - now
    later = ahead + INTERVAL_MS // 4
    await fanout.fan_out_due(Held(now_ms=later, queues=(QUEUE,)), lease)
    expected = Schedule(QUEUE, INTERVAL_MS, CABINETS).due(ahead, later)
    assert expected and await _waiting(queue) == expected
    assert await lease.through_ms([QUEUE]) == {QUEUE: later}


async def test_a_pass_enqueues_its_queues_at_once(
    redis_url: str, redis: Redis, prefix: str
) -> None:
    """A pass does not wait for one queue's enqueue before the next one's: on a busy process
    each of them waits for the event loop, and in turn they made the pass late by the sum.
    Every queue's enqueue is held until all of them have begun; in turn, the first would
    wait for ever."""
    names = ["qa", "qb", "qc"]
    queues = {n: SyncQueue(n, redis_url=redis_url, prefix=f"{prefix}:q") for n in names}
    begun = asyncio.Barrier(len(names))

    class Together(FanOut):
        async def _enqueue_due(self, name: str, due: Mapping[str, int], *, at_once: bool) -> None:
            await begun.wait()
            await super()._enqueue_due(name, due, at_once=at_once)

    fanout = Together(queues, _cabinets, dict.fromkeys(names, INTERVAL_S))
    lease = FanOutLeases(redis, prefix=prefix, lease_ms=60_000, owner="a")
    now = 1_800_000_000_000
    try:
        await asyncio.wait_for(
            fanout.fan_out_due(Held(now_ms=now, queues=tuple(names)), lease), timeout=30
        )
        for queue in queues.values():
            assert await _waiting(queue) == dict.fromkeys(CABINETS, now)
        assert await lease.through_ms(names) == dict.fromkeys(names, now)
    finally:
        for queue in queues.values():
            await queue.obliterate()
            await queue.close()


async def test_a_queue_whose_enqueue_fails_leaves_the_others_enqueued_and_the_schedule_kept(
    redis_url: str, redis: Redis, prefix: str, queue: SyncQueue
) -> None:
    """One queue's Redis does not answer: the pass still enqueues the other queue, then raises
    the failure and keeps the schedule where it was, so the next pass enqueues the failed
    queue's cabinets (and finds the others live)."""
    dead = SyncQueue("qdead", redis_url="redis://127.0.0.1:1/0", prefix=f"{prefix}:q")
    names = ("qdead", QUEUE)  # the failing one first: the other is still enqueued
    fanout = FanOut({QUEUE: queue, "qdead": dead}, _cabinets, dict.fromkeys(names, INTERVAL_S))
    lease = FanOutLeases(redis, prefix=prefix, lease_ms=60_000, owner="a")
    now = 1_800_000_000_000
    try:
        with pytest.raises(QueueError):
            await fanout.fan_out_due(Held(now_ms=now, queues=names), lease)
        assert await _waiting(queue) == dict.fromkeys(CABINETS, now)
        assert await lease.through_ms(names) == dict.fromkeys(names)
    finally:
        await dead.close()


async def test_an_enqueue_batch_below_one_is_refused(queue: SyncQueue) -> None:
    with pytest.raises(ValueError, match="batch"):
        await queue.enqueue_many(["1"], batch=0)


def _every_cabinet(
    cabinets: list[str], queue: str, interval_ms: int, since: int, now: int, after: int
) -> tuple[dict[str, int], int]:
    """What a pass finds by looking at every cabinet: the ones due in (since, now] with their
    latest time, and the next time one is due after ``after``."""
    offsets = {c: offset_ms(c, queue, interval_ms) for c in cabinets}
    lasts = {c: now - (now - at) % interval_ms for c, at in offsets.items()}
    upcoming = (after - (after - at) % interval_ms + interval_ms for at in offsets.values())
    return {c: t for c, t in lasts.items() if t > since}, min(upcoming, default=after + interval_ms)


@settings(deadline=None)  # a CPU-starved CI must not turn a slow example into a failure
@given(
    ids=st.lists(st.integers(1, 10**6), max_size=60, unique=True),
    interval_ms=st.integers(1, 10_000),
    now=st.integers(0, 10**13),
    span=st.integers(-20_000, 25_000),
    ahead=st.integers(0, 25_000),
    edge=st.one_of(st.none(), st.integers(-2, 2)),
    now_edge=st.one_of(st.none(), st.integers(-1, 1)),
)
def test_a_schedule_finds_what_looking_at_every_cabinet_finds(
    ids: list[int],
    interval_ms: int,
    now: int,
    span: int,
    ahead: int,
    edge: int | None,
    now_edge: int | None,
) -> None:
    """By bisection, the same cabinets due with the same times, and the same next time, for
    any window: empty, backwards, inside one interval, wrapping its end, or longer; ``edge``
    puts the window's start and the next time's origin at a cabinet's own time, ``now_edge``
    its end, give or take."""
    cabinets = [str(i) for i in ids] + ["cab-hashed"]
    schedule = Schedule(QUEUE, interval_ms, cabinets)
    if now_edge is not None:
        now += now_edge - (now - offset_ms(cabinets[-1], QUEUE, interval_ms)) % interval_ms
    since, after = now - span, now + ahead
    if edge is not None:
        at = offset_ms(cabinets[0], QUEUE, interval_ms)
        since = now - (now - at) % interval_ms - 1 + edge
        after = since + 1
    due, next_at = _every_cabinet(cabinets, QUEUE, interval_ms, since, now, after)
    assert schedule.due(since, now) == due
    assert schedule.next_at(after) == next_at
    assert schedule.due(None, now) == dict.fromkeys(cabinets, now)


async def test_the_schedule_is_built_again_only_when_the_cabinets_change(
    redis: Redis, prefix: str, queue: SyncQueue
) -> None:
    """Each read of the active cabinets is a new list; the same cabinets keep the schedule, a
    cabinet added or one a token no longer serves makes a new one that has it, or not."""
    active = [CABINETS[:3]]
    unserved: set[str] = set()

    async def cabinets() -> list[str]:
        return list(active[0])  # a new list each read, as the database gives

    fanout = FanOut(
        {QUEUE: queue}, cabinets, {QUEUE: INTERVAL_S}, serves=lambda _q, c: c not in unserved
    )
    lease = FanOutLeases(redis, prefix=prefix, lease_ms=60_000, owner="a")
    schedules = []
    for change in (None, "add", None, "unserve"):
        if change == "add":
            active[0] = CABINETS[:4]
        elif change == "unserve":
            unserved.add(CABINETS[0])
        fanout._known = None  # read the cabinets again, as every poll does
        await fanout.fan_out_due(Held(now_ms=1_800_000_000_000, queues=(QUEUE,)), lease)
        schedules.append(fanout._schedules[QUEUE][1])
    assert [s.cabinets for s in schedules] == [
        CABINETS[:3],
        CABINETS[:4],
        CABINETS[:4],
        CABINETS[1:4],
    ]
    assert schedules[0] is not schedules[1] and schedules[1] is schedules[2]
    assert schedules[3] is not schedules[2]
