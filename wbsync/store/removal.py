"""A removed cabinet's rows leave the mirror as changes: each tombstoned, sequenced, announced.

``CabinetRepository.remove`` marks the cabinet removed (its record stays); :func:`tombstone_cabinet`
then tombstones its live rows of every registered dataset, ``REMOVAL_BATCH_ROWS`` rows per
transaction (each holds the dataset's sequence lock for one batch, as a snapshot run's
tombstones do), each batch told to the listeners (the Redis stream) after its commit. A crash
between batches leaves the rest live, and the next removal of the same cabinet, or the next
retention pass (:func:`finish_removals`), goes on from there: a batch takes the live rows there
are, so nothing is tombstoned twice. The tombstones are pruned after their dataset's grace like
any other; once the cabinet has no row left in any dataset, its record goes.
"""

from __future__ import annotations

import logging

from sqlalchemy import Connection, column, exists, inspect, select
from sqlalchemy import table as sql_table

from wbsync.store.cabinet_repository import CabinetRepository
from wbsync.store.changes import ChangeEvent
from wbsync.store.datasets import DATASETS, Dataset, KeyValue
from wbsync.store.db import Database
from wbsync.store.rows import BATCH_ROWS, RowRepository
from wbsync.store.schema import dataset_table, declared_datasets
from wbsync.store.sequences import advance_sequence, lock_sequence
from wbsync.store.tombstones import tombstone_params, tombstone_statement
from wbsync.system import clock

__all__ = ["REMOVAL_BATCH_ROWS", "finish_removals", "tombstone_cabinet"]

log = logging.getLogger(__name__)

#: Rows of a removed cabinet tombstoned per transaction: bounds how long a removal holds a
#: dataset's sequence lock, which the dataset's writers wait on.
REMOVAL_BATCH_ROWS = BATCH_ROWS


async def tombstone_cabinet(
    database: Database, rows: RowRepository, cabinet_id: int, *, batch: int = REMOVAL_BATCH_ROWS
) -> int:
    """Tombstone every live row of the cabinet in every registered dataset (a fleet-wide
    dataset's rows are nobody's: they stay); how many."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    total = 0
    for name in sorted(DATASETS):
        ds = DATASETS[name]
        while not ds.fleet and await _has_live(database, ds, cabinet_id):
            done = await _tombstone_batch(database, rows, ds, cabinet_id, batch)
            total += done
            if done < batch:
                break
    return total


async def finish_removals(
    database: Database, cabinets: CabinetRepository, rows: RowRepository
) -> int:
    """Go on with every removed cabinet: tombstone what is still live (an interrupted
    removal, or a job's page stored as it was removed), and delete the record of one with no
    row left in any dataset. How many records were deleted."""
    forgotten = 0
    for cabinet in await cabinets.removed():
        await tombstone_cabinet(database, rows, cabinet.id)
        if not await _has_any(database, cabinet.id) and await cabinets.forget(cabinet.id):
            log.info("removed cabinet %d: its last tombstones pruned, record deleted", cabinet.id)
            forgotten += 1
    return forgotten


async def _has_live(database: Database, ds: Dataset, cabinet_id: int) -> bool:
    table = dataset_table(ds)
    query = select(exists().where(table.c.cabinet_id == cabinet_id, table.c.deleted_at.is_(None)))
    async with database.connection() as conn:
        return bool(await conn.scalar(query))


async def _has_any(database: Database, cabinet_id: int) -> bool:
    """Whether any dataset table holds a row of the cabinet: the registered datasets' and
    those recorded for plugins this process has not loaded (the record's deletion would
    cascade to their rows without a change in their feeds)."""
    names = {dataset_table(name).name for name, ds in DATASETS.items() if not ds.fleet}
    known = {dataset_table(name).name for name in DATASETS}
    async with database.connection() as conn:
        recorded = set(await conn.scalars(select(declared_datasets.c.table_name))) - known
        # A table this process does not know the declaration of may be a fleet-wide one (no
        # cabinet column): its columns say.
        names.update(await conn.run_sync(_with_cabinets, sorted(recorded)))
        for name in sorted(names):
            table = sql_table(name, column("cabinet_id"))
            if await conn.scalar(select(exists().where(table.c.cabinet_id == cabinet_id))):
                return True
    return False


def _with_cabinets(conn: Connection, names: list[str]) -> list[str]:
    """Of ``names``, the tables that exist and have a cabinet column."""
    inspector = inspect(conn)
    return [
        name
        for name in names
        if inspector.has_table(name)
        and any(c["name"] == "cabinet_id" for c in inspector.get_columns(name))
    ]


async def _tombstone_batch(
    database: Database, rows: RowRepository, ds: Dataset, cabinet_id: int, batch: int
) -> int:
    table = dataset_table(ds)
    columns = [table.c[k.column] for k in ds.key]
    live = (
        select(*columns)
        .where(table.c.cabinet_id == cabinet_id, table.c.deleted_at.is_(None))
        .order_by(*columns)
        .limit(batch)
    )
    async with database.transaction() as conn:
        locked = await lock_sequence(conn, database, ds.name)
        keys: list[tuple[KeyValue, ...]] = [tuple(row) for row in await conn.execute(live)]
        if not keys:
            return 0
        # On the calendar, as every tombstone (its grace is retention's), never before the last.
        now = locked.stamp(clock.calendar_now())
        params = tombstone_params(ds, cabinet_id, locked.last, now, locked.last + 1, keys)
        await conn.execute(tombstone_statement(ds), params)
        last = locked.last + len(keys)
        await advance_sequence(conn, ds.name, last, now)
    await rows.notify(ChangeEvent(ds.name, cabinet_id, len(keys), last, prev_seq=locked.last))
    return len(keys)
