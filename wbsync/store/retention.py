"""Retention: prune dated rows past their dataset's ``retention_days`` and old tombstones.

One process runs the pass (the fan-out leader). Rows go in batches of ``PRUNE_BATCH_ROWS``, each
its own short transaction, so no lock is held for long and writers interleave. A table the pass
deleted rows from is vacuumed after it on PostgreSQL (``Database.vacuum``: no lock that writers
wait on), so the space of what retention removes is reused at once, whatever autovacuum's
thresholds (by default a table is vacuumed once a fifth of it is dead: a dataset losing a day of
400 a day would grow by a fifth before it) and with autovacuum off; the size of a table at its
retention stays flat. Pruning is not a
change at WB: it takes no sequence number and is not in the change feed (a reader keeps its own
history as long as it likes; a reader lagging more than a tombstone's grace misses the delete).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, tuple_

from wbsync.store.datasets import DATASETS, Dataset, dataset
from wbsync.store.db import Database
from wbsync.store.schema import dataset_table

__all__ = ["PRUNE_BATCH_ROWS", "Pruned", "prune"]

#: Rows one pruning transaction deletes at most: bounds how long it holds row locks.
PRUNE_BATCH_ROWS = 5000


@dataclass(frozen=True, slots=True)
class Pruned:
    """What a pass removed from one dataset: rows past retention, tombstones past grace."""

    dataset: str
    expired: int
    tombstones: int


async def prune(
    database: Database,
    now: datetime,
    *,
    datasets: tuple[str | Dataset, ...] | None = None,
    batch: int = PRUNE_BATCH_ROWS,
) -> list[Pruned]:
    """One pruning pass over ``datasets`` (all by default) as of ``now``."""
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    done = []
    for item in datasets if datasets is not None else tuple(DATASETS):
        ds = dataset(item)
        table = dataset_table(ds)
        expired = 0
        if ds.retention_days is not None and ds.date_column is not None:
            cutoff = (now - timedelta(days=ds.retention_days)).date().isoformat()
            expired = await _delete(database, ds, table.c[ds.date_column] < cutoff, batch)
        grace = now - timedelta(days=ds.tombstone_grace_days)
        tombstones = await _delete(database, ds, table.c.deleted_at < grace, batch)
        if expired or tombstones:
            await database.vacuum(table.name)
        done.append(Pruned(ds.name, expired, tombstones))
    return done


async def _delete(database: Database, ds: Dataset, condition: object, batch: int) -> int:
    table = dataset_table(ds)
    key = tuple_(table.c.cabinet_id, *(table.c[k.column] for k in ds.key))
    chosen = select(*key.clauses).where(condition).limit(batch)  # type: ignore[arg-type]
    statement = delete(table).where(key.in_(chosen))
    total = 0
    while True:
        async with database.transaction() as conn:
            deleted = (await conn.execute(statement)).rowcount
        total += deleted
        if deleted < batch:
            return total
