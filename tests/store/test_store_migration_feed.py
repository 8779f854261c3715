"""Migration 0005 on a database with rows: JSONB, numbered rows the feed reads, and back."""

from __future__ import annotations

from sqlalchemy import text

from wbsync.store import Database, Store
from wbsync.store.changes import FEED_PAGE_MAX


async def test_existing_rows_are_converted_numbered_and_read_by_the_feed(
    empty_database: Database,
) -> None:
    db = empty_database
    await db.migrate("0003")
    async with db.transaction() as conn:
        await conn.execute(
            text(
                "INSERT INTO cabinets (name, token_encrypted, seller_id, active, created_at) "
                "VALUES ('shop', 'x', 'sid', true, CURRENT_TIMESTAMP)"
            )
        )
        for nm in range(1, 6):
            await conn.execute(
                text(
                    "INSERT INTO wb_stocks (cabinet_id, nm_id, chrt_id, warehouse_id, data, "
                    "updated_at) VALUES (1, :nm, 1, 7, :data, CURRENT_TIMESTAMP)"
                ),
                {"nm": nm, "data": f'{{"chrtId":1,"nmId":{nm},"quantity":{nm},"warehouseId":7}}'},
            )
    await db.migrate()

    store = Store(db, secret_key=None)
    page = await store.changes("stocks", limit=FEED_PAGE_MAX)
    assert sorted(c.seq for c in page.changes) == [1, 2, 3, 4, 5]
    assert sorted(c.data["quantity"] for c in page.changes) == [1, 2, 3, 4, 5]
    assert not any(c.deleted for c in page.changes)
    # The sequence goes on after the numbered rows; the same data again writes nothing.
    rows = [{"nmId": nm, "chrtId": 1, "warehouseId": 7, "quantity": nm} for nm in range(1, 7)]
    written = await store.write("stocks", 1, rows)
    assert (written.changed, written.last_seq) == (1, 11)
    if db.dialect == "postgresql":
        async with db.connection() as conn:
            kind = await conn.scalar(
                text(
                    "SELECT data_type FROM information_schema.columns "
                    "WHERE table_name = 'wb_stocks' AND column_name = 'data'"
                )
            )
        assert kind == "jsonb"

    await db.downgrade("0003")
    async with db.connection() as conn:
        count = await conn.scalar(text("SELECT count(*) FROM wb_stocks"))
    assert count == 6
