"""The dlt source and fleet-wide datasets (one copy for every cabinet: WB's tariffs): loaded
from the fleet's feed into tables without a cabinet, round after round, next to a cabinet's.

Rows are written through the store; each round runs a dlt pipeline into DuckDB (in a thread:
dlt is synchronous, the API serves in this event loop) and compares the tables with wbsync's
live rows key by key.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.api import API_KEY
from wbsync.errors import LoaderError
from wbsync.extend import TOMBSTONE_GRACE_DAYS
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet, Store
from wbsync.system import clock

dlt = pytest.importorskip("dlt")
duckdb = pytest.importorskip("duckdb")

from wbsync.loaders.dlt import wbsync_source  # noqa: E402  (needs the dlt extra)

BOX, FEES = "tariffs_box", "tariffs_commission"
KEYS = {BOX: ["warehouse_name", "date"], FEES: ["subject_id"]}
Rows = dict[tuple[Any, ...], dict[str, Any]]


def _fees(*subjects: int, fee: float = 12.5) -> list[dict[str, Any]]:
    return [{"subjectID": s, "subjectName": f"s{s}", "kgvpMarketplace": fee} for s in subjects]


def _box(day: str, *names: str) -> list[dict[str, Any]]:
    return [{"warehouseName": n, "date": day, "boxDeliveryBase": "48"} for n in names]


async def _live(store: Store, name: str) -> Rows:
    """wbsync's live rows of a fleet-wide dataset: key -> data."""
    rows: Rows = {}
    async for page in store.iter_changes(name):
        for c in page.changes:
            assert c.cabinet_id is None
            if not c.deleted:
                rows[tuple(c.key.values())] = c.data
    return rows


class Warehouse:
    """A DuckDB file loaded by one dlt pipeline from wbsync's API."""

    def __init__(self, tmp: Path, url: str) -> None:
        self.path = tmp / "warehouse.duckdb"
        self.url = url
        self.pipeline = dlt.pipeline(
            pipeline_name="wbsync_fleet_test",
            pipelines_dir=str(tmp / "dlt"),
            destination=dlt.destinations.duckdb(str(self.path)),
            dataset_name="wb",
        )

    async def load(self, **narrowed: Any) -> dict[str, int]:
        """One run (every dataset, or ``narrowed``); the rows it loaded per table."""
        await asyncio.to_thread(
            lambda: self.pipeline.run(wbsync_source(self.url, API_KEY, **narrowed))
        )
        counts = self.pipeline.last_trace.last_normalize_info.row_counts
        return {name: counts.get(name, 0) for name in (*KEYS, "stocks")}

    def rows(self, name: str) -> Rows:
        with duckdb.connect(str(self.path), read_only=True) as db:
            columns = ", ".join(f'"{c}"' for c in [*KEYS[name], "data"])  # "date" quoted
            found = db.execute(f"SELECT {columns} FROM wb.{name}").fetchall()
        return {tuple(r[:-1]): json.loads(r[-1]) for r in found}

    async def assert_equal(self, store: Store) -> int:
        """The fleet-wide tables hold wbsync's live rows, no more, no less; how many."""
        compared = 0
        for name in KEYS:
            live, loaded = await _live(store, name), self.rows(name)
            assert loaded.keys() == live.keys(), f"{name}: stale {loaded.keys() - live.keys()}"
            assert loaded == live
            compared += len(live)
        return compared

    def state(self, name: str) -> dict[str, Any]:
        resources: dict[str, Any] = self.pipeline.state["sources"]["wbsync"]["resources"]
        return dict(resources[name])


