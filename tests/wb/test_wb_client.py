"""WbClient against the emulator: token checks, error mapping, retries, deferral pass-through."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY

from tests.support.limiter import LimiterFactory
from tests.support.wb import SELLER_A
from wbsync.emulator import FaultRule
from wbsync.emulator.server import Emulator
from wbsync.errors import (
    RateLimitDeferred,
    RateLimitExceeded,
    TokenError,
    WbAuthError,
    WbBadResponseError,
    WbRateLimitedError,
    WbRequestError,
    WbServerError,
    WbTransportError,
)
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
from wbsync.syncs.inventory import ANALYTICS_STOCKS_WB_WAREHOUSES
from wbsync.wb.client import WbClient
from wbsync.wb.methods import PRICES_GOODS_LIST
from wbsync.wb.retry import RetryPolicy
from wbsync.wb.tokens import Category, mint_token

ClientFactory = Callable[..., WbClient]
GOODS = {"params": {"limit": 1}}
FIN = {"json": {"dateFrom": "2026-08-01", "dateTo": "2026-08-17", "limit": 1}}
HEX_ID = re.compile(r"^[0-9a-f]{32}$")


def _sent(emulator: Emulator) -> int:
    return emulator.counters.total()


@pytest.mark.parametrize("raw", ["", "garbage", "a.b.c", "x.eyJzaWQiOiAxfQ.y"])
async def test_malformed_token_is_refused_before_any_request(
    emulator: Emulator, client_factory: ClientFactory, raw: str
) -> None:
    with pytest.raises(TokenError, match="cabinet-a"):
        client_factory(token=raw)
    assert _sent(emulator) == 0


async def test_expired_token_is_refused_before_any_request(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    raw = emulator.token(SELLER_A, lifetime=timedelta(seconds=-1))
    with pytest.raises(TokenError, match="expired") as info:
        client_factory(token=raw)
    assert raw not in str(info.value)
    assert _sent(emulator) == 0


async def test_missing_category_names_cabinet_and_category(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    client = client_factory(token=emulator.token(SELLER_A, categories=[Category.CONTENT]))
    async with client:
        with pytest.raises(TokenError) as info:
            await client.call(FINANCE_DETAILED_REPORT, **FIN)
    message = str(info.value)
    assert "cabinet-a" in message and "'finance'" in message
    assert _sent(emulator) == 0


async def test_no_log_line_exception_or_repr_shows_the_token(
    emulator: Emulator, client_factory: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    raw = emulator.token(SELLER_A)
    emulator.set_faults(
        [
            FaultRule(kind="rate_limit", count=1, retry_s=1),
            FaultRule(kind="error", method="prices.goods_list", count=1),
        ]
    )
    errors: list[str] = []
    async with client_factory(token=raw, retry=RetryPolicy(attempts=2)) as client:
        await client.call(PRICES_GOODS_LIST, **GOODS)
        await client.call(PRICES_GOODS_LIST, **GOODS)
        errors.append(repr(client))
        foreign = mint_token(
            key="someone-else-entirely-0123456789abcdef",
            seller_id=SELLER_A,
            categories=[Category.PRICES],
        )
        async with client_factory(token=foreign) as other:
            with pytest.raises(WbAuthError) as info:
                await other.call(PRICES_GOODS_LIST, **GOODS)
            errors += [str(info.value), repr(info.value)]
    assert caplog.records, "expected the client to log its retries"
    signature = raw.split(".")[2]
    for text in [r.getMessage() for r in caplog.records] + errors:
        assert raw not in text and signature not in text
        assert foreign.split(".")[2] not in text


async def test_4xx_is_not_retried_and_carries_request_id(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    foreign = mint_token(
        key="someone-else-entirely-0123456789abcdef",
        seller_id=SELLER_A,
        categories=[Category.PRICES],
    )
    async with client_factory(token=foreign) as client:
        with pytest.raises(WbAuthError) as info:
            await client.call(PRICES_GOODS_LIST, **GOODS)
    assert info.value.status == 401 and HEX_ID.match(info.value.request_id or "")
    assert _sent(emulator) == 1
    async with client_factory() as client:
        with pytest.raises(WbRequestError) as bad:
            await client.call(ANALYTICS_STOCKS_WB_WAREHOUSES, json={"limit": 0})
    assert bad.value.status == 400 and _sent(emulator) == 2


async def test_5xx_is_retried_within_the_budget(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    emulator.set_faults([FaultRule(kind="error", count=2, status=502)])
    async with client_factory(retry=RetryPolicy(attempts=3)) as client:
        reply = await client.call(PRICES_GOODS_LIST, **GOODS)
    assert reply.status == 200 and _sent(emulator) == 3
    emulator.set_faults([FaultRule(kind="error", count=10, status=503)])
    async with client_factory(retry=RetryPolicy(attempts=3)) as client:
        with pytest.raises(WbServerError) as info:
            await client.call(PRICES_GOODS_LIST, **GOODS)
    assert info.value.status == 503 and HEX_ID.match(info.value.request_id or "")
    assert _sent(emulator) == 6


async def test_dropped_and_slow_replies_become_transport_errors(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    emulator.set_faults([FaultRule(kind="drop", count=10)])
    async with client_factory(retry=RetryPolicy(attempts=3)) as client:
        with pytest.raises(WbTransportError) as info:
            await client.call(PRICES_GOODS_LIST, **GOODS)
    assert info.value.method == "prices.goods_list" and _sent(emulator) == 3
    emulator.reset()
    emulator.set_faults([FaultRule(kind="slow", count=10, delay_ms=300)])
    async with client_factory(retry=RetryPolicy(attempts=2), timeout_s=0.05) as client:
        with pytest.raises(WbTransportError, match="Timeout"):
            await client.call(PRICES_GOODS_LIST, **GOODS)


async def test_malformed_body_is_a_bad_response_not_retried(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    emulator.set_faults([FaultRule(kind="malformed", count=1)])
    async with client_factory() as client:
        with pytest.raises(WbBadResponseError):
            await client.call(PRICES_GOODS_LIST, **GOODS)
    assert _sent(emulator) == 1


def _upstream(section: str, status: str) -> float:
    labels = {"section": section, "status": status, "queue": ""}
    return REGISTRY.get_sample_value("wbsync_upstream_requests_total", labels) or 0.0


async def test_429_penalizes_and_retries_then_gives_up_past_its_budget(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    before_429, before_200 = _upstream("prices", "429"), _upstream("prices", "200")
    emulator.set_faults([FaultRule(kind="rate_limit", count=2, retry_s=5)])
    async with client_factory() as client:
        assert (await client.call(PRICES_GOODS_LIST, **GOODS)).status == 200
    assert _upstream("prices", "429") - before_429 == 2
    assert _upstream("prices", "200") - before_200 == 1
    emulator.set_faults([FaultRule(kind="rate_limit", count=10, retry_s=1)])
    async with client_factory(retry=RetryPolicy(rate_limit_attempts=2)) as client:
        with pytest.raises(WbRateLimitedError) as info:
            await client.call(PRICES_GOODS_LIST, **GOODS)
    assert info.value.status == 429 and info.value.retry_after == pytest.approx(0.001)
    assert emulator.counters.total("rate_limited") == 2 + 3


async def test_rate_limit_deferred_passes_through_unchanged(
    emulator: Emulator, client_factory: ClientFactory, limiter_factory: LimiterFactory
) -> None:
    async with client_factory() as client:
        await client.call(FINANCE_DETAILED_REPORT, **FIN)
        # The window stays closed a minute, however long the machine takes to the next call.
        await limiter_factory().penalize(client.scope(FINANCE_DETAILED_REPORT), 60_000)
        with pytest.raises(RateLimitDeferred) as info:
            await run_with_rate_limit_deferral(
                0, lambda: client.call(FINANCE_DETAILED_REPORT, **FIN)
            )
    assert type(info.value) is RateLimitDeferred
    assert info.value.scope == client.scope(FINANCE_DETAILED_REPORT)
    assert _sent(emulator) == 1


async def test_deferral_after_an_upstream_429(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    # 3000 WB seconds at scale 0.001: the window after the 429 is 3 s, past a 10 ms threshold
    # (and never waited out here), within the headers' ceiling (an hour, 3.6 s here).
    emulator.set_faults([FaultRule(kind="rate_limit", count=1, retry_s=3000)])
    async with client_factory() as client:
        started = time.monotonic()
        with pytest.raises(RateLimitDeferred) as info:
            await run_with_rate_limit_deferral(10, lambda: client.call(PRICES_GOODS_LIST, **GOODS))
        elapsed_ms = (time.monotonic() - started) * 1000
        # Outside a job the same window is past the limiter's ceiling: RateLimitExceeded.
        with pytest.raises(RateLimitExceeded):
            await client.call(PRICES_GOODS_LIST, **GOODS)
    # The deferral waits for the window WB asked for, counted from the 429.
    assert 3000 - elapsed_ms <= info.value.wait_ms <= 3000
    assert _sent(emulator) == 1


async def test_a_429_costs_wbs_retry_not_the_buckets_interval(
    emulator: Emulator, client_factory: ClientFactory
) -> None:
    """WB serves nothing with a 429: the token the refused request took is given back, so a
    1-a-minute method refused with a short Retry is asked again after that Retry, not a minute
    later (inside a job: a wait under the threshold, no deferral)."""
    emulator.set_faults([FaultRule(kind="rate_limit", count=1, retry_s=1)])
    async with client_factory() as client:
        scope = client.scope(FINANCE_DETAILED_REPORT)
        threshold_ms = scope.limit.interval_ms * emulator.config.time_scale / 2
        reply = await run_with_rate_limit_deferral(
            threshold_ms, lambda: client.call(FINANCE_DETAILED_REPORT, **FIN)
        )
    assert reply.status == 200
    assert emulator.counters.total("rate_limited") == 1 and _sent(emulator) == 2


async def test_closed_client_refuses_calls(client_factory: ClientFactory) -> None:
    client = client_factory()
    await client.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await client.call(PRICES_GOODS_LIST, **GOODS)
