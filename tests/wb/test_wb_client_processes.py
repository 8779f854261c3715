"""Several processes, one cabinet, one shared bucket: WB never has to say 429 twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from itertools import pairwise
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.support.wb import ANCHOR, SELLER_A
from tests.support.wb_processes import kill as _kill
from tests.support.wb_processes import result as _result
from tests.support.wb_processes import spawn as _spawn
from wbsync.config import Settings
from wbsync.emulator import EmulatorConfig, FaultRule, running_emulator
from wbsync.emulator.server import Emulator
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.ratelimit import BucketScope, RateLimiter
from wbsync.shared.runtime import client_options, limiter_options
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
from wbsync.wb.client import WbClient
from wbsync.wb.methods import PRICES_GOODS_LIST


def _args(
    emu: Emulator, redis_url: str, prefix: str, method: str, n: int, mode: str
) -> dict[str, Any]:
    return {
        "redis_url": redis_url,
        "prefix": prefix,
        "base_url": emu.base_url,
        "token": emu.token(SELLER_A),
        "time_scale": emu.config.time_scale,
        "method": method,
        "n": n,
        "mode": mode,
        "cabinet": "shop",
    }


@pytest.fixture
async def slow_emulator() -> AsyncIterator[Emulator]:
    """Scale 0.003: the finance report's minute is 180 ms, WB's 1-per-window bucket.

    The workers' limiters use the production refill margin (2 % of the window here, 3.6 ms),
    far less than the delay between a process taking a token and its request reaching the
    emulator under a full, parallel test run; the 100 ms grace covers that. Two processes that
    did not share the bucket would still collide in every 180 ms window.
    """
    config = EmulatorConfig(time_scale=0.003, grace_ms=100, anchor_date=ANCHOR)
    async with running_emulator(config) as emu:
        yield emu


@pytest.mark.long
async def test_two_processes_share_one_bucket_and_see_no_429(
    slow_emulator: Emulator, redis_url: str, prefix: str
) -> None:
    emu = slow_emulator
    args = _args(emu, redis_url, prefix, FINANCE_DETAILED_REPORT.name, 10, "calls")
    procs = [await _spawn(args) for _ in range(2)]
    try:
        results = [await _result(p) for p in procs]
    finally:
        _kill(procs)
    assert all(s == 200 for r in results for s in r["statuses"])
    journal = list(emu.counters.journal)
    gaps = [(round((b["t"] - a["t"]) * 1000), b["status"]) for a, b in pairwise(journal)]
    assert emu.counters.total(seller=SELLER_A) == 20, gaps
    assert emu.counters.total("rate_limited") == 0, gaps
    # They were paced by the shared bucket: 20 requests, one per 180 ms window.
    times = [e["t"] for e in emu.counters.journal]
    assert times[-1] - times[0] >= 19 * 0.18 - 0.05


async def _wait_for_penalty(limiter: RateLimiter, scope: BucketScope, at_least_ms: int) -> None:
    deadline = asyncio.get_running_loop().time() + 5.0
    while (await limiter.peek(scope)).wait_ms < at_least_ms:
        assert asyncio.get_running_loop().time() < deadline, "bucket never penalized"
        await asyncio.sleep(0.005)


async def test_upstream_429_penalizes_the_bucket_for_another_process(
    redis_url: str, prefix: str, redis: Redis
) -> None:
    # Scale 0.01: the injected 429 asks for 60 WB seconds, 0.6 s here.
    async with running_emulator(EmulatorConfig(time_scale=0.01, anchor_date=ANCHOR)) as emu:
        other = await _spawn(_args(emu, redis_url, prefix, PRICES_GOODS_LIST.name, 1, "wait-go"))
        assert other.stdout is not None and other.stdin is not None
        settings = Settings(wb_base_url=emu.base_url, time_scale=0.01, redis_prefix=prefix)
        # The same refill margin as the worker's: a penalty is stored as the bucket's full
        # time, which processes with different margins would read differently.
        limiter = RateLimiter(redis, limiter_options(settings))
        client = WbClient("shop", emu.token(SELLER_A), limiter, options=client_options(settings))
        try:
            assert (await asyncio.wait_for(other.stdout.readline(), 30)).strip() == b"ready"
            rule = FaultRule(kind="rate_limit", method=PRICES_GOODS_LIST.name, count=1, retry_s=60)
            emu.set_faults([rule])
            call = asyncio.create_task(
                run_with_rate_limit_deferral(
                    60_000, lambda: client.call(PRICES_GOODS_LIST, params={"limit": 1})
                )
            )
            # Only once this process has pushed the shared bucket does the other one start.
            await _wait_for_penalty(limiter, client.scope(PRICES_GOODS_LIST), 300)
            other.stdin.write(b"go\n")
            await other.stdin.drain()
            result = await _result(other)
            assert (await call).status == 200
        finally:
            _kill([other])
            await client.aclose()
    journal = list(emu.counters.journal)
    refused = [e for e in journal if e["status"] == 429]
    assert len(refused) == 1 and refused[0]["fault"] == "rate_limit"
    later = [e for e in journal if e["t"] > refused[0]["t"]]
    assert len(later) == 2 and all(e["status"] == 200 for e in later)
    # Both this process's retry and the other process's request waited out X-Ratelimit-Retry.
    assert all(e["t"] - refused[0]["t"] >= 0.6 - 0.01 for e in later), [
        round(e["t"] - refused[0]["t"], 3) for e in later
    ]
    assert result["statuses"] == [200] and result["elapsed_ms"] >= 250
