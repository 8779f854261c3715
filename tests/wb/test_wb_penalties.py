"""WB's penalties through the client and the emulator: a global-limiter 429 holds every method
of the seller, a method's penalty of hours is kept to the second, and both are recorded."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.waiting import wait_for
from tests.support.wb import SELLER_A, SELLER_B
from wbsync.emulator.config import FaultRule
from wbsync.emulator.server import Emulator
from wbsync.errors import RateLimitDeferred, RateLimitExceeded
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.ratelimit import GLOBAL_GROUP, BucketScope, Limit, RateLimiter
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
from wbsync.syncs.sections import STATISTICS_SALES
from wbsync.wb.client import WbClient
from wbsync.wb.endpoints import Endpoint
from wbsync.wb.feedback import Feedback
from wbsync.wb.methods import PRICES_GOODS_LIST

ClientFactory = Callable[..., WbClient]
GOODS = {"params": {"limit": 1}}
FIN = {"json": {"dateFrom": "2026-08-01", "dateTo": "2026-08-17", "limit": 1}}
SALES = {"params": {"dateFrom": "2026-08-01"}}
CALLS: list[tuple[Endpoint, dict[str, Any]]] = [
    (PRICES_GOODS_LIST, GOODS),
    (FINANCE_DETAILED_REPORT, FIN),
    (STATISTICS_SALES, SALES),
]


def _sent(emulator: Emulator, seller: str) -> list[int]:
    return [e["status"] for e in emulator.counters.journal if e["seller"] == seller]


async def test_a_global_limiter_429_holds_every_method_of_the_seller_until_it_lifts(
    emulator: Emulator, client_factory: ClientFactory, limiter_factory: Callable[..., RateLimiter]
) -> None:
    limiter = limiter_factory(time_scale=emulator.config.time_scale)  # another process's view
    # 2000 WB seconds at scale 0.001: 2 s. Each request during it would restart it at WB.
    rule = FaultRule(kind="global_limit", method=PRICES_GOODS_LIST.name, count=1, retry_s=2000)
    emulator.set_faults([rule.model_copy(update={"seller": SELLER_A, "extends": True})])
    async with client_factory() as client, client_factory(seller=SELLER_B) as other:
        with pytest.raises(RateLimitExceeded) as caught:
            await client.call(PRICES_GOODS_LIST, **GOODS)
        assert caught.value.scope.group == GLOBAL_GROUP
        for ep, kwargs in CALLS:
            call = functools.partial(client.call, ep, **kwargs)
            with pytest.raises(RateLimitDeferred) as deferred:
                await run_with_rate_limit_deferral(10, call)
            assert deferred.value.scope.group == GLOBAL_GROUP  # named: the seller's bucket
            assert deferred.value.wait_ms <= 2000
        assert (await other.call(FINANCE_DETAILED_REPORT, **FIN)).status == 200
        [penalty] = await limiter.penalties()
        assert (penalty.seller, penalty.group) == (SELLER_A, GLOBAL_GROUP)
        assert penalty.words is not None and "global limiter" in penalty.words
        # Nothing of the seller reached WB while the penalty held.
        assert _sent(emulator, SELLER_A) == [429]

        async def lifted() -> bool:
            return not await limiter.penalties()

        await wait_for(lifted, 60)
        for ep, kwargs in CALLS:
            assert (await client.call(ep, **kwargs)).status == 200
    # The first request after the wait found WB's penalty over (none extended it).
    assert _sent(emulator, SELLER_A) == [429, 200, 200, 200]


async def test_a_method_penalty_of_hours_is_kept_and_recorded_then_lifted(
    emulator: Emulator, client_factory: ClientFactory, limiter_factory: Callable[..., RateLimiter]
) -> None:
    limiter = limiter_factory(time_scale=emulator.config.time_scale)
    # WB's finance 429 of 18,236 s (5 h 4 min): 18.236 s at scale 0.001, within the 6 h cap.
    rule = FaultRule(
        kind="rate_limit", method=FINANCE_DETAILED_REPORT.name, count=1, retry_s=18_236
    )
    emulator.set_faults([rule])
    async with client_factory() as client:
        finance = functools.partial(client.call, FINANCE_DETAILED_REPORT, **FIN)
        with pytest.raises(RateLimitDeferred) as deferred:
            await run_with_rate_limit_deferral(10, finance)
        assert deferred.value.scope.group == FINANCE_DETAILED_REPORT.group
        assert 18_000 < deferred.value.wait_ms <= 18_236  # not an hour, not a minute
        # Only the method is penalised: another method of the seller goes on.
        assert (await client.call(PRICES_GOODS_LIST, **GOODS)).status == 200
        [penalty] = await limiter.penalties()
        assert penalty.group == FINANCE_DETAILED_REPORT.group
        assert penalty.words is not None and "limited by " in penalty.words
        lifted = await limiter.lift(SELLER_A, penalty.group)
        assert lifted is not None and (lifted.until_ms, lifted.words) == (
            penalty.until_ms,
            penalty.words,
        )
        assert (await finance()).status == 200  # lifted for every process: at once
    assert _sent(emulator, SELLER_A) == [429, 200, 200]


async def test_a_limiter_that_refuses_two_groups_is_the_sellers_global_one(
    limiter_factory: Callable[..., RateLimiter],
) -> None:
    limiter = limiter_factory()
    feedback = Feedback(limiter, cabinet="c")
    limit = Limit(period_s=60, limit=1, burst=1)
    prices, finance = BucketScope("s", "prices", limit), BucketScope("s", "finance", limit)
    words = "limited by 7c9e6679-7425-40de-944b-e07fc1f90ae7"
    body = {"title": "too many requests", "detail": words}
    assert not await feedback.is_global(prices, body, words)
    assert not await feedback.is_global(prices, body, words)  # the same group again
    assert await feedback.is_global(finance, body, words)  # the same limiter, another group
    assert await feedback.is_global(prices, body, words)
    # Another seller's limiters are its own.
    assert not await feedback.is_global(BucketScope("t", "finance", limit), body, words)
    # Words that name the global limiter need no history.
    said = {"detail": "limited by 1234abcd (Global limiter)"}
    assert await feedback.is_global(BucketScope("u", "prices", limit), said, said["detail"])
