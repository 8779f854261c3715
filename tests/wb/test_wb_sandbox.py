"""Test tokens work only on WB's -sandbox hosts: the client sends them there, or refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.wb import SELLER_A
from wbsync.config import Settings
from wbsync.emulator.server import Emulator
from wbsync.errors import TokenError
from wbsync.shared.runtime import client_options, wb_hosts
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT, finance_detailed_report
from wbsync.syncs.sections import STATISTICS_ORDERS, orders
from wbsync.wb.client import WbClient
from wbsync.wb.tokens import TokenType

ORDERS = "/api/v1/supplier/orders"


def test_test_tokens_go_to_wbs_sandbox_hosts() -> None:
    assert STATISTICS_ORDERS.url(sandbox=True) == (
        "https://statistics-api-sandbox.wildberries.ru/api/v1/supplier/orders"
    )
    local = Settings(wb_sandbox_base_url="http://127.0.0.1:9/")
    assert (
        STATISTICS_ORDERS.url(wb_hosts(local), sandbox=True)
        == "http://127.0.0.1:9/api/v1/supplier/orders"
    )
    with pytest.raises(ValueError, match="no sandbox host for the finance section"):
        FINANCE_DETAILED_REPORT.url(sandbox=True)


async def test_the_emulator_keeps_test_tokens_and_sandbox_hosts_together(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    test = {"Authorization": emulator.token(SELLER_A, token_type=TokenType.TEST)}
    personal = {"Authorization": emulator.token(SELLER_A)}
    params = {"dateFrom": "2026-08-01"}
    on_prod = await emu_http.get(ORDERS, params=params, headers=test)
    assert on_prod.status_code == 401 and "sandbox" in on_prod.json()["detail"]
    async with httpx.AsyncClient(base_url=emulator.sandbox_url) as sandbox:
        assert (await sandbox.get(ORDERS, params=params, headers=test)).status_code == 200
        refused = await sandbox.get(ORDERS, params=params, headers=personal)
        assert refused.status_code == 401 and "sandbox" in refused.json()["detail"]
        # WB has no sandbox twin of the finance host.
        finance = await sandbox.post(
            FINANCE_DETAILED_REPORT.path, json={"dateFrom": "2026-08-01"}, headers=test
        )
        assert finance.status_code == 404


async def test_a_test_token_is_sent_to_the_sandbox_or_refused_before_sending(
    emulator: Emulator, limiter_factory: Callable[..., Any]
) -> None:
    scale = emulator.config.time_scale
    settings = Settings(
        wb_base_url=emulator.base_url, wb_sandbox_base_url=emulator.sandbox_url, time_scale=scale
    )
    token = emulator.token(SELLER_A, token_type=TokenType.TEST)
    async with WbClient(
        "t", token, limiter_factory(time_scale=scale), options=client_options(settings)
    ) as client:
        rows = [r async for page in orders(client, date_from="2026-07-01") for r in page.rows]
        assert rows == emulator.expected(SELLER_A, "statistics.orders", date_from="2026-07-01")
        sent = emulator.counters.total(seller=SELLER_A)
        with pytest.raises(TokenError, match="Test token works only on WB's sandbox hosts"):
            async for _ in finance_detailed_report(
                client, date_from=emulator.config.anchor_date, date_to=emulator.config.anchor_date
            ):
                pass
    # Every request was answered by the sandbox (production answers a Test token 401).
    statuses = {e["status"] for e in emulator.counters.journal}
    assert 401 not in statuses
    assert emulator.counters.total(seller=SELLER_A) == sent  # finance: nothing sent
