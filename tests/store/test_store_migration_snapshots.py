"""Migration 0006 with a snapshot run in progress: the run ends inactive, nothing tombstoned."""

from __future__ import annotations

from sqlalchemy import text

from wbsync.store import Database, Store


async def test_a_run_in_progress_at_the_upgrade_tombstones_nothing_and_the_next_starts_afresh(
    empty_database: Database,
) -> None:
    db = empty_database
    await db.migrate("0005")
    async with db.transaction() as conn:
        await conn.execute(
            text(
                "INSERT INTO cabinets (name, token_encrypted, seller_id, active, created_at) "
                "VALUES ('shop', 'x', 'sid', true, CURRENT_TIMESTAMP)"
            )
        )
    store = Store(db, secret_key=None)
    rows = [{"nmId": nm, "chrtId": 1, "warehouseId": 7} for nm in range(1, 6)]
    async with db.transaction() as conn:
        # What revision 0005 left of a run that had seen one page (of a single row).
        await conn.execute(
            text(
                "INSERT INTO wb_snapshot_runs (cabinet_id, dataset, started_seq, started_at) "
                "VALUES (1, 'stocks', 0, CURRENT_TIMESTAMP)"
            )
        )
        await conn.execute(
            text(
                "INSERT INTO wb_snapshot_keys (cabinet_id, dataset, digests) "
                "VALUES (1, 'stocks', :digests)"
            ),
            {"digests": b"\x00" * 8},
        )
    await db.migrate()
    await store.write("stocks", 1, rows)  # the upgraded process stores the rest of the run
    assert await store.snapshots.complete("stocks", 1) == 0  # the run lost its keys: inactive
    assert await store.count("stocks", 1) == 5
    await store.snapshots.begin("stocks", 1)
    await store.write("stocks", 1, rows[:2], seen=True)
    assert await store.snapshots.complete("stocks", 1) == 3

    await db.downgrade("0005")
    async with db.connection() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM wb_snapshot_runs")) == 0
        assert await conn.scalar(text("SELECT count(*) FROM wb_snapshot_keys")) == 0
