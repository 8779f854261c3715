"""Synced rows: upserts on natural keys are idempotent, per cabinet, and keep WB's row as is."""

from __future__ import annotations

import asyncio
from types import MappingProxyType
from typing import Any

import pytest

from wbsync.errors import StoreError
from wbsync.store import DATASETS, Store
from wbsync.store.rows import BATCH_ROWS
from wbsync.syncs.ads import advert_stats_rows
from wbsync.syncs.digitization import funnel_history_rows

# One WB-shaped row per dataset, with the key fields as WB spells them.
SAMPLE_ROWS: dict[str, dict[str, Any]] = {
    "finance_report": {"rrdId": 1001, "nmId": 5, "forPay": "12.50", "docTypeName": "Продажа"},
    "orders": {"srid": "abc.1.0", "nmId": 5, "lastChangeDate": "2026-08-01T10:00:00"},
    "sales": {"saleID": "S123", "srid": "abc.1.0", "forPay": 99.5},
    "adverts": {"id": 77, "bid_type": "manual", "settings": {"name": "camp"}},
    "advert_stats": {"advertId": 77, "date": "2026-08-01T00:00:00Z", "views": 10},
    "bids": {"advert_id": 77, "nm_id": 5, "norm_query": "платье", "bid": 300},
    "funnel_history": {"date": "2026-08-01", "openCount": 3, "product": {"nmId": 5}},
    "stocks": {"nmId": 5, "chrtId": 9, "warehouseId": -999999, "quantity": 4},
    "cards": {"nmID": 5, "vendorCode": "A-1", "updatedAt": "2026-08-01T00:00:00Z"},
    "prices": {"nmID": 5, "discount": 10, "sizes": [{"sizeID": 9, "price": 1000}]},
    "acceptance_coefficients": {
        "warehouseID": 217081,
        "date": "2024-04-11T00:00:00Z",
        "boxTypeID": 6,
        "coefficient": -1,
    },
    # WB's report tasks.
    "paid_storage": {
        "date": "2026-08-01",
        "nmId": 5,
        "chrtId": 9,
        "giId": 123,
        "warehouse": "Коледино",
        "warehousePrice": 1.25,
    },
    "warehouse_remains": {"nmId": 5, "barcode": "2000", "warehouseName": "Тула", "quantity": 3},
    "acceptance_report": {"incomeId": 41, "nmID": 5, "shkCreateDate": "2026-08-01", "total": 2},
    # Fleet-wide (no cabinet): WB's tariffs.
    "tariffs_box": {"warehouseName": "Коледино", "date": "2026-08-01", "boxDeliveryBase": "48"},
    "tariffs_pallet": {"warehouseName": "Тула", "date": "2026-08-01", "palletDeliveryExpr": "170"},
    "tariffs_return": {
        "warehouseName": "Казань",
        "date": "2026-08-01",
        "deliveryDumpSrgOfficeExpr": "170",
    },
    "tariffs_commission": {
        "subjectID": 6461,
        "subjectName": "Оборудование",
        "kgvpMarketplace": 15.5,
    },
}


def test_every_dataset_has_a_sample() -> None:
    assert set(SAMPLE_ROWS) == set(DATASETS)


async def _cabinet(store: Store, name: str = "shop") -> int:
    return (await store.cabinets.add(name, f"token-{name}", f"sid-{name}")).id


@pytest.mark.parametrize("name", sorted(SAMPLE_ROWS))
async def test_same_page_twice_makes_no_duplicates_and_new_data_wins(
    store: Store, name: str
) -> None:
    # A fleet-wide dataset's rows are written and read with no cabinet.
    cabinet = None if DATASETS[name].fleet else await _cabinet(store)
    row = SAMPLE_ROWS[name]
    assert await store.upsert(name, cabinet, [row]) == 1
    assert await store.upsert(name, cabinet, [row]) == 0  # unchanged: not written
    assert await store.count(name, cabinet) == 1
    assert await store.fetch(name, cabinet) == [row]

    changed = {**row, "extra": "новое"}
    assert await store.upsert(name, cabinet, [changed]) == 1
    assert await store.fetch(name, cabinet) == [changed]


async def test_rows_are_kept_per_cabinet(store: Store) -> None:
    first, second = await _cabinet(store, "first"), await _cabinet(store, "second")
    page = [{"srid": f"o{i}", "n": i} for i in range(5)]
    await store.upsert("orders", first, page)
    await store.upsert("orders", second, page[:2])
    assert await store.count("orders", first) == 5
    assert await store.count("orders", second) == 2
    assert await store.count("orders") == 7