async def test_fleet_datasets_load_from_the_fleets_feed_without_a_cabinet(
    feed_runtime: Runtime,
    feed_url: str,
    feed_paths: list[str],
    new_cabinet: Callable[[int], Awaitable[Cabinet]],
    tmp_path: Path,
) -> None:
    store = feed_runtime.store
    cabinet = await new_cabinet(0)
    await store.upsert("stocks", cabinet.id, [{"nmId": 1, "chrtId": 1, "warehouseId": 7}])
    await store.write(FEES, None, _fees(1, 2, 3), whole=True)
    await store.write(BOX, None, _box("2026-12-05", "Коледино", "Казань"))
    warehouse = Warehouse(tmp_path, feed_url)

    assert await warehouse.load() == {BOX: 2, FEES: 3, "stocks": 1}
    schema = warehouse.pipeline.default_schema
    for name, key in KEYS.items():
        columns = schema.get_table_columns(name)
        assert "cabinet_id" not in columns
        assert {c for c, hints in columns.items() if hints.get("primary_key")} == set(key)
    assert schema.get_table_columns(BOX)["date"]["data_type"] == "text"  # WB's date, as given
    assert await warehouse.assert_equal(store) == 5
    # The fleet's feed, never a cabinet's route (a 404 for a fleet-wide dataset).
    fleet_paths = {p for p in feed_paths if "tariffs_" in p}
    assert {f"/api/v1/datasets/{n}/changes" for n in KEYS} <= fleet_paths
    assert not [p for p in fleet_paths if p.startswith("/api/v1/cabinets/")]

    # Round 2: the fees replaced (1 and 3 changed, 2 gone: a tombstone), a warehouse added.
    await store.write(FEES, None, _fees(1, 3, fee=13.0), whole=True)
    await store.write(BOX, None, _box("2026-12-06", "Тула"))
    feed_paths.clear()
    assert await warehouse.load() == {BOX: 1, FEES: 3, "stocks": 0}
    assert sorted(p for p in feed_paths if "/datasets/" in p) == [
        f"/api/v1/datasets/{n}/changes" for n in (BOX, FEES)
    ]
    assert await warehouse.assert_equal(store) == 3 + 2
    assert (2,) not in warehouse.rows(FEES)

    # Nothing written since: no feed read; the fleet's one cursor is kept by its slot.
    feed_paths.clear()
    assert await warehouse.load() == {BOX: 0, FEES: 0, "stocks": 0}
    assert feed_paths == ["/api/v1/datasets", "/api/v1/cabinets"]
    fees = warehouse.state(FEES)
    assert fees["cursors"] == {"fleet": f"{FEES}:{fees['high']}"}

    # Changes not read whose tombstones are then pruned: the cursor is below the low-water
    # mark (410), and the fleet's snapshot replaces the table's rows.
    await store.write(FEES, None, _fees(1, fee=14.0), whole=True)  # 1 updated, 3 tombstoned
    later = clock.calendar_now() + timedelta(days=TOMBSTONE_GRACE_DAYS + 1)
    await store.prune(later, datasets=(FEES,))
    feed_paths.clear()
    # The snapshot's one live row, and the delete of the loaded row it lacks.
    assert await warehouse.load() == {BOX: 0, FEES: 1 + 1, "stocks": 0}
    assert f"/api/v1/datasets/{FEES}/snapshot" in feed_paths
    assert await warehouse.assert_equal(store) == 3 + 1
    assert set(warehouse.rows(FEES)) == {(1,)}
    assert await warehouse.load() == {BOX: 0, FEES: 0, "stocks": 0}  # read on from the snapshot


async def test_a_fleet_dataset_is_loaded_by_name_whatever_the_cabinets(
    feed_runtime: Runtime,
    feed_url: str,
    feed_paths: list[str],
    new_cabinet: Callable[[int], Awaitable[Cabinet]],
    tmp_path: Path,
) -> None:
    cabinet = await new_cabinet(0)
    await feed_runtime.store.write(BOX, None, _box("2026-12-05", "Коледино"))
    warehouse = Warehouse(tmp_path, feed_url)

    loaded = await warehouse.load(datasets=[BOX], cabinets=[cabinet.id])
    assert loaded == {BOX: 1, FEES: 0, "stocks": 0}
    # A fleet-wide dataset alone lists no cabinet: its feed is nobody's.
    assert feed_paths == ["/api/v1/datasets", f"/api/v1/datasets/{BOX}/changes"]
    assert warehouse.rows(BOX) == {("Коледино", "2026-12-05"): _box("2026-12-05", "Коледино")[0]}
    with pytest.raises(LoaderError, match=r"no dataset \['tariffs'\]"):
        await asyncio.to_thread(lambda: wbsync_source(feed_url, API_KEY, datasets=["tariffs"]))
