"""Retention: prune dated rows past their dataset's ``retention_days`` and old tombstones.

One process runs the pass (the fan-out leader). Rows go in batches of ``PRUNE_BATCH_ROWS``, each
its own short transaction, so no lock is held for long and writers interleave. A table the pass
deleted rows from is vacuumed after it on PostgreSQL (``Database.vacuum``: no lock that writers
wait on), so the space of what retention removes is reused at once, whatever autovacuum's
thresholds (by default a table is vacuumed once a fifth of it is dead: a dataset losing a day of
400 a day would grow by a fifth before it) and with autovacuum off; the size of a table at its
retention stays flat. Pruning is not a
change at WB: it takes no sequence number and is not in the change feed (a reader keeps its own
history as long as it likes). A pruned tombstone raises the feed's low-water mark
(``wb_change_sequences.low_seq``) to its number, so a reader lagging more than a tombstone's
grace is told (``FeedCursorGoneError``, HTTP 410) instead of missing the delete; rows pruned
past their retention do not (they are not in the feed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, delete, select, tuple_, update

from wbsync.store.datasets import DATASETS, Dataset, dataset
from wbsync.store.db import Database
from wbsync.store.schema import change_sequences, dataset_table

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
    owner = () if ds.fleet else (table.c.cabinet_id,)  # a fleet-wide table has none
    key = tuple_(*owner, *(table.c[k.column] for k in ds.key))
    chosen = select(*key.clauses).where(condition).limit(batch)  # type: ignore[arg-type]
    statement = (
        delete(table)
        .where(key.in_(chosen))
        # Both columns, judged here: SQLite's RETURNING got ``deleted_at IS NOT NULL`` wrong.
        .returning(table.c.seq, table.c.deleted_at)
    )
    total = 0
    while True:
        async with database.transaction() as conn:
            gone = (await conn.execute(statement)).all()
            deleted = len(gone)
            # A reader below a pruned tombstone's number would miss its delete: the feed's
            # low-water mark rises past it in the same transaction (a reader checks the mark
            # after reading its rows, so it sees the rise whenever it misses the row).
            pruned = [int(row.seq) for row in gone if row.deleted_at is not None]
            if pruned:
                await conn.execute(_RAISE_LOW, {"name": ds.name, "low": max(pruned)})
        total += deleted
        if deleted < batch:
            return total


_RAISE_LOW = (
    update(change_sequences)
    .where(
        change_sequences.c.dataset == bindparam("name"),
        change_sequences.c.low_seq < bindparam("low"),
    )
    .values(low_seq=bindparam("low"))
)
