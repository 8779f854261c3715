"""A method's declared "no data" refusal is an empty answer; any other refusal stays an error."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import httpx
import pytest

from tests.support.wb import ANCHOR, SELLER_A
from wbsync.emulator.config import FaultRule
from wbsync.emulator.server import Emulator
from wbsync.errors import WbRequestError
from wbsync.syncs.ads import PROMOTION_FULLSTATS, fullstats
from wbsync.wb.client import WbClient

WEEK = timedelta(days=6)


def _campaigns(emulator: Emulator, *statuses: int) -> list[int]:
    return [
        c["id"] for c in emulator.expected(SELLER_A, "promotion.adverts") if c["status"] in statuses
    ]


async def test_the_emulator_answers_wbs_no_companies_body(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    never = _campaigns(emulator, 4, 8)  # ready or declined: WB keeps no statistics of them
    assert never
    reply = await emu_http.get(
        PROMOTION_FULLSTATS.path,
        params={
            "ids": ",".join(map(str, never)),
            "beginDate": (ANCHOR - WEEK).isoformat(),
            "endDate": ANCHOR.isoformat(),
        },
        headers={"Authorization": emulator.token(SELLER_A)},
    )
    assert reply.status_code == 400
    assert reply.json() == {"error": "there are no companies with correct intervals"}


async def test_no_companies_with_stats_is_an_empty_page_not_an_error(
    emulator: Emulator, client_factory: Callable[..., WbClient]
) -> None:
    never = _campaigns(emulator, 4, 8)
    async with client_factory() as client:
        pages = [p async for p in fullstats(client, ids=never, begin=ANCHOR - WEEK, end=ANCHOR)]
    assert [p.rows for p in pages] == [[]] and pages[0].cursor == len(never)
    status = emulator.counters.snapshot()["sellers"][SELLER_A]["promotion.fullstats"]["status"]
    assert status == {"400": 1}


async def test_a_window_wb_refuses_is_still_an_error(
    emulator: Emulator, client_factory: Callable[..., WbClient]
) -> None:
    active = _campaigns(emulator, 9)
    async with client_factory() as client:
        with pytest.raises(WbRequestError, match="31 days") as refused:
            async for _ in fullstats(
                client, ids=active, begin=ANCHOR - timedelta(days=40), end=ANCHOR
            ):
                pass
    assert refused.value.status == 400
    assert not PROMOTION_FULLSTATS.says_no_data(refused.value)


async def test_the_no_data_rule_is_known_by_wbs_words_only(
    emulator: Emulator, client_factory: Callable[..., WbClient]
) -> None:
    ep = PROMOTION_FULLSTATS
    params = {"ids": "1", "beginDate": ANCHOR.isoformat(), "endDate": ANCHOR.isoformat()}
    said = "There are no companies with correct intervals"  # WB's words, in any case
    emulator.set_faults([FaultRule(kind="refuse", status=400, shape="error", words=said)])
    async with client_factory() as client:
        reply = await client.call(ep, params=params)
        assert reply.no_data and reply.status == 400 and reply.data is None
        emulator.set_faults([FaultRule(kind="refuse", status=400, shape="error", words="bad ids")])
        with pytest.raises(WbRequestError, match="bad ids"):
            await client.call(ep, params=params)
