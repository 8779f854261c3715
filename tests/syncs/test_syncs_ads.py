"""Which campaigns the ads sync asks full stats for, and over which windows."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import pytest

from tests.support.limiter import LimiterFactory
from tests.support.wb import ANCHOR, SELLER_A
from wbsync.config import Settings
from wbsync.emulator.server import Emulator
from wbsync.errors import MalformedJobError
from wbsync.shared.runtime import client_options
from wbsync.store import Store
from wbsync.syncs import SYNCS, SyncInput, SyncOptions
from wbsync.syncs.ads import campaign_window, plan
from wbsync.wb.client import WbClient

WINDOW = (date(2026, 12, 1), date(2026, 12, 7))
FOREVER = "2100-01-01T00:00:00+03:00"


def campaign(
    advert_id: int, status: int, started: str | None, deleted: str = FOREVER
) -> dict[str, Any]:
    stamps = {"created": "2026-10-01T00:00:00+03:00", "updated": "2026-10-02T00:00:00+03:00"}
    return {
        "id": advert_id,
        "status": status,
        "timestamps": {**stamps, "started": started, "deleted": deleted},
    }


def test_only_the_statuses_wb_keeps_statistics_for_are_asked() -> None:
    started = "2026-10-01T10:00:00+03:00"
    for status in (-1, 4, 8):
        assert campaign_window(campaign(1, status, started), WINDOW) is None
    for status in (7, 9, 11):
        assert campaign_window(campaign(1, status, started), WINDOW) == WINDOW


def test_the_window_is_cut_to_the_campaigns_life_in_wbs_days() -> None:
    assert campaign_window(campaign(1, 9, None), WINDOW) is None  # never launched
    # Started at 22:30 UTC on the 3rd: the 4th at WB.
    late = campaign(1, 9, "2026-12-03T22:30:00+00:00")
    assert campaign_window(late, WINDOW) == (date(2026, 12, 4), date(2026, 12, 7))
    gone = campaign(1, 7, "2026-10-01T10:00:00+03:00", deleted="2026-12-05T09:00:00+03:00")
    assert campaign_window(gone, WINDOW) == (date(2026, 12, 1), date(2026, 12, 5))
    before = campaign(1, 7, "2026-10-01T10:00:00+03:00", deleted="2026-11-20T09:00:00+03:00")
    assert campaign_window(before, WINDOW) is None
    after = campaign(1, 9, "2026-12-09T10:00:00+03:00")
    assert campaign_window(after, WINDOW) is None


def test_campaigns_sharing_a_window_are_asked_together() -> None:
    old = "2026-10-01T10:00:00+03:00"
    campaigns = [
        campaign(30, 9, "2026-12-04T10:00:00+03:00"),
        campaign(10, 9, old),
        campaign(20, 4, old),  # no statistics at WB
        campaign(40, 11, old),
        campaign(50, 7, "2026-12-04T11:00:00+03:00"),
    ]
    cursor = plan(campaigns, WINDOW)
    assert cursor == {
        "ids": [10, 40, 30, 50],
        "done": 0,
        "runs": [
            {"begin": "2026-12-01", "end": "2026-12-07", "count": 2},
            {"begin": "2026-12-04", "end": "2026-12-07", "count": 2},
        ],
    }
    SYNCS["rnp-ads-sync"].check_cursor(cursor)
    # A cursor written before windows were kept is still one of its shape.
    SYNCS["rnp-ads-sync"].check_cursor({"ids": [10, 40], "done": 1})
    bad = {**cursor, "runs": [{"begin": "yesterday", "end": "2026-12-07", "count": 4}]}
    with pytest.raises(MalformedJobError, match=r"cursor field runs\.0\.begin"):
        SYNCS["rnp-ads-sync"].check_cursor(bad)


async def test_a_resumed_run_asks_only_the_campaigns_left_over_their_own_window(
    emulator: Emulator, store: Store, limiter_factory: LimiterFactory
) -> None:
    asked = [c for c in emulator.expected(SELLER_A, "promotion.adverts") if c["status"] == 9]
    first, last = (c["id"] for c in asked[:2])
    cursor = {
        "ids": [first, last],
        "done": 1,
        "runs": [
            {
                "begin": (ANCHOR - timedelta(days=6)).isoformat(),
                "end": ANCHOR.isoformat(),
                "count": 1,
            },
            {
                "begin": (ANCHOR - timedelta(days=1)).isoformat(),
                "end": ANCHOR.isoformat(),
                "count": 1,
            },
        ],
    }
    cabinet = await store.cabinets.add("shop", emulator.token(SELLER_A), SELLER_A)
    scale = emulator.config.time_scale
    settings = Settings(wb_base_url=emulator.base_url, time_scale=scale)
    async with WbClient(
        "shop",
        emulator.token(SELLER_A),
        limiter_factory(time_scale=scale),
        options=client_options(settings),
    ) as client:
        inp = SyncInput(client, store, cabinet.id, cursor, ANCHOR, SyncOptions())
        pages = [page async for page in SYNCS["rnp-ads-sync"].pages(inp)]
    assert [p.cursor["done"] for p in pages] == [2]
    stored = {(r["advertId"], r["date"][:10]) for r in pages[0].rows}
    assert stored == {(last, (ANCHOR - timedelta(days=d)).isoformat()) for d in (0, 1)}
