"""The water marks of the change feeds: the last number given out and the lowest still there."""

from __future__ import annotations

from datetime import timedelta

from wbsync.store import DATASETS, Store
from wbsync.store.marks import WaterMarks
from wbsync.store.schema import utcnow


def _stock(nm: int) -> dict[str, int]:
    return {"nmId": nm, "chrtId": 1, "warehouseId": 1}


async def test_the_marks_follow_writes_tombstones_and_pruning(store: Store) -> None:
    stocks, orders = DATASETS["stocks"], DATASETS["orders"]
    assert await store.water_marks([stocks, orders]) == {
        "stocks": WaterMarks(high=0, low=None),
        "orders": WaterMarks(high=0, low=None),
    }
    cabinet = (await store.cabinets.add("shop", "token", "sid")).id
    await store.write("stocks", cabinet, [_stock(nm) for nm in range(3)])  # 1..3
    # 2 unchanged (3); 0 and 1 tombstoned, numbered after the page's one offered number: 5, 6.
    await store.write("stocks", cabinet, [_stock(2)], whole=True)
    marks = await store.water_marks([stocks, orders])
    assert marks == {"stocks": WaterMarks(high=6, low=3), "orders": WaterMarks(high=0, low=None)}

    # The tombstones' grace passes: they leave the feed, and its lowest number stays; the
    # feed is complete from the last of them only.
    await store.prune(utcnow() + timedelta(days=stocks.tombstone_grace_days + 1))
    assert (await store.water_marks([stocks]))["stocks"] == WaterMarks(
        high=6, low=3, complete_from=6
    )
    await store.write("stocks", cabinet, [], whole=True)  # 2 tombstoned: 7
    await store.prune(utcnow() + timedelta(days=stocks.tombstone_grace_days + 1))
    assert (await store.water_marks([stocks]))["stocks"] == WaterMarks(
        high=7, low=None, complete_from=7
    )
