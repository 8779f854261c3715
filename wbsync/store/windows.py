"""Tombstones for a window of dated rows: a report WB serves for a period replaces that period.

A report task (``wbsync.syncs.reports``) downloads every row WB has for a window of days; a row
the cabinet has stored for one of those days that the report no longer holds was deleted or
recalculated away at WB. ``tombstone_window`` tombstones those rows, and only those: rows of
other days are not the report's to judge. Each tombstone is a sequenced change (the change feed
shows it as a delete), numbered under the dataset's sequence lock like every other write.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import date

from sqlalchemy import func, select

from wbsync.errors import StoreError
from wbsync.store.changes import ChangeEvent
from wbsync.store.datasets import Dataset, KeyValue
from wbsync.store.db import Database
from wbsync.store.rows import BATCH_ROWS, RowRepository
from wbsync.store.schema import dataset_table
from wbsync.store.sequences import advance_sequence, lock_sequence
from wbsync.store.tombstones import tombstone_params, tombstone_statement
from wbsync.system import clock

__all__ = ["tombstone_window"]


async def tombstone_window(
    database: Database,
    rows: RowRepository,
    ds: Dataset,
    cabinet_id: int,
    first: date,
    last: date,
    keep: Collection[tuple[KeyValue, ...]],
) -> int:
    """Tombstone the cabinet's live rows of ``ds`` dated ``first`` to ``last`` (its key field
    of kind ``"date"``, both days included) whose keys are not in ``keep``; how many.

    A first read without a lock finds whether any row is to go (most windows lose none: then
    nothing else); if so, one transaction under the dataset's sequence lock (``BATCH_ROWS``
    keys a statement) reads them again and tombstones those live at that moment. ``StoreError``
    for a dataset without a date key field.
    """
    column = ds.date_column
    if column is None:
        raise StoreError(f"dataset {ds.name}: a window needs a key field of kind 'date'")
    table = dataset_table(ds)
    keys = [table.c[k.column] for k in ds.key]
    query = (
        select(*keys)
        .where(
            table.c.cabinet_id == cabinet_id,
            table.c.deleted_at.is_(None),
            table.c[column] >= first.isoformat(),
            table.c[column] <= last.isoformat(),
        )
        .order_by(*keys)
    )
    # Most windows lose no row: one read, no lock, no transaction of our own.
    if all(tuple(row) in keep for row in await database.execute(query)):
        return 0
    async with database.transaction() as conn:
        locked = await lock_sequence(conn, database, ds.name)
        base = locked.last
        live = await conn.execute(query)
        gone = [tuple(row) for row in live if tuple(row) not in keep]
        if not gone:
            return 0
        now = locked.stamp(clock.calendar_now())
        for start in range(0, len(gone), BATCH_ROWS):
            chunk = gone[start : start + BATCH_ROWS]
            params = tombstone_params(ds, cabinet_id, base, now, base + start + 1, chunk)
            await conn.execute(tombstone_statement(ds), params)
        result = await conn.execute(
            select(func.count(), func.max(table.c.seq)).where(table.c.seq > base)
        )
        changed, newest = result.one()
        if changed:
            await advance_sequence(conn, ds.name, int(newest), now)
    if changed:
        await rows.notify(
            ChangeEvent(ds.name, cabinet_id, int(changed), int(newest), prev_seq=base)
        )
    return int(changed)
