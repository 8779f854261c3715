"""The dlt source and fleet-wide datasets: left out of "every dataset", refused by name with a
reason that names their feed (the source loads cabinets' feeds)."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.api import API_KEY

dlt = pytest.importorskip("dlt")

from wbsync.loaders.dlt import wbsync_source  # noqa: E402  (needs the dlt extra)


async def test_fleet_wide_datasets_are_left_out_and_refused_by_name(feed_url: str) -> None:
    resources = await asyncio.to_thread(lambda: set(wbsync_source(feed_url, API_KEY).resources))
    assert {"orders", "stocks"} <= resources
    assert not {"tariffs_box", "tariffs_commission"} & resources
    with pytest.raises(Exception, match=r"fleet-wide .* /api/v1/datasets/<name>/changes"):
        await asyncio.to_thread(lambda: wbsync_source(feed_url, API_KEY, datasets=["tariffs_box"]))
