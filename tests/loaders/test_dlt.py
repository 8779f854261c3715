"""The dlt source end to end: wbsync's API over HTTP loaded into DuckDB, round after round.

Rows are written through the store; each round runs a dlt pipeline (in a thread: dlt is
synchronous, the API serves in this event loop) and compares DuckDB's tables with wbsync's live
rows key by key.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import API_KEY, AUTH
from wbsync.extend import TOMBSTONE_GRACE_DAYS
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet, Store
from wbsync.system import clock

dlt = pytest.importorskip("dlt")
requests = pytest.importorskip("requests")
duckdb = pytest.importorskip("duckdb")

from wbsync.loaders.dlt import wbsync_source  # noqa: E402  (needs the dlt extra)

DATASETS = ("stocks", "orders")
KEYS = {"stocks": ["nm_id", "chrt_id", "warehouse_id"], "orders": ["srid"]}
Rows = dict[tuple[Any, ...], dict[str, Any]]


def _stock(nm: int, quantity: int) -> dict[str, int]:
    return {"nmId": nm, "chrtId": 1, "warehouseId": 7, "quantity": quantity}


async def _live(store: Store, name: str) -> Rows:
    """wbsync's live rows of a dataset: (cabinet, *key) -> data."""
    rows: Rows = {}
    async for page in store.iter_changes(name):
        for c in page.changes:
            if not c.deleted:
                rows[(c.cabinet_id, *c.key.values())] = c.data
    return rows


def _loaded(path: Path, name: str, key: list[str]) -> Rows:
    """DuckDB's rows of a dataset's table: (cabinet, *key) -> data."""
    with duckdb.connect(str(path), read_only=True) as db:
        columns = ", ".join(["cabinet_id", *key, "data"])
        rows = db.execute(f"SELECT {columns} FROM wb.{name}").fetchall()
    return {tuple(r[:-1]): json.loads(r[-1]) for r in rows}


class Warehouse:
    """A DuckDB file loaded by one dlt pipeline from wbsync's API."""

    def __init__(self, tmp: Path, url: str) -> None:
        self.path = tmp / "warehouse.duckdb"
        self.url = url
        self.resources: set[str] = set()
        self.pipeline = dlt.pipeline(
            pipeline_name="wbsync_test",
            pipelines_dir=str(tmp / "dlt"),
            destination=dlt.destinations.duckdb(str(self.path)),
            dataset_name="wb",
        )

    async def load(self) -> dict[str, int]:
        """One run; the changes it fetched per dataset."""

        def run() -> None:
            source = wbsync_source(self.url, API_KEY)  # every dataset discovered
            self.resources = set(source.resources)
            self.pipeline.run(source)

        await asyncio.to_thread(run)
        counts = self.pipeline.last_trace.last_normalize_info.row_counts
        return {name: counts.get(name, 0) for name in DATASETS}

    async def assert_equal(self, store: Store) -> int:
        """DuckDB's tables hold wbsync's live rows, no more, no less; how many rows compared."""
        compared = 0
        for name in DATASETS:
            live, loaded = await _live(store, name), _loaded(self.path, name, KEYS[name])
            assert loaded.keys() == live.keys(), f"{name}: stale {loaded.keys() - live.keys()}"
            assert loaded == live
            compared += len(live)
        return compared


