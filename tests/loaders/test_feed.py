"""The loader's HTTP side: the feed's contract read clause by clause, errors named by route."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable

import pytest
import requests

from tests.support.api import API_KEY
from tests.support.paths import ROOT
from wbsync.errors import LoaderError
from wbsync.loaders.feed import (
    DatasetInfo,
    FeedApi,
    FeedPage,
    change_row,
    dataset_info,
    is_delete,
    resync_path,
)
from wbsync.store import Cabinet


def test_a_change_is_a_delete_by_its_op_or_its_tombstone_flag() -> None:
    assert is_delete({"op": "delete", "deleted": False})
    assert not is_delete({"op": "update", "deleted": True})
    assert is_delete({"deleted": True}) and not is_delete({"deleted": False})
    change = {"seq": 7, "cabinet_id": 2, "key": {"nm_id": 5}, "deleted": True}
    row = change_row({**change, "changed_at": "2026-12-06T00:00:00Z", "data": {"a": 1}})
    assert row["nm_id"] == 5 and row["deleted"] and row["data"] == {"a": 1}
    with pytest.raises(LoaderError, match="named like a loader column"):
        change_row({**change, "key": {"seq": 1}, "changed_at": "", "data": {}})


def test_a_discovery_entry_gives_the_key_columns_and_the_high_water_mark() -> None:
    entry = {
        "name": "stocks",
        "key": [{"column": "nm_id", "path": "nmId", "kind": "int"}, {"column": "chrt_id"}],
        "high_water_mark": 42,
    }
    assert dataset_info(entry) == DatasetInfo("stocks", ("nm_id", "chrt_id"), 42)


async def test_a_refused_request_is_a_loader_error_naming_the_route(feed_url: str) -> None:
    def read(key: str) -> list[int]:
        with requests.Session() as session:
            return FeedApi(session, feed_url, key).cabinets()

    assert await asyncio.to_thread(read, API_KEY) == []
    with pytest.raises(LoaderError, match=r"GET /api/v1/cabinets: HTTP 401"):
        await asyncio.to_thread(read, "wrong-key")


def test_wbsync_without_the_extra_never_imports_dlt() -> None:
    probe = "import sys, wbsync.loaders.feed, wbsync.cli; assert 'dlt' not in sys.modules"
    subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True)


def test_the_dlt_module_exports_the_source_alone_documented() -> None:
    loader = pytest.importorskip("wbsync.loaders.dlt")
    assert loader.__all__ == ["wbsync_source"]
    assert loader.wbsync_source.__doc__


def test_a_fleet_wide_datasets_feed_is_the_fleets_and_its_rows_have_no_cabinet() -> None:
    entry = {"name": "tariffs_box", "key": [{"column": "date"}], "high_water_mark": 3}
    assert dataset_info({**entry, "scope": "fleet"}).fleet
    assert not dataset_info({**entry, "scope": "cabinet"}).fleet
    assert resync_path(None, "tariffs_box") == "/api/v1/datasets/tariffs_box/snapshot"
    assert resync_path(4, "stocks") == "/api/v1/cabinets/4/datasets/stocks/snapshot"
    change = {"seq": 7, "cabinet_id": None, "key": {"date": "2026-12-06"}, "deleted": False}
    row = change_row({**change, "changed_at": "2026-12-06T00:00:00Z", "data": {}})
    assert "cabinet_id" not in row and row["date"] == "2026-12-06"


async def test_a_fleet_wide_dataset_asked_of_a_cabinet_is_an_error_not_a_gone_cabinet(
    feed_url: str, new_cabinet: Callable[[int], Awaitable[Cabinet]]
) -> None:
    cabinet = await new_cabinet(0)

    def read(where: int | None, dataset: str) -> object:
        with requests.Session() as session:
            return FeedApi(session, feed_url, API_KEY).page(where, dataset, "0")

    page = await asyncio.to_thread(read, None, "tariffs_box")
    assert isinstance(page, FeedPage) and page.rows == [] and not page.more
    with pytest.raises(LoaderError, match="fleet-wide"):
        await asyncio.to_thread(read, cabinet.id, "tariffs_box")
    assert await asyncio.to_thread(read, cabinet.id + 100, "stocks") is None  # no such cabinet
    with pytest.raises(LoaderError, match="no dataset"):
        await asyncio.to_thread(read, None, "nothing")
