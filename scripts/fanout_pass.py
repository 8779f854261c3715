"""One fan-out pass over N cabinets, each due at its own time: round trips and wall time.

    python scripts/fanout_pass.py [--cabinets N] [--runs R] [--live] [--redis URL]

The schedule is set one interval back, so one ``FanOut.fan_out_due`` catches up the whole
interval: every cabinet due, each at its own offset. With ``--live`` a second pass over the same
due times is measured instead, where every job is still live (all skipped). Round trips are the
client's sends to Redis (one per command, one per pipeline), counted at the connection; figures
are medians over R runs, each on a fresh queue (deleted afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any

import redis.asyncio.connection as connection
from redis.asyncio import Redis

from wbsync.jobs.fanout import FanOut
from wbsync.jobs.leader import FanOutLeases, Held
from wbsync.jobs.queue import SyncQueue

QUEUE = "fanout-pass"
INTERVAL_S = 3600.0
NOW_MS = 1_800_000_000_000
_sends = [0]
_send = connection.AbstractConnection.send_packed_command


async def _counted(self: Any, command: Any, check_health: bool = True) -> None:
    _sends[0] += 1
    await _send(self, command, check_health)


async def _one(url: str, n: int, live: bool) -> tuple[int, float]:
    prefix = f"fanout-pass:{uuid.uuid4().hex[:8]}"
    redis = Redis.from_url(url)
    queue = SyncQueue(QUEUE, redis_url=url, prefix=f"{prefix}:q")
    cabinets = [str(i) for i in range(1, n + 1)]

    async def active() -> list[str]:
        return cabinets

    fanout = FanOut({QUEUE: queue}, active, {QUEUE: INTERVAL_S})
    leases = FanOutLeases(redis, prefix=prefix, lease_ms=60_000, owner="pass")
    behind = NOW_MS - int(INTERVAL_S * 1000) + 1
    try:
        for measured in (False, True) if live else (True,):
            await leases.set_through_ms({QUEUE: behind})
            await fanout._cabinets(60.0)  # the active cabinets read before the clock starts
            _sends[0] = 0
            began = time.perf_counter()
            await fanout.fan_out_due(Held(now_ms=NOW_MS, queues=(QUEUE,)), leases)
            wall_s = time.perf_counter() - began
            sends = _sends[0]
            if not measured:
                continue
        assert (await queue.counts())["waiting"] == n
        return sends, wall_s
    finally:
        await queue.obliterate()
        await queue.close()
        await redis.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cabinets", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--live", action="store_true", help="measure a pass that skips them all")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    connection.AbstractConnection.send_packed_command = _counted  # type: ignore[method-assign]
    runs = [await _one(args.redis, args.cabinets, args.live) for _ in range(args.runs)]
    print(
        f"{args.cabinets} cabinets{' (all live)' if args.live else ''}: "
        f"round trips {statistics.median(s for s, _ in runs):.0f}, "
        f"wall {statistics.median(w for _, w in runs):.2f} s (median of {args.runs})"
    )


if __name__ == "__main__":
    asyncio.run(main())