async def test_repeated_key_in_one_page_keeps_the_last_row(store: Store) -> None:
    cabinet = await _cabinet(store)
    written = await store.upsert("orders", cabinet, [{"srid": "x", "v": 1}, {"srid": "x", "v": 2}])
    assert written == 1
    assert await store.fetch("orders", cabinet) == [{"srid": "x", "v": 2}]


async def test_large_pages_are_batched_in_one_call(store: Store) -> None:
    cabinet = await _cabinet(store)
    rows = [{"rrdId": i, "forPay": str(i)} for i in range(BATCH_ROWS * 2 + 7)]
    assert await store.upsert("finance_report", cabinet, rows) == len(rows)
    assert await store.upsert("finance_report", cabinet, rows[-10:]) == 0
    changed = [{**row, "forPay": "0"} for row in rows[-10:]]
    assert await store.upsert("finance_report", cabinet, changed) == 10
    assert await store.count("finance_report", cabinet) == len(rows)


async def test_fetch_orders_by_key_and_filters_on_key_columns(store: Store) -> None:
    cabinet = await _cabinet(store)
    rows = [{"nmId": nm, "chrtId": c, "warehouseId": 1} for nm in (3, 1, 2) for c in (2, 1)]
    await store.upsert("stocks", cabinet, rows)
    fetched = await store.fetch("stocks", cabinet)
    assert [(r["nmId"], r["chrtId"]) for r in fetched] == sorted(
        (r["nmId"], r["chrtId"]) for r in rows
    )
    only = await store.fetch("stocks", cabinet, key={"nm_id": 2})
    assert [(r["nmId"], r["chrtId"]) for r in only] == [(2, 1), (2, 2)]
    assert len(await store.fetch("stocks", cabinet, limit=2, offset=1)) == 2
    with pytest.raises(StoreError, match="no key column"):
        await store.fetch("stocks", cabinet, key={"quantity": 1})


async def test_date_keys_collapse_date_and_datetime_forms(store: Store) -> None:
    cabinet = await _cabinet(store)
    await store.upsert("advert_stats", cabinet, [{"advertId": 1, "date": "2026-08-01"}])
    await store.upsert(
        "advert_stats", cabinet, [{"advertId": 1, "date": "2026-08-01T00:00:00+03:00", "v": 2}]
    )
    assert await store.fetch("advert_stats", cabinet) == [
        {"advertId": 1, "date": "2026-08-01T00:00:00+03:00", "v": 2}
    ]


async def test_missing_optional_key_gets_its_default(store: Store) -> None:
    cabinet = await _cabinet(store)
    qr_boxes = {"warehouseID": 1, "date": "2026-08-01T00:00:00Z", "coefficient": 0}
    await store.upsert("acceptance_coefficients", cabinet, [qr_boxes, qr_boxes])
    assert await store.fetch("acceptance_coefficients", cabinet, key={"box_type_id": 0}) == [
        qr_boxes
    ]


@pytest.mark.parametrize(
    ("name", "row", "message"),
    [
        ("orders", {"nmId": 1}, "orders row 1: row has no key field 'srid'"),
        ("finance_report", {"rrdId": "abc"}, "not an integer"),
        ("finance_report", {"rrdId": True}, "not an integer"),
        ("funnel_history", {"date": "2026-08-01", "product": {}}, "product.nmId"),
        ("advert_stats", {"advertId": 1, "date": "yesterday"}, "not a date"),
        ("orders", {"nmId": 1, "srid": "x" * 256}, "'srid' is 256 characters, past the 255"),
        ("nope", {}, "unknown dataset 'nope'"),
    ],
)
async def test_bad_rows_are_refused_before_anything_is_written(
    store: Store, name: str, row: dict[str, Any], message: str
) -> None:
    cabinet = await _cabinet(store)
    good = SAMPLE_ROWS.get(name, {})
    with pytest.raises(StoreError, match=message):
        await store.upsert(name, cabinet, [good, row])
    if name in DATASETS:
        assert await store.count(name, cabinet) == 0


async def test_a_row_that_is_not_json_is_a_store_error_and_nothing_is_written(
    store: Store,
) -> None:
    cabinet = await _cabinet(store)
    good = SAMPLE_ROWS["finance_report"]
    with pytest.raises(StoreError, match="JSON"):
        await store.upsert("finance_report", cabinet, [good, {"rrdId": 2, "tags": {1, 2}}])
    assert await store.count("finance_report", cabinet) == 0


async def test_rows_of_an_unknown_cabinet_are_a_store_error(store: Store) -> None:
    with pytest.raises(StoreError):
        await store.upsert("orders", 999_999, [{"srid": "x"}])


