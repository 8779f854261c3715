"""``fanout``: one fan-out pass over N cabinets, each due at its own time: round trips, wall
time, CPU.

The fan-out's schedule is set one interval back, so one ``FanOut.fan_out_due`` catches up a
whole interval: every cabinet due, each at its own offset (``offset_ms``), none stored, so all
are added (the *due* pass). A second pass over the same due times follows on the same queue,
where every job is still live, so all are skipped (the *live* pass). A third is the steady
state's: the schedule one step back (an interval / ``SPREAD_STEPS``), so the cabinets of one
step are due, their jobs still live (the *step* pass, which a leader makes every step of its
shortest interval). Each run uses a queue of its own (deleted after it); the figures are
medians over the runs; CPU is this process's (``time.process_time``) over the pass.

Round trips are the client's sends to Redis: one per command, one per pipeline (redis-py writes
a pipeline at once). redis-py has no per-client hook for a send and the queue opens its own
connections, so ``round_trips`` wraps the connection class's ``send_packed_command`` for the
pass only, counts only the sends made in the pass's own task (a context variable: nothing else
running in the process is counted) and puts redis-py's method back after. The connections are opened
before the count starts: a running leader's pass pays no handshake.

A pass's round trips are bounded by ``round_trip_bound``, ceil(N / ``ENQUEUE_BATCH``) x 3 + 3.
The due pass takes per batch of cabinets one pipelined EXISTS, redis-py's ``SCRIPT EXISTS``
before a pipeline that runs scripts and the pipelined ``addBulk``, and per pass the schedule's
read and write; the live pass takes per batch the EXISTS only, and per pass the schedule's read
and write and one read of the queue's job states (its ``SCRIPT EXISTS`` and the script). Either
loads a script once on a fresh server (``SCRIPT LOAD``). On a Redis Cluster the adds are one
call each (BullMQ cannot pipeline its scripts there): the bound is for one server.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection

from wbsync.errors import ConfigError
from wbsync.jobs.fanout import SPREAD_STEPS, FanOut
from wbsync.jobs.leader import FanOutLeases, Held
from wbsync.jobs.queue import ENQUEUE_BATCH, SyncQueue
from wbsync_bench.common import delete_prefix, median, table, unique_prefix

QUEUE = "bench-fanout"
INTERVAL_S = 3600.0
NOW_MS = 1_800_000_000_000
"""The pass's clock (Redis's, in production): fixed, so every run has the same due times."""
ROUND_TRIPS_PER_BATCH = 3
ROUND_TRIPS_PER_PASS = 3
CASES = ("due", "live", "step")
"""The passes of a run, in order: every cabinet due and added, then every job live, then one
step's cabinets due (their jobs live)."""

_SENDS: ContextVar[list[int] | None] = ContextVar("wbsync_bench_fanout_sends", default=None)
_redis_py_send: list[Any] = []  # redis-py's own send while the counting one is in its place
_open = [0]  # round_trips under way (in any task)


@dataclass
class Params:
    """What to run."""

    cabinets: int = 10_000
    runs: int = 3

    def __post_init__(self) -> None:
        if self.cabinets < 1:
            raise ConfigError(f"cabinets must be >= 1, got {self.cabinets}")
        if self.runs < 1:
            raise ConfigError(f"runs must be >= 1, got {self.runs}")


def round_trip_bound(cabinets: int) -> int:
    """The most round trips one pass over ``cabinets`` may take (see the module docstring)."""
    return math.ceil(cabinets / ENQUEUE_BATCH) * ROUND_TRIPS_PER_BATCH + ROUND_TRIPS_PER_PASS


async def _counted(self: AbstractConnection, command: Any, check_health: bool = True) -> None:
    sends = _SENDS.get()
    if sends is not None:
        sends[0] += 1
    await _redis_py_send[0](self, command, check_health)


@contextlib.contextmanager
def _counted_sends() -> Iterator[None]:
    """While any is open, redis-py's connections count their sends into ``_SENDS`` where it is
    set; the last to close puts redis-py's own method back."""
    if not _redis_py_send:
        _redis_py_send.append(AbstractConnection.send_packed_command)
        AbstractConnection.send_packed_command = _counted  # type: ignore[method-assign]
    _open[0] += 1
    try:
        yield
    finally:
        _open[0] -= 1
        if not _open[0]:
            AbstractConnection.send_packed_command = _redis_py_send.pop()  # type: ignore[method-assign]


