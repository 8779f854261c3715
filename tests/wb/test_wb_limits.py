"""The client follows WB's limits: a stricter WB is learned, a looser one changes nothing.

The emulator's limits are set apart from the client's table (``EmulatorConfig.limits``), as WB
changing a limit in a release would; the client keeps its table, and learns from the headers.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.support.waiting import wait_for
from tests.support.wb import ANCHOR, SELLER_A, SELLER_B
from tests.support.wb_processes import kill as _kill
from tests.support.wb_processes import result as _result
from tests.support.wb_processes import spawn as _spawn
from wbsync.config import Settings
from wbsync.emulator import EmulatorConfig, LimitSpec, running_emulator
from wbsync.emulator.server import Emulator
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.observability.metrics import sample
from wbsync.ratelimit import RateLimiter
from wbsync.redis import keys
from wbsync.shared.runtime import client_options, limiter_options
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
from wbsync.syncs.sections import STATISTICS_SALES
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint
from wbsync.wb.http import HttpPool
from wbsync.wb.methods import PRICES_GOODS_LIST

SELLER_C = "5d4c3b2a-1f0e-4d9c-8b7a-0123456789ab"
CALLS: dict[str, dict[str, Any]] = {
    FINANCE_DETAILED_REPORT.name: {
        "json": {"dateFrom": "2026-08-01", "dateTo": "2026-08-17", "limit": 1}
    },
    PRICES_GOODS_LIST.name: {"params": {"limit": 1}},
    STATISTICS_SALES.name: {"params": {"dateFrom": "2026-08-01"}},
}


def _limits(**by_group: tuple[float, int, int]) -> dict[str, Any]:
    return {
        group.replace("__", "."): {"period_s": p, "limit": n, "burst": b}
        for group, (p, n, b) in by_group.items()
    }


async def _calls(
    emu: Emulator,
    redis: Redis,
    prefix: str,
    pairs: list[tuple[str, Endpoint]],
    n: int,
    **options: Any,
) -> list[list[int]]:
    """``n`` calls of each (seller, endpoint) at once, through one production-wired limiter."""
    settings = Settings(
        wb_base_url=emu.base_url,
        time_scale=emu.config.time_scale,
        redis_prefix=prefix,
        **options,
    )
    limiter = RateLimiter(redis, limiter_options(settings))
    async with HttpPool() as http:

        async def run(seller: str, ep: Endpoint) -> list[int]:
            client = WbClient(
                seller[:8],
                emu.token(seller),
                limiter,
                options=client_options(settings),
                http=http,
            )
            return [(await client.call(ep, **CALLS[ep.name])).status for _ in range(n)]

        async def all_pairs() -> list[list[int]]:
            return list(await asyncio.gather(*(run(s, ep) for s, ep in pairs)))

        return await run_with_rate_limit_deferral(60_000, all_pairs)


def _by_pair(emu: Emulator) -> dict[tuple[str, str], list[int]]:
    statuses: dict[tuple[str, str], list[int]] = defaultdict(list)
    for entry in emu.counters.journal:
        statuses[(entry["seller"], entry["method"])].append(entry["status"])
    return statuses


#: Ten sellers besides the three named ones' (the fleet of a small deployment).
TEN_SELLERS = tuple(str(uuid.uuid5(uuid.NAMESPACE_URL, f"seller-{i}")) for i in range(10))


@pytest.mark.long
@pytest.mark.parametrize(
    ("sellers", "eps"),
    [
        ((SELLER_A, SELLER_B, SELLER_C), (FINANCE_DETAILED_REPORT, STATISTICS_SALES)),
        (TEN_SELLERS, (FINANCE_DETAILED_REPORT, STATISTICS_SALES, PRICES_GOODS_LIST)),
    ],
    ids=["3-sellers-2-groups", "10-sellers-3-groups"],
)
async def test_wb_at_half_the_table_costs_at_most_two_429s_per_bucket_over_two_processes(
    redis_url: str,
    prefix: str,
    redis: Redis,
    sellers: tuple[str, ...],
    eps: tuple[Endpoint, ...],
) -> None:
    # Scale 0.01: the table's finance and sales minute is 600 ms; WB's 2 minutes are 1.2 s;
    # WB holds prices to half the table's burst at half its rate too. A smaller scale makes a
    # loaded event loop's late wake-ups (tens of ms) a large share of WB's window, which is
    # jitter, not the stricter WB this test is about.
    config = EmulatorConfig(
        time_scale=0.01,
        anchor_date=ANCHOR,
        # A loaded machine delays a request by up to ~100 ms now and then (a sixth of WB's
        # window here); a jitter 429 is not what this test is about.
        grace_ms=100,
        limits=_limits(
            finance__detailed_report=(120, 1, 1),
            statistics__sales=(120, 1, 1),
            prices=(12, 10, 5),
        ),
    )
    pairs = [(s, ep) for s in sellers for ep in eps]
    async with running_emulator(config) as emu:
        other = await _spawn(
            {
                "redis_url": redis_url,
                "prefix": prefix,
                "base_url": emu.base_url,
                "time_scale": config.time_scale,
                "mode": "pairs",
                "pairs": [[emu.token(s), ep.name] for s, ep in pairs],
                "n": 3,
            }
        )
        try:
            here = await _calls(emu, redis, prefix, pairs, 3)
            there = await _result(other)
        finally:
            _kill([other])
        settings = Settings(time_scale=config.time_scale, redis_prefix=prefix)
        limiter = RateLimiter(redis, limiter_options(settings))
        learned = {
            (s, ep.group): await limiter.learned(
                WbClient("x", emu.token(s), limiter, options=client_options(settings)).scope(ep)
            )
            for s, ep in pairs
        }
    assert all(status == 200 for row in here + there["statuses"] for status in row)
    journal = _by_pair(emu)
    for seller, ep in pairs:
        statuses = journal[(seller, ep.name)]
        assert statuses.count(200) == 6, (seller, ep.name, statuses)
        # A paced request meets the stricter WB (unless a loaded machine spaced them by more
        # than WB's window anyway); a 429 our timing could explain teaches only when it
        # repeats, then none.
        assert statuses.count(429) <= 2, (seller, ep.name, statuses)
        found = learned[(seller, ep.group)]
        assert found is None or 429 in statuses, (seller, ep.name, statuses)
        # WB's interval is 600 ms. The estimate errs short by the time the refused request
        # spent on its way (tens of ms on a busy machine): it is stricter than the table's
        # 300 ms, whatever the load. It errs long by the refused request's round trip, which a
        # loaded machine stretches (1.7 s seen beside two test runs): a long estimate costs
        # pace until it expires, never a 429, so the bound only says it is of WB's order, not
        # the penalty's or the cap's.
        assert found is None or 300 < found.interval_ms <= 6000, found
    assert any(found is not None for found in learned.values())


async def test_wb_looser_than_the_table_changes_nothing(prefix: str, redis: Redis) -> None:
    # Scale 0.01: the table's finance window is 600 ms, WB's 300 ms.
    config = EmulatorConfig(
        time_scale=0.01,
        anchor_date=ANCHOR,
        grace_ms=30,
        limits=_limits(finance__detailed_report=(30, 1, 1), prices=(6, 20, 10)),
    )
    pairs = [
        (s, ep) for s in (SELLER_A, SELLER_B) for ep in (FINANCE_DETAILED_REPORT, PRICES_GOODS_LIST)
    ]
    before = {
        g: sample("wbsync_learned_limits_total", group=g)
        for g in ("prices", FINANCE_DETAILED_REPORT.group)
    }
    async with running_emulator(config) as emu:
        statuses = await _calls(emu, redis, prefix, pairs, 4)
    assert all(s == 200 for row in statuses for s in row)
    assert emu.counters.total("rate_limited") == 0
    assert [k async for k in redis.scan_iter(match=f"{prefix}:rl-learned:*")] == []
    for group, value in before.items():
        assert sample("wbsync_learned_limits_total", group=group) == value


async def test_a_smaller_burst_is_followed_from_remaining_without_a_429(
    prefix: str, redis: Redis
) -> None:
    # WB's prices bucket holds 2 tokens, the table's 5; both refill one per 600 ms (WB's own
    # time: a loaded machine's delays stay small beside it). A burst of 4 would be refused.
    config = EmulatorConfig(
        time_scale=1.0, anchor_date=ANCHOR, grace_ms=100, limits=_limits(prices=(6, 10, 2))
    )
    async with running_emulator(config) as emu:
        # The first reply shows Remaining 1 where ours is 4: our bucket drops to 1 ...
        first = await _calls(emu, redis, prefix, [(SELLER_A, PRICES_GOODS_LIST)], 1)
        # ... so a burst that our table would let through at once is paced as WB's bucket is.
        burst = await _calls(emu, redis, prefix, [(SELLER_A, PRICES_GOODS_LIST)] * 4, 1)
    start = emu.counters.journal[0]["t"]
    journal = [(round(e["t"] - start, 3), e["status"]) for e in emu.counters.journal]
    assert first + burst == [[200]] * 5
    assert emu.counters.total("rate_limited") == 0, journal
    assert [k async for k in redis.scan_iter(match=f"{prefix}:rl-learned:*")] == []


async def test_a_429_with_wbs_headers_teaches_wbs_interval(prefix: str, redis: Redis) -> None:
    # WB's prices bucket refills at half the table's rate: 5 per 6 s (240 ms a token at 0.2).
    config = EmulatorConfig(
        time_scale=0.2, anchor_date=ANCHOR, grace_ms=60, limits=_limits(prices=(6, 5, 5))
    )
    before = sample("wbsync_learned_limits_total", group="prices")
    async with running_emulator(config) as emu:
        [statuses] = await _calls(emu, redis, prefix, [(SELLER_A, PRICES_GOODS_LIST)], 8)
        settings = Settings(time_scale=0.2, redis_prefix=prefix)
        limiter = RateLimiter(redis, limiter_options(settings))
        client = WbClient("a", emu.token(SELLER_A), limiter, options=client_options(settings))
        learned = await limiter.learned(client.scope(PRICES_GOODS_LIST))
        key = keys.learned_key(prefix, client.scope(PRICES_GOODS_LIST))
    assert statuses == [200] * 8
    journal = _by_pair(emu)[(SELLER_A, PRICES_GOODS_LIST.name)]
    assert 1 <= journal.count(429) <= 2, journal
    # (Reset - Retry) / (burst - 1) reads WB's 240 ms a token (up to header rounding).
    assert learned is not None and 235 <= learned.interval_ms <= 245 and learned.burst == 5
    assert sample("wbsync_learned_limits_total", group="prices") >= before + 1
    assert await redis.pttl(key) > 0


async def test_wb_made_stricter_mid_run_is_learned_and_the_table_returns_after_the_ttl(
    prefix: str, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    # Finance: the table's 1 per 60 s is 300 ms at 0.005; WB moves to 1 per 90 s (450 ms).
    config = EmulatorConfig(time_scale=0.005, anchor_date=ANCHOR, grace_ms=100)
    finance = [(SELLER_A, FINANCE_DETAILED_REPORT)]
    ttl = {"learned_limit_ttl_s": 600.0}  # 3 s here
    settings = Settings(time_scale=0.005, redis_prefix=prefix)
    limiter = RateLimiter(redis, limiter_options(settings))
    learned_before = sample("wbsync_learned_limits_total", group=FINANCE_DETAILED_REPORT.group)
    async with running_emulator(config) as emu:
        scope = WbClient("a", emu.token(SELLER_A), limiter, options=client_options(settings)).scope(
            FINANCE_DETAILED_REPORT
        )
        assert await _calls(emu, redis, prefix, finance, 3, **ttl) == [[200] * 3]
        before = emu.counters.total("rate_limited")
        emu.change_limits({FINANCE_DETAILED_REPORT.group: LimitSpec(period_s=90, limit=1, burst=1)})
        with caplog.at_level(logging.WARNING, logger="wbsync.wb.feedback"):
            assert await _calls(emu, redis, prefix, finance, 4, **ttl) == [[200] * 4]
        refused = emu.counters.total("rate_limited") - before

        async def expired() -> bool:
            return await limiter.learned(scope) is None

        await wait_for(expired, 30)
    # One 429 our timing could explain teaches nothing; its repeat does, then no more.
    assert before == 0 and 2 <= refused <= 3
    learned = sample("wbsync_learned_limits_total", group=FINANCE_DETAILED_REPORT.group)
    assert learned >= learned_before + 1
    found = [r.args for r in caplog.records if "stricter than the table" in r.getMessage()]
    intervals = [float(str(args[2])) for args in found if isinstance(args, tuple)]
    # WB's 450 ms, read from its headers: long by up to a round trip, short by the time the
    # refused request spent on its way (tens of ms on a busy machine); stricter than the table's
    # 300 ms whatever the load.
    assert intervals and all(300 < i <= 1500 for i in intervals), intervals