async def test_empty_page_writes_nothing(store: Store) -> None:
    assert await store.upsert("orders", await _cabinet(store), []) == 0


async def test_removing_a_cabinet_tombstones_its_rows(store: Store) -> None:
    cabinet = await _cabinet(store)
    await store.upsert("orders", cabinet, [{"srid": "x"}])
    await store.cursors.save(cabinet, "orders", {"dateFrom": "2026-08-01"})
    await store.remove_cabinet(cabinet)
    assert await store.count("orders") == 0
    assert [c.op for c in (await store.changes("orders", after=1)).changes] == ["delete"]
    assert await store.cursors.get(cabinet, "orders") is None


async def test_nested_daily_items_are_split_into_keyed_rows(store: Store) -> None:
    cabinet = await _cabinet(store)
    fullstats_item = {
        "advertId": 7,
        "views": 30,
        "days": [
            {"date": "2026-08-01T00:00:00Z", "views": 10},
            {"date": "2026-08-02", "views": 20},
        ],
    }
    funnel_item = {
        "product": {"nmId": 5, "title": "Платье"},
        "currency": "RUB",
        "history": [{"date": "2026-08-01", "openCount": 1}, {"date": "2026-08-02", "openCount": 2}],
    }
    assert await store.upsert("advert_stats", cabinet, advert_stats_rows(fullstats_item)) == 2
    assert await store.upsert("funnel_history", cabinet, funnel_history_rows(funnel_item)) == 2
    day = await store.fetch("funnel_history", cabinet, key={"date": "2026-08-02"})
    assert day == [
        {
            "date": "2026-08-02",
            "openCount": 2,
            **{k: funnel_item[k] for k in ("product", "currency")},
        }
    ]
    stats = await store.fetch("advert_stats", cabinet)
    assert [s["views"] for s in stats] == [10, 20]
    assert all(s["advertId"] == 7 for s in stats)


async def test_concurrent_writers_of_overlapping_pages_make_no_duplicates(store: Store) -> None:
    cabinet = await _cabinet(store)
    pages = [[{"srid": f"o{i}", "writer": w} for i in range(w, w + 300)] for w in range(0, 200, 40)]
    results = await asyncio.gather(*(store.upsert("orders", cabinet, page) for page in pages))
    assert results == [300] * len(pages)
    assert await store.count("orders", cabinet) == 160 + 300


async def test_equal_data_is_not_rewritten_whatever_its_key_order_or_integer_size(
    store: Store,
) -> None:
    # Canonical JSON (sorted keys; integers past 64 bits through the standard json) makes
    # equal data equal text on SQLite, whose change check compares text.
    cabinet = await _cabinet(store)
    row = {"rrdId": 1, "nmId": 5, "big": 2**70, "nested": {"b": "в", "a": [1, 2.5]}}
    assert await store.upsert("finance_report", cabinet, [row]) == 1
    reordered = {"nested": {"a": [1, 2.5], "b": "в"}, "big": 2**70, "nmId": 5, "rrdId": 1}
    assert await store.upsert("finance_report", cabinet, [reordered]) == 0
    assert await store.fetch("finance_report", cabinet) == [row]


async def test_rows_given_as_any_mapping_are_stored_as_given(store: Store) -> None:
    cabinet = await _cabinet(store)
    row = {"rrdId": 1, "nmId": 5, "title": "Платье"}
    assert await store.upsert("finance_report", cabinet, [MappingProxyType(row)]) == 1
    assert await store.fetch("finance_report", cabinet) == [row]


async def test_a_page_saves_its_cursor_in_its_own_transaction(store: Store) -> None:
    cabinet = await _cabinet(store)
    page = [{"rrdId": 1, "nmId": 5}]
    done = await store.write("finance_report", cabinet, page, cursor=("s", {"rrdId": 1}))
    assert (done.rows, done.changed) == (1, 1)
    assert await store.cursors.get(cabinet, "s") == {"rrdId": 1}
    # A cursor that cannot be stored takes the page's rows with it: one transaction.
    with pytest.raises(StoreError, match="not JSON serializable"):
        await store.write(
            "finance_report", cabinet, [{"rrdId": 2}], cursor=("s", {"rrdId": object()})
        )
    assert await store.count("finance_report", cabinet) == 1
    assert await store.cursors.get(cabinet, "s") == {"rrdId": 1}
    # An unchanged page still moves the cursor on.
    done = await store.write("finance_report", cabinet, page, cursor=("s", {"rrdId": 3}))
    assert (done.changed, done.last_seq) == (0, None)
    assert await store.cursors.get(cabinet, "s") == {"rrdId": 3}
