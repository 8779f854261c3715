"""A dataset's own columns (``Dataset.columns``): set by key, kept when WB's row is stored again,
outside the change feed; migration 0007 adds the bids' ``last_write_error``."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import inspect, text

from wbsync.errors import StoreError
from wbsync.store import Database, Store
from wbsync.store.datasets import Dataset, KeyField, KeyValue

BID = {"advert_id": 77, "nm_id": 5, "norm_query": "платье", "bid": 300}
KEY = (77, 5, "платье")
OTHER = {**BID, "norm_query": "юбка"}


async def _cabinet(store: Store) -> int:
    return (await store.cabinets.add("shop", "token-shop", "sid-shop")).id


async def test_a_note_is_set_by_key_and_kept_when_wb_sends_the_row_again(store: Store) -> None:
    cabinet = await _cabinet(store)
    await store.upsert("bids", cabinet, [BID, OTHER])
    seq = (await store.changes("bids")).next

    assert await store.set_column("bids", cabinet, "last_write_error", {KEY: "bid too low"}) == 1
    # The same note again, and NULL on a row without one, write nothing (no new row version).
    same: dict[tuple[KeyValue, ...], str | None] = {KEY: "bid too low", (77, 5, "юбка"): None}
    assert await store.set_column("bids", cabinet, "last_write_error", same) == 0
    assert await store.column("bids", cabinet, "last_write_error") == {
        KEY: "bid too low",
        (77, 5, "юбка"): None,
    }
    assert (await store.changes("bids")).next == seq  # a note is not a change of WB's data

    await store.upsert("bids", cabinet, [{**BID, "bid": 350}, OTHER])  # WB's row changed
    notes = await store.column("bids", cabinet, "last_write_error")
    assert notes[KEY] == "bid too low"
    assert await store.fetch("bids", cabinet, key={"norm_query": "платье"}) == [{**BID, "bid": 350}]

    assert await store.set_column("bids", cabinet, "last_write_error", {KEY: None}) == 1
    assert (await store.column("bids", cabinet, "last_write_error"))[KEY] is None


async def test_keys_without_a_row_and_other_cabinets_are_left_alone(store: Store) -> None:
    cabinet = await _cabinet(store)
    other = (await store.cabinets.add("other", "token-other", "sid-other")).id
    await store.upsert("bids", cabinet, [BID])
    await store.upsert("bids", other, [BID])

    missing = (1, 2, "нет")
    assert await store.set_column("bids", cabinet, "last_write_error", {missing: "x"}) == 0
    assert await store.set_column("bids", cabinet, "last_write_error", {KEY: "x"}) == 1
    assert await store.column("bids", other, "last_write_error") == {KEY: None}
    assert await store.set_column("bids", cabinet, "last_write_error", {}) == 0


async def test_a_column_the_dataset_does_not_declare_is_refused(store: Store) -> None:
    cabinet = await _cabinet(store)
    with pytest.raises(StoreError, match="no column 'data' of its own"):
        await store.set_column("bids", cabinet, "data", {KEY: "x"})
    with pytest.raises(StoreError, match="no column 'last_write_error' of its own"):
        await store.column("orders", cabinet, "last_write_error")


@pytest.mark.parametrize("column", ["seq", "advert_id", "cabinet_id", "x" * 64])
def test_a_declared_column_may_not_take_a_name_in_use(column: str) -> None:
    with pytest.raises(StoreError, match=r"is taken .* or past 63 characters"):
        Dataset("probe", "GET /probe", (KeyField("advert_id", "id"),), columns=(column,))
    with pytest.raises(StoreError, match="is taken"):
        Dataset("probe", "GET /probe", (KeyField("id", "id"),), columns=("note", "note"))


async def test_migration_0007_adds_the_column_to_existing_bids(empty_database: Database) -> None:
    db = empty_database
    await db.migrate("0006")
    async with db.transaction() as conn:
        await conn.execute(
            text(
                "INSERT INTO cabinets (name, token_encrypted, seller_id, active, created_at) "
                "VALUES ('shop', 'x', 'sid', true, CURRENT_TIMESTAMP)"
            )
        )
        # The row as wbsync wrote it at revision 0006 (today's writes need later columns).
        await conn.execute(
            text(
                "INSERT INTO wb_bids (cabinet_id, advert_id, nm_id, norm_query, data, "
                "changed_at, seq) VALUES (1, 77, 5, :query, :data, CURRENT_TIMESTAMP, 1)"
            ),
            {"query": BID["norm_query"], "data": json.dumps(BID, sort_keys=True)},
        )
    store = Store(db, secret_key=None)

    await db.migrate()
    assert await store.column("bids", 1, "last_write_error") == {KEY: None}
    await store.set_column("bids", 1, "last_write_error", {KEY: "refused"})
    assert await store.column("bids", 1, "last_write_error") == {KEY: "refused"}

    await db.downgrade("0006")
    columns = await db.run_sync(
        lambda c: {col["name"] for col in inspect(c).get_columns("wb_bids")}
    )
    assert "last_write_error" not in columns
    assert await store.fetch("bids", 1) == [BID]
