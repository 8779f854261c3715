"""The client's bounds against a hostile WB, over real HTTP: a reply trickling past the
deadline, absurd rate-limit headers, a redirect, a body past the maximum size."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.support.limiter import LimiterFactory
from tests.support.wb import ANCHOR, FAST, SELLER_A
from wbsync.config import Settings
from wbsync.emulator import EmulatorConfig, SellerSizes, running_emulator
from wbsync.emulator.config import FaultRule
from wbsync.emulator.server import Emulator
from wbsync.errors import (
    RateLimitExceeded,
    WbBadResponseError,
    WbBodyTooLargeError,
    WbTransportError,
)
from wbsync.redis import keys
from wbsync.shared.runtime import client_options
from wbsync.syncs.finance import finance_detailed_report
from wbsync.syncs.pricing import upload_prices
from wbsync.wb import methods
from wbsync.wb.client import WbClient
from wbsync.wb.methods import PRICES_GOODS_LIST, TARIFFS_ACCEPTANCE_COEFFICIENTS
from wbsync.wb.retry import RetryPolicy
from wbsync.wb.tokens import Category, mint_token

GOODS: dict[str, Any] = {"params": {"limit": 10, "offset": 0}}
MakeClient = Callable[..., WbClient]


@pytest.fixture
def make_client(emulator: Emulator, limiter_factory: LimiterFactory) -> MakeClient:
    """A client of the emulator with settings of the test's choosing (the emulator's scale)."""
    scale = emulator.config.time_scale
    limiter = limiter_factory(time_scale=scale)

    def make(*, attempts: int = 2, **options: Any) -> WbClient:
        settings = Settings(wb_base_url=emulator.base_url, time_scale=scale, **options)
        return WbClient(
            "cabinet-a",
            emulator.token(SELLER_A),
            limiter,
            options=dataclasses.replace(
                client_options(settings, retry=RetryPolicy(attempts=attempts, base_delay_s=0.0)),
                read_timeout_s=10.0,
            ),
            rng=random.Random(0),
        )

    return make


async def test_a_reply_trickling_past_the_deadline_is_a_transport_failure(
    emulator: Emulator, make_client: MakeClient
) -> None:
    # A byte every 20 ms: each read is answered well within the 10 s read timeout, and the
    # goods page (kilobytes) would take minutes; the deadline of the whole exchange ends it.
    emulator.set_faults([FaultRule(kind="trickle", method="prices.goods_list", delay_ms=20)])
    async with make_client(attempts=2, wb_request_deadline_s=0.3) as client:
        with pytest.raises(WbTransportError, match="WBSYNC_WB_REQUEST_DEADLINE_S") as caught:
            await client.call(PRICES_GOODS_LIST, **GOODS)
    assert "within 0.3 s" in str(caught.value) and caught.value.method == "prices.goods_list"
    # Retried within the call's budget like any lost answer, then given up.
    assert emulator.counters.total("requests") == 2


HOSTILE = ["inf", "nan", "-5", "abc", "Infinity", ""]


@pytest.mark.parametrize("header", ["X-Ratelimit-Retry", "X-Ratelimit-Reset", "Retry-After"])
@pytest.mark.parametrize("value", HOSTILE)
async def test_an_unusable_rate_limit_header_is_read_as_absent(
    emulator: Emulator,
    make_client: MakeClient,
    redis: Redis,
    prefix: str,
    caplog: pytest.LogCaptureFixture,
    header: str,
    value: str,
) -> None:
    # The only wait header of the 429 is the hostile one.
    waits = {"X-Ratelimit-Retry": "", "X-Ratelimit-Reset": "", "Retry-After": ""}
    rule = FaultRule(kind="rate_limit", method="prices.goods_list", count=1)
    emulator.set_faults([rule.model_copy(update={"headers": waits | {header: value}})])
    async with make_client() as client:
        scope = client.scope(PRICES_GOODS_LIST)
        with caplog.at_level(logging.WARNING, logger="wbsync.wb.feedback"):
            reply = await client.call(PRICES_GOODS_LIST, **GOODS)
    # No wait header was usable: the bucket waited its own period (6 ms here); no OverflowError.
    assert reply.status == 200
    assert [e["status"] for e in emulator.counters.journal] == [429, 200]
    warned = [r.getMessage() for r in caplog.records if r.name == "wbsync.wb.feedback"]
    assert len(warned) == (1 if value else 0), warned  # an empty header is no header
    assert all("prices.goods_list" in w and header in w for w in warned)
    assert emulator.token(SELLER_A) not in caplog.text
    # Nothing learned from headers that could not be read.
    assert await redis.exists(keys.learned_key(prefix, scope)) == 0


@pytest.mark.parametrize("header", ["X-Ratelimit-Retry", "X-Ratelimit-Reset", "Retry-After"])
@pytest.mark.parametrize("value", ["999999999", "1e308", "21601"])
async def test_a_wait_past_the_cap_is_clamped_to_it_not_shortened(
    emulator: Emulator,
    make_client: MakeClient,
    caplog: pytest.LogCaptureFixture,
    header: str,
    value: str,
) -> None:
    # The cap is 6 h of WB time: 21.6 s at this scale, past any ceiling of the call.
    waits = {"X-Ratelimit-Retry": "", "X-Ratelimit-Reset": "", "Retry-After": ""}
    rule = FaultRule(kind="rate_limit", method="prices.goods_list", count=1)
    emulator.set_faults([rule.model_copy(update={"headers": waits | {header: value}})])
    async with make_client() as client:
        with caplog.at_level(logging.WARNING, logger="wbsync.wb.feedback"):
            with pytest.raises(RateLimitExceeded) as caught:
                await client.call(PRICES_GOODS_LIST, **GOODS)
    cap_s = 21_600 * emulator.config.time_scale
    assert cap_s - 1.0 <= caught.value.retry_after <= cap_s
    assert [e["status"] for e in emulator.counters.journal] == [429]
    assert sum(header in r.getMessage() for r in caplog.records) == 1


async def test_retry_after_as_an_http_date_is_followed(
    emulator: Emulator, make_client: MakeClient
) -> None:
    # Three seconds from now (whole seconds in a date): past the on-demand ceiling, within the
    # headers' ceiling (an hour, 3.6 s at this scale), so the call refuses with WB's wait.
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=3), usegmt=True)
    waits = {"X-Ratelimit-Retry": "", "X-Ratelimit-Reset": "", "Retry-After": when}
    emulator.set_faults([FaultRule(kind="rate_limit", count=1, headers=waits)])
    async with make_client() as client:
        with pytest.raises(RateLimitExceeded) as caught:
            await client.call(PRICES_GOODS_LIST, **GOODS)
    assert 1.0 < caught.value.retry_after <= 3.0


async def test_retry_after_as_a_date_past_the_cap_is_clamped_to_it(
    emulator: Emulator, make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    when = format_datetime(datetime(2099, 1, 1, tzinfo=UTC), usegmt=True)
    waits = {"X-Ratelimit-Retry": "", "X-Ratelimit-Reset": "", "Retry-After": when}
    emulator.set_faults([FaultRule(kind="rate_limit", count=1, headers=waits)])
    async with make_client() as client:
        with pytest.raises(RateLimitExceeded) as caught:
            await client.call(PRICES_GOODS_LIST, **GOODS)
    assert caught.value.retry_after > 21_600 * emulator.config.time_scale - 1.0
    assert "Retry-After" in caplog.text


@pytest.mark.parametrize("method", ["prices.goods_list", "prices.upload_task"])
async def test_a_redirect_is_an_unusable_reply_on_a_read_and_a_write(
    emulator: Emulator, make_client: MakeClient, method: str
) -> None:
    emulator.set_faults([FaultRule(kind="redirect", method=method, status=307)])
    async with make_client() as client:
        with pytest.raises(WbBadResponseError, match="answered 307") as caught:
            if method == "prices.goods_list":
                await client.call(PRICES_GOODS_LIST, **GOODS)
            else:
                await upload_prices(client, [{"nmID": 1, "price": 100, "discount": 0}])
    assert caught.value.status == 307
    # Not followed, not retried: one request, and WB's own state unchanged.
    assert emulator.counters.total("requests") == 1


@pytest.fixture
async def big_pages() -> AsyncIterator[Emulator]:
    """An emulator serving the whole finance report (300 rows, ~640 KB) as one page."""
    config = EmulatorConfig(
        time_scale=FAST.time_scale,
        anchor_date=ANCHOR,
        sizes=SellerSizes(report_rows=300, products=50),
        page_size={"finance.detailed_report": 100_000},
    )
    async with running_emulator(config) as emu:
        yield emu


def _finance(client: WbClient) -> AsyncIterator[methods.Page]:
    return finance_detailed_report(client, date_from=ANCHOR - timedelta(days=30), date_to=ANCHOR)


async def test_a_page_past_the_body_maximum_is_refused_unread(
    big_pages: Emulator, limiter_factory: LimiterFactory
) -> None:
    settings = Settings(
        wb_base_url=big_pages.base_url,
        time_scale=big_pages.config.time_scale,
        wb_max_body_bytes=64 * 1024,
        wb_finance_page_rows=100_000,
    )
    limiter = limiter_factory(time_scale=settings.time_scale)
    async with WbClient(
        "c", big_pages.token(SELLER_A), limiter, options=client_options(settings)
    ) as client:
        with pytest.raises(WbBodyTooLargeError, match="WBSYNC_WB_MAX_BODY_BYTES") as caught:
            await anext(_finance(client))
    assert caught.value.method == "finance.detailed_report" and caught.value.status == 200
    assert caught.value.max_bytes == 64 * 1024
    assert caught.value.read_bytes <= 64 * 1024  # WB declared its length: nothing read
    assert big_pages.counters.total("requests") == 1  # the same page again would be as large


async def test_finance_pages_follow_the_page_size_setting(
    big_pages: Emulator, limiter_factory: LimiterFactory
) -> None:
    settings = Settings(
        wb_base_url=big_pages.base_url,
        time_scale=big_pages.config.time_scale,
        wb_max_body_bytes=64 * 1024,
        wb_finance_page_rows=20,
    )
    limiter = limiter_factory(time_scale=settings.time_scale)
    async with WbClient(
        "c", big_pages.token(SELLER_A), limiter, options=client_options(settings)
    ) as client:
        page = await anext(_finance(client))
    assert len(page.rows) == 20
    assert Settings().wb_finance_page_rows == 10_000  # WB's 100,000 would be ~200 MB of JSON


async def test_a_body_without_a_length_is_read_no_further_than_the_maximum(
    limiter_factory: LimiterFactory,
) -> None:
    # A server streaming an endless chunked body (no Content-Length), 16 KB a chunk.
    served = 0

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal served
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"[" + b" " * (16 * 1024 - 1)
        try:
            while served < 50 * 1024 * 1024:
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
                served += len(chunk)
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(endless, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = Settings(wb_base_url=f"http://127.0.0.1:{port}", wb_max_body_bytes=100_000)
    limiter = limiter_factory()
    try:
        token = mint_token(key="k" * 32, seller_id=SELLER_A, categories=list(Category))
        async with WbClient("c", token, limiter, options=client_options(settings)) as client:
            with pytest.raises(WbBodyTooLargeError) as caught:
                await client.call(TARIFFS_ACCEPTANCE_COEFFICIENTS)
    finally:
        server.close()
        await server.wait_closed()
    # Reading stopped at the first chunk past the maximum.
    assert 100_000 < caught.value.read_bytes <= 100_000 + 64 * 1024
    assert "100000 bytes" in str(caught.value) and "tariffs.acceptance_coefficients" in str(
        caught.value
    )
