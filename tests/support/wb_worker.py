"""A second process for the client tests: ``python -m tests.support.wb_worker <json args>``.

Modes: ``calls`` makes ``n`` calls of ``method`` and prints their statuses; ``wait-go`` prints
``ready``, waits for a line on stdin, then makes the calls and prints how long they took;
``pairs`` makes ``n`` calls for each ``[token, method]`` of ``pairs`` at once and prints the
statuses of each. The calls run in a deferral context with a long threshold, as a job's would:
waits are slept.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from redis.asyncio import Redis

from wbsync.config import Settings
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.ratelimit import RateLimiter
from wbsync.shared.runtime import client_options, limiter_options
from wbsync.system import eventloop
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import ENDPOINTS
from wbsync.wb.http import HttpPool

BODIES: dict[str, dict[str, Any]] = {
    "finance.detailed_report": {
        "json": {"dateFrom": "2026-08-01", "dateTo": "2026-08-17", "limit": 1}
    },
    "prices.goods_list": {"params": {"limit": 1}},
    "statistics.sales": {"params": {"dateFrom": "2026-08-01"}},
}


async def main(args: dict[str, Any]) -> None:
    redis = Redis.from_url(args["redis_url"], decode_responses=True)
    settings = Settings(
        wb_base_url=args["base_url"], time_scale=args["time_scale"], redis_prefix=args["prefix"]
    )
    # As in production (wbsync.shared.runtime): the refill margin absorbs request-arrival jitter.
    limiter = RateLimiter(redis, limiter_options(settings))
    if args["mode"] == "pairs":
        await pairs(args, limiter, settings)
        await redis.aclose()
        return
    ep = ENDPOINTS[args["method"]]
    try:
        async with (
            HttpPool() as http,
            WbClient(
                args["cabinet"],
                args["token"],
                limiter,
                options=client_options(settings),
                http=http,
            ) as client,
        ):
            # A cold process's first request pays for lazy imports and the connection, tens of
            # ms after its token was taken; at test scale that is most of a window. Warm up.
            await _warm_up(http, args["base_url"])
            if args["mode"] == "wait-go":
                print("ready", flush=True)
                await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
            started = time.monotonic()

            async def calls() -> list[int]:
                return [(await client.call(ep, **BODIES[ep.name])).status for _ in range(args["n"])]

            # Like a job: waits up to the threshold are slept in place, not refused.
            statuses = await run_with_rate_limit_deferral(60_000, calls)
            elapsed_ms = (time.monotonic() - started) * 1000.0
            print(json.dumps({"statuses": statuses, "elapsed_ms": elapsed_ms}), flush=True)
    finally:
        await redis.aclose()


async def pairs(args: dict[str, Any], limiter: RateLimiter, settings: Settings) -> None:
    async def calls(http: HttpPool, token: str, method: str) -> list[int]:
        ep = ENDPOINTS[method]
        client = WbClient(token[-12:], token, limiter, options=client_options(settings), http=http)
        return [(await client.call(ep, **BODIES[ep.name])).status for _ in range(args["n"])]

    async with HttpPool() as http:
        await _warm_up(http, args["base_url"])  # as above
        statuses = await run_with_rate_limit_deferral(
            60_000,
            lambda: asyncio.gather(*(calls(http, t, m) for t, m in args["pairs"])),
        )
    print(json.dumps({"statuses": statuses}), flush=True)


async def _warm_up(http: HttpPool, base_url: str) -> None:
    """Open the pool's connection and load the HTTP stack's lazy parts, spending no budget."""
    await http.exchange(
        "GET",
        f"{base_url}/__emulator/limits",
        name="warm-up",
        params=None,
        body=None,
        headers={},
        deadline_s=10.0,
        read_timeout_s=10.0,
        max_body_bytes=1 << 20,
    )


if __name__ == "__main__":
    eventloop.run(main(json.loads(sys.argv[1])))  # the loop of wbsync's processes