async def test_rounds_load_only_the_changes_and_match_the_live_rows(
    feed_runtime: Runtime,
    feed_url: str,
    feed_paths: list[str],
    new_cabinet: Callable[[int], Awaitable[Cabinet]],
    tmp_path: Path,
) -> None:
    store = feed_runtime.store
    first, second = await new_cabinet(0), await new_cabinet(1)
    await store.upsert("stocks", first.id, [_stock(nm, 1) for nm in range(5)])
    await store.upsert("stocks", second.id, [_stock(nm, 2) for nm in range(3)])
    await store.upsert("orders", first.id, [{"srid": f"o{i}", "totalPrice": i} for i in range(4)])
    warehouse = Warehouse(tmp_path, feed_url)

    assert await warehouse.load() == {"stocks": 8, "orders": 4}
    assert {"stocks", "orders", "finance_report", "bids"} <= warehouse.resources
    assert warehouse.pipeline.default_schema.get_table("stocks")["write_disposition"] == "merge"
    assert await warehouse.assert_equal(store) == 12

    # Round 2: in the first cabinet 1 row updated and 2..4 tombstoned (0 unchanged, not sent);
    # in the second 2 new rows; one order updated.
    loaded_to = {name: await _high(feed_url, name) for name in DATASETS}
    await store.snapshots.begin("stocks", first.id)
    await store.write("stocks", first.id, [_stock(0, 1), _stock(1, 9)], seen=True)
    await store.snapshots.complete("stocks", first.id)
    await store.upsert("stocks", second.id, [_stock(nm, 2) for nm in range(3, 5)])
    await store.upsert("orders", first.id, [{"srid": "o0", "totalPrice": 100}])
    feed_paths.clear()
    assert await warehouse.load() == {"stocks": 6, "orders": 1}
    assert {"stocks": 6, "orders": 1} == await _changed(store, loaded_to)
    # One page per cabinet of the two datasets that changed; the other datasets are not read.
    feeds = sorted(p for p in feed_paths if "/datasets/" in p)
    assert feeds == sorted(
        f"/api/v1/cabinets/{c.id}/datasets/{name}" for c in (first, second) for name in DATASETS
    )
    assert await warehouse.assert_equal(store) == 2 + 5 + 4

    feed_paths.clear()
    assert await warehouse.load() == {"stocks": 0, "orders": 0}
    # Nothing was written since: the feeds' high-water marks are the ones the last run read,
    # so the run asked for the datasets and the cabinets, and read no feed.
    assert feed_paths == ["/api/v1/datasets", "/api/v1/cabinets"]
    stocks = warehouse.pipeline.state["sources"]["wbsync"]["resources"]["stocks"]
    assert stocks["high"] == await _high(feed_url, "stocks")
    assert set(stocks["cursors"]) == {str(first.id), str(second.id)}

    # A removed cabinet: its rows arrive as deletes and leave the warehouse.
    loaded_to = {name: await _high(feed_url, name) for name in DATASETS}
    await store.remove_cabinet(first.id)
    assert await warehouse.load() == {"stocks": 2, "orders": 4}
    assert {"stocks": 2, "orders": 4} == await _changed(store, loaded_to)
    assert await warehouse.assert_equal(store) == 5
    assert _loaded(warehouse.path, "orders", ["srid"]) == {}

    # Changes the loader has not read, whose tombstones are then pruned: its stocks cursors
    # fall below the low-water mark (410), and it resyncs each cabinet from its snapshot.
    await store.snapshots.begin("stocks", second.id)
    await store.write("stocks", second.id, [_stock(0, 5), *map(_stock, (1, 2), (2, 2))], seen=True)
    await store.snapshots.complete("stocks", second.id)  # 0 updated, 3 and 4 tombstoned
    later = clock.calendar_now() + timedelta(days=TOMBSTONE_GRACE_DAYS + 1)
    await store.prune(later, datasets=("stocks",))
    gone = await _raw_get(feed_url, f"/api/v1/cabinets/{second.id}/datasets/stocks?after=1")
    assert gone == 410
    # The snapshot's 3 live rows, and deletes of the 2 loaded rows it lacks.
    assert await warehouse.load() == {"stocks": 3 + 2, "orders": 0}
    assert await warehouse.assert_equal(store) == 3
    assert await warehouse.load() == {"stocks": 0, "orders": 0}  # read on from the snapshot

    # Once its tombstones are pruned, the removed cabinet is forgotten: its feed is a 404, and
    # the loader drops its cursor.
    await store.prune(later)
    assert await store.finish_removals() == 1
    await store.upsert("stocks", second.id, [_stock(7, 7)])
    assert await warehouse.load() == {"stocks": 1, "orders": 0}
    assert await warehouse.assert_equal(store) == 4
    stocks = warehouse.pipeline.state["sources"]["wbsync"]["resources"]["stocks"]
    assert set(stocks["cursors"]) == {str(second.id)}


async def _changed(store: Store, since: dict[str, int]) -> dict[str, int]:
    """How many rows of each dataset were written after ``since``'s sequence numbers."""
    counts = dict.fromkeys(since, 0)
    for name, after in since.items():
        async for page in store.iter_changes(name, after=after):
            counts[name] += len(page.changes)
    return counts


async def _high(base_url: str, name: str) -> int:
    def get() -> int:
        reply = requests.get(f"{base_url}/api/v1/datasets/{name}", headers=AUTH, timeout=10)
        return int(reply.json()["high_water_mark"])

    return await asyncio.to_thread(get)


async def _raw_get(base_url: str, path: str) -> int:
    def get() -> int:
        reply = requests.get(base_url + path, headers=AUTH, timeout=10)
        return int(reply.status_code)

    return await asyncio.to_thread(get)


async def test_the_url_and_key_may_come_from_dlts_config(
    feed_runtime: Runtime,
    feed_url: str,
    new_cabinet: Callable[[int], Awaitable[Cabinet]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cabinet = await new_cabinet(0)
    await feed_runtime.store.upsert("orders", cabinet.id, [{"srid": "a"}, {"srid": "b"}])
    monkeypatch.setenv("SOURCES__WBSYNC__BASE_URL", feed_url)
    monkeypatch.setenv("SOURCES__WBSYNC__API_KEY", API_KEY)
    pipeline = Warehouse(tmp_path, feed_url).pipeline

    await asyncio.to_thread(lambda: pipeline.run(wbsync_source(datasets=["orders"])))
    assert pipeline.last_trace.last_normalize_info.row_counts["orders"] == 2
