"""Snapshot runs: after a complete run, the rows it did not see are tombstoned.

A run of a sync whose dataset is a snapshot (``Dataset.kind``) spans job runs: it defers, resumes
from its cursor, may be retried. Its progress lives in the database with its rows:

- ``begin`` (a run starting from no cursor) forgets any earlier unfinished run of the
  (cabinet, dataset) and notes the dataset's sequence number;
- each stored page records the digests of its keys (``RowRepository.write(seen=True)``): one
  small row per page, in the page's own transaction, so an unchanged row is confirmed without
  being rewritten;
- ``complete`` (the run reached its end) tombstones the live rows that were neither seen nor
  written since the run began, in bounded batches, each a sequenced change.

A run that fails or is cut short never reaches ``complete``: nothing is tombstoned, and the next
run's ``begin`` discards what it saw.
"""

from __future__ import annotations

import logging

from sqlalchemy import and_, bindparam, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from wbsync.store.changes import ChangeEvent, advance_sequence, lock_sequence
from wbsync.store.datasets import Dataset, KeyValue, dataset
from wbsync.store.db import Database
from wbsync.store.rows import BATCH_ROWS, RowRepository, key_digest
from wbsync.store.schema import (
    change_sequences,
    dataset_table,
    snapshot_keys,
    snapshot_runs,
    utcnow,
)

__all__ = ["SnapshotRepository"]

log = logging.getLogger(__name__)

_DIGEST = 8
_LAST_SEQ = func.coalesce(
    select(change_sequences.c.last_seq)
    .where(change_sequences.c.dataset == bindparam("seq_dataset"))
    .scalar_subquery(),
    0,
)


class SnapshotRepository:
    """Begin and complete the snapshot runs of (cabinet, dataset)."""

    def __init__(self, database: Database, rows: RowRepository) -> None:
        self._db = database
        self._rows = rows
        # The run's start: the dataset's number now, read by the upsert itself (0 before the
        # dataset's first write).
        self._begin = database.upsert_statement(
            snapshot_runs, conflict=("cabinet_id", "dataset"), update=("started_seq", "started_at")
        ).values(started_seq=_LAST_SEQ)

    async def begin(self, name: str | Dataset, cabinet_id: int) -> None:
        """Start a snapshot run of ``name`` for a cabinet, discarding an unfinished one."""
        ds = dataset(name)
        where = (snapshot_keys.c.cabinet_id == cabinet_id, snapshot_keys.c.dataset == ds.name)
        async with self._db.transaction() as conn:
            await conn.execute(delete(snapshot_keys).where(*where))
            await conn.execute(
                self._begin,
                {
                    "cabinet_id": cabinet_id,
                    "dataset": ds.name,
                    "seq_dataset": ds.name,
                    "started_at": utcnow(),
                },
            )

    async def complete(
        self, name: str | Dataset, cabinet_id: int, *, batch: int = BATCH_ROWS
    ) -> int:
        """Tombstone the cabinet's rows the run did not see; how many. No run begun: 0.

        Tombstones are written ``batch`` rows per transaction, so the dataset's sequence lock
        (which its other writers wait on) is held for one batch at a time.
        """
        ds = dataset(name)
        run_where = (snapshot_runs.c.cabinet_id == cabinet_id, snapshot_runs.c.dataset == ds.name)
        keys_where = (snapshot_keys.c.cabinet_id == cabinet_id, snapshot_keys.c.dataset == ds.name)
        forget = (delete(snapshot_keys).where(*keys_where), delete(snapshot_runs).where(*run_where))
        async with self._db.transaction() as conn:
            started = await conn.scalar(select(snapshot_runs.c.started_seq).where(*run_where))
            if started is None:
                return 0
            seen: set[bytes] = set()
            for (digests,) in await conn.execute(
                select(snapshot_keys.c.digests).where(*keys_where)
            ):
                blob = bytes(digests)
                seen.update(blob[i : i + _DIGEST] for i in range(0, len(blob), _DIGEST))
            gone = await self._unseen(conn, ds, cabinet_id, int(started), seen)
            if not gone:  # the common case: the run ends in the transaction that read it
                for statement in forget:
                    await conn.execute(statement)
                return 0
        tombstoned = 0
        for start in range(0, len(gone), batch):
            tombstoned += await self._tombstone(
                ds, cabinet_id, int(started), gone[start : start + batch]
            )
        async with self._db.transaction() as conn:
            for statement in forget:
                await conn.execute(statement)
        if tombstoned:
            log.info("%s: %d rows of cabinet %d tombstoned", ds.name, tombstoned, cabinet_id)
        return tombstoned

    async def _unseen(
        self, conn: AsyncConnection, ds: Dataset, cabinet_id: int, started: int, seen: set[bytes]
    ) -> list[tuple[KeyValue, ...]]:
        table = dataset_table(ds)
        columns = [table.c[k.column] for k in ds.key]
        query = select(*columns).where(
            table.c.cabinet_id == cabinet_id,
            table.c.deleted_at.is_(None),
            # Written since the run began: seen by it (or by a writer that knows better).
            table.c.seq <= started,
        )
        result = await conn.stream(query.execution_options(yield_per=BATCH_ROWS))
        gone: list[tuple[KeyValue, ...]] = []
        async for row in result:
            key = tuple(row)
            if key_digest(key) not in seen:
                gone.append(key)
        return gone

    async def _tombstone(
        self, ds: Dataset, cabinet_id: int, started: int, keys: list[tuple[KeyValue, ...]]
    ) -> int:
        table = dataset_table(ds)
        columns = [k.column for k in ds.key]
        now = utcnow()
        statement = (
            update(table)
            .where(
                and_(
                    table.c.cabinet_id == cabinet_id,
                    *(table.c[c] == bindparam(f"k_{c}") for c in columns),
                    table.c.deleted_at.is_(None),
                    table.c.seq <= started,
                )
            )
            .values(deleted_at=now, changed_at=now, seq=bindparam("new_seq"))
        )
        async with self._db.transaction() as conn:
            base = await lock_sequence(conn, self._db, ds.name)
            params = [
                {
                    "new_seq": base + 1 + i,
                    **{f"k_{c}": v for c, v in zip(columns, key, strict=True)},
                }
                for i, key in enumerate(keys)
            ]
            await conn.execute(statement, params)
            result = await conn.execute(
                select(func.count(), func.max(table.c.seq)).where(table.c.seq > base)
            )
            changed, last = result.one()
            if changed:
                await advance_sequence(conn, ds.name, int(last))
        if changed:
            await self._rows.notify(ChangeEvent(ds.name, cabinet_id, int(changed), int(last)))
        return int(changed)