async def round_trips(fn: Callable[[], Awaitable[Any]]) -> tuple[int, float]:
    """Run ``fn``: the sends to Redis made in its task (and the tasks it starts), and its wall
    seconds. Other tasks' sends are not counted. Not reentrant."""
    if _SENDS.get() is not None:
        raise RuntimeError("round_trips is already counting in this task")
    sends = [0]
    token = _SENDS.set(sends)
    try:
        with _counted_sends():
            began = time.perf_counter()
            await fn()
            wall_s = time.perf_counter() - began
        return sends[0], wall_s
    finally:
        _SENDS.reset(token)


async def _one_run(url: str, cabinets: list[str]) -> dict[str, dict[str, Any]]:
    """A due pass then a live pass on a queue of the run's own."""
    prefix = unique_prefix("fanout")
    redis = Redis.from_url(url)
    queue = SyncQueue(QUEUE, redis_url=url, prefix=f"{prefix}:q")

    async def active() -> list[str]:
        return cabinets

    fanout = FanOut({QUEUE: queue}, active, {QUEUE: INTERVAL_S})
    leases = FanOutLeases(redis, prefix=prefix, lease_ms=60_000, owner="bench-fanout")
    held = Held(now_ms=NOW_MS, queues=(QUEUE,))
    interval_ms = int(INTERVAL_S * 1000)
    behind = {  # every cabinet's time in the interval is due; one step's
        "due": NOW_MS - interval_ms + 1,
        "live": NOW_MS - interval_ms + 1,
        "step": NOW_MS - interval_ms // SPREAD_STEPS,
    }
    out: dict[str, dict[str, Any]] = {}
    try:
        waiting = (await queue.counts())["waiting"]  # opens the queue's connection
        for case in CASES:
            await leases.set_through_ms({QUEUE: behind[case]})  # opens the schedule's connection
            cpu_s = time.process_time()
            sends, wall_s = await round_trips(lambda: fanout.fan_out_due(held, leases))
            cpu_s = time.process_time() - cpu_s
            after = (await queue.counts())["waiting"]
            out[case] = {
                "round_trips": sends,
                "wall_s": wall_s,
                "cpu_ms": round(cpu_s * 1000, 3),
                "added": after - waiting,
                "waiting_after": after,
            }
            waiting = after
    finally:
        await queue.obliterate()
        await queue.close()
        await delete_prefix(redis, prefix)
        await redis.aclose()
    return out


async def run(url: str, params: Params | None = None) -> dict[str, Any]:
    """``params.runs`` runs of a due pass and a live pass over ``params.cabinets`` cabinets."""
    params = params or Params()
    cabinets = [str(i) for i in range(1, params.cabinets + 1)]  # decimal ids, as in the store
    passes = [await _one_run(url, cabinets) for _ in range(params.runs)]
    cases = {
        case: {
            "round_trips": median([p[case]["round_trips"] for p in passes]),
            "round_trips_max": max(p[case]["round_trips"] for p in passes),
            "wall_s": median([p[case]["wall_s"] for p in passes]),
            "cpu_ms": median([p[case]["cpu_ms"] for p in passes]),
            "added": sorted({p[case]["added"] for p in passes}),
            "waiting_after": sorted({p[case]["waiting_after"] for p in passes}),
        }
        for case in CASES
    }
    return {
        "cabinets": params.cabinets,
        "round_trip_bound": round_trip_bound(params.cabinets),
        "cases": cases,
        "passes": passes,
        "params": {
            **asdict(params),
            "enqueue_batch": ENQUEUE_BATCH,
            "interval_s": INTERVAL_S,
            "round_trips_per_batch": ROUND_TRIPS_PER_BATCH,
            "round_trips_per_pass": ROUND_TRIPS_PER_PASS,
        },
    }


COLUMNS = ("round_trips", "round_trips_max", "wall_s", "cpu_ms", "added", "waiting_after")


def row(case: str, figures: dict[str, Any]) -> list[Any]:
    """One pass's row: its case, then ``COLUMNS`` (a set of per-run values joined; "-" for a
    figure a result recorded before that column existed does not have)."""
    cells = [figures.get(c, "-") for c in COLUMNS]
    return [case, *(", ".join(map(str, c)) if isinstance(c, list) else c for c in cells)]


def tables(result: dict[str, Any]) -> list[Any]:
    """One row per pass."""
    p = result["params"]
    return [
        table(
            f"fanout: one pass over {result['cabinets']:,} cabinets (median of {p['runs']}; "
            f"round-trip bound {result['round_trip_bound']})",
            ["pass", *COLUMNS],
            [row(case, figures) for case, figures in result["cases"].items()],
        )
    ]
