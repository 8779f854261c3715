"""On-demand WB reads through the API: short waits slept, long ones 429, WB's errors mapped."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable

import httpx
import pytest

from tests.support.api import AUTH, SELLERS
from wbsync.emulator import Emulator, FaultRule
from wbsync.observability.context import run_with_rate_limit_deferral
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.wb.methods import TARIFFS_ACCEPTANCE_COEFFICIENTS as COEFFICIENTS
from wbsync.wb.tokens import Category, TokenType, mint_token

AddCabinet = Callable[..., Awaitable[Cabinet]]
METHOD = COEFFICIENTS.name


def _path(cabinet: Cabinet, what: str = "acceptance-coefficients") -> str:
    return f"/api/v1/cabinets/{cabinet.id}/wb/{what}"


async def test_a_short_wait_is_slept_and_served(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator, add_cabinet: AddCabinet
) -> None:
    cabinet = await add_cabinet()
    scope = api_runtime.client(cabinet).scope(COEFFICIENTS)
    assert api_runtime.limiter.ceiling_ms(scope) == pytest.approx(625.0)
    started = time.monotonic()
    await api_runtime.limiter.penalize(scope, 300)  # under the ceiling: sleep, then call
    reply = await api.get(_path(cabinet), headers=AUTH)
    assert reply.status_code == 200, reply.text
    assert reply.json()["rows"] == api_emulator.expected(SELLERS[0], METHOD)
    assert time.monotonic() - started >= 0.3 - 0.002  # served once the window opened
    assert api_emulator.counters.total(seller=SELLERS[0]) == 1  # and sent once, no 429


async def test_a_wait_past_the_ceiling_is_429_with_retry_after_and_sends_nothing(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator, add_cabinet: AddCabinet
) -> None:
    cabinet = await add_cabinet()
    scope = api_runtime.client(cabinet).scope(COEFFICIENTS)
    await api_runtime.limiter.penalize(scope, 3000)  # past the 625 ms ceiling
    before = (await api_runtime.limiter.peek(scope)).wait_ms
    reply = await api.get(_path(cabinet), headers=AUTH)
    after = (await api_runtime.limiter.peek(scope)).wait_ms
    assert reply.status_code == 429
    assert reply.headers["content-type"] == "application/problem+json"
    # Whole seconds, rounded up, of the wait at the moment of the answer.
    retry_after = int(reply.headers["retry-after"])
    assert math.ceil(after / 1000) <= retry_after <= math.ceil(before / 1000)
    problem = reply.json()
    assert problem["scope"] == COEFFICIENTS.group
    assert after / 1000 <= problem["retry_after_s"] <= before / 1000
    assert api_emulator.counters.total(seller=SELLERS[0]) == 0


async def test_goods_page_and_adverts_come_from_wb(
    api: httpx.AsyncClient, api_emulator: Emulator, add_cabinet: AddCabinet
) -> None:
    cabinet = await add_cabinet()
    goods = api_emulator.expected(SELLERS[0], "prices.goods_list")
    page = await api.get(_path(cabinet, "goods"), params={"limit": 5, "offset": 5}, headers=AUTH)
    assert page.status_code == 200
    assert page.json() == {"rows": goods[5:10], "next_offset": 10}
    last = await api.get(_path(cabinet, "goods"), params={"offset": 5}, headers=AUTH)
    assert last.json() == {"rows": goods[5:], "next_offset": None}
    adverts = await api.get(_path(cabinet, "adverts"), headers=AUTH)
    assert adverts.status_code == 200
    assert adverts.json()["rows"] == api_emulator.expected(SELLERS[0], "promotion.adverts")


async def test_wb_errors_map_to_gateway_statuses(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator, add_cabinet: AddCabinet
) -> None:
    cabinet = await add_cabinet()
    cases: list[tuple[FaultRule, int, str]] = [
        (FaultRule(kind="error", method=METHOD, status=503), 502, "wb-failed"),
        (FaultRule(kind="drop", method=METHOD), 504, "wb-no-answer"),
        (FaultRule(kind="rate_limit", method=METHOD, retry_s=1.0), 429, "wb-rate-limited"),
    ]
    for rule, status, code in cases:
        api_emulator.set_faults([rule])
        reply = await api.get(_path(cabinet), headers=AUTH)
        assert reply.status_code == status, (rule.kind, reply.text)
        assert reply.json()["type"].endswith(code) and reply.json()["wb_method"] == METHOD
        if status == 429:
            assert int(reply.headers["retry-after"]) >= 1
    api_emulator.set_faults([])
    foreign = mint_token(
        key="a-signing-key-this-emulator-never-saw-0123",
        seller_id=SELLERS[1],
        token_type=TokenType.PERSONAL,
        categories=[Category.FINANCE, Category.STATISTICS],
    )
    stranger = await api_runtime.store.cabinets.add("stranger", foreign, SELLERS[1])
    refused = await api.get(_path(stranger), headers=AUTH)
    assert refused.status_code == 502
    assert refused.json()["wb_status"] == 401 and "token" in refused.json()["detail"]
    assert foreign not in refused.text


async def test_a_deferral_reaching_a_request_is_a_logged_bug_and_500(
    api: httpx.AsyncClient,
    api_runtime: Runtime,
    add_cabinet: AddCabinet,
    caplog: pytest.LogCaptureFixture,
) -> None:
    cabinet = await add_cabinet()
    # A window that stays closed whatever the load: the leaked context must make it a deferral.
    await api_runtime.limiter.penalize(api_runtime.client(cabinet).scope(COEFFICIENTS), 60_000)
    # The ASGI transport runs the app in this task, so a leaked deferral context reaches it.
    with caplog.at_level(logging.ERROR):
        reply = await run_with_rate_limit_deferral(
            10, lambda: api.get(_path(cabinet), headers=AUTH)
        )
    assert reply.status_code == 500 and reply.json()["status"] == 500
    assert any("bug: RateLimitDeferred" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("what", "params", "field", "allowed"),
    [
        ("adverts", {"status": "5"}, "query.status.0", "-1, 4, 7, 8, 9 or 11"),
        ("adverts", {"status": "abc"}, "query.status.0", "-1, 4, 7, 8, 9 or 11"),
        ("adverts", {"payment_type": "cpx"}, "query.payment_type", "^(cpm|cpc)$"),
        ("goods", {"limit": "1001"}, "query.limit", "1000"),
        ("goods", {"offset": "-1"}, "query.offset", "0"),
        ("acceptance-coefficients", {"warehouse_id": "0"}, "query.warehouse_id.0", "1"),
    ],
)
async def test_input_outside_wbs_documented_values_is_422_and_sends_nothing(
    api: httpx.AsyncClient,
    api_emulator: Emulator,
    add_cabinet: AddCabinet,
    what: str,
    params: dict[str, str],
    field: str,
    allowed: str,
) -> None:
    cabinet = await add_cabinet()
    reply = await api.get(_path(cabinet, what), params=params, headers=AUTH)
    assert reply.status_code == 422, reply.text
    assert reply.headers["content-type"] == "application/problem+json"
    [error] = reply.json()["errors"]
    assert error["field"] == field and allowed in error["message"], error
    assert api_emulator.counters.total() == 0


async def test_every_status_wb_documents_is_passed_on_deleted_campaigns_included(
    api: httpx.AsyncClient, api_emulator: Emulator, add_cabinet: AddCabinet
) -> None:
    # WB's statuses filter takes -1 (deleted) beside 4, 7, 8, 9 and 11.
    cabinet = await add_cabinet()
    params = httpx.QueryParams([("status", "-1"), ("status", "9")])
    reply = await api.get(_path(cabinet, "adverts"), params=params, headers=AUTH)
    assert reply.status_code == 200, reply.text
    every = api_emulator.expected(SELLERS[0], "promotion.adverts")
    assert reply.json()["rows"] == [c for c in every if c["status"] in (-1, 9)]
    assert api_emulator.counters.total("requests") == 1
