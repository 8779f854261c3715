"""Snapshot runs: after a complete run, the rows it did not see are tombstoned.

A run of a sync whose dataset is a snapshot (``Dataset.kind``) spans job runs: it defers, resumes
from its cursor, may be retried. Its progress lives in the database with its rows:

- ``begin`` (a run starting from no cursor) forgets any earlier unfinished run of the
  (cabinet, dataset) and notes the dataset's sequence number;
- each stored page records the digests of its keys (``RowRepository.write(seen=True)``,
  ``wbsync.store.seen``) in the page's own transaction, so an unchanged row is confirmed without
  being rewritten;
- ``complete`` (the run reached its end) tombstones the live rows that were neither seen nor
  written since the run began, in bounded batches, each a sequenced change.

A run that fails or is cut short never reaches ``complete``: nothing is tombstoned, and the next
run's ``begin`` discards what it saw.

The bookkeeping is updated in place, never inserted and deleted per run: the run's row stays (a
finished run is marked inactive) and each run overwrites the key slots of the one before. On
PostgreSQL without autovacuum, deleted rows' space is never reused (only VACUUM tells the free
space map about it), while the old versions of a row updated in place are reclaimed by page
pruning: the tables stay the size of one run's keys (docs/data.md).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from sqlalchemy import Select, TextClause, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from wbsync.store.changes import ChangeEvent
from wbsync.store.datasets import Dataset, KeyValue, dataset
from wbsync.store.db import Database
from wbsync.store.rows import BATCH_ROWS, RowRepository
from wbsync.store.schema import change_sequences, dataset_table, snapshot_runs, utcnow
from wbsync.store.seen import key_digest, pg_finish_if_all_seen, run_progress, seen_digests
from wbsync.store.sequences import advance_sequence, lock_sequence
from wbsync.store.tombstones import tombstone_params, tombstone_statement
from wbsync.system import clock

__all__ = ["SnapshotRepository"]

log = logging.getLogger(__name__)


@functools.cache
def _progress(ds: Dataset) -> Select[Any]:
    """The dataset's ``run_progress`` query, built once."""
    return run_progress(dataset_table(ds))


@functools.cache
def _pg_finish(ds: Dataset) -> TextClause:
    """The dataset's ``pg_finish_if_all_seen`` statement, built once."""
    return pg_finish_if_all_seen(dataset_table(ds))


_LAST_SEQ = func.coalesce(
    select(change_sequences.c.last_seq)
    .where(change_sequences.c.dataset == bindparam("seq_dataset"))
    .scalar_subquery(),
    0,
)

# Its parameters are not named after the columns: SQLAlchemy keeps those names for the SET.
_FORGET = (
    update(snapshot_runs)
    .where(
        snapshot_runs.c.cabinet_id == bindparam("run_cabinet_id"),
        snapshot_runs.c.dataset == bindparam("run_dataset"),
        snapshot_runs.c.started_at == bindparam("run_started_at"),
    )
    .values(active=False, slots=0)
)
"""A finished run's row marked inactive, unless a newer run began meanwhile (built once: a
statement built per call costs SQLAlchemy its cache key at every run)."""


class SnapshotRepository:
    """Begin and complete the snapshot runs of (cabinet, dataset)."""

    def __init__(self, database: Database, rows: RowRepository) -> None:
        self._db = database
        self._rows = rows
        # The run's start: the dataset's number now, read by the upsert itself (0 before the
        # dataset's first write).
        self._begin = database.upsert_statement(
            snapshot_runs,
            conflict=("cabinet_id", "dataset"),
            update=("started_seq", "started_at", "slots", "active"),
        ).values(started_seq=_LAST_SEQ)

    async def begin(self, name: str | Dataset, cabinet_id: int) -> None:
        """Start a snapshot run of ``name`` for a cabinet, discarding an unfinished one."""
        ds = dataset(name)
        params = {
            "cabinet_id": cabinet_id,
            "dataset": ds.name,
            "seq_dataset": ds.name,
            "started_at": utcnow(),
            "slots": 0,  # the earlier run's slots are overwritten from 0
            "active": True,
        }
        await self._db.fetch(self._begin, params)  # one statement: autocommit on PostgreSQL

    async def complete(
        self, name: str | Dataset, cabinet_id: int, *, batch: int = BATCH_ROWS
    ) -> int:
        """Tombstone the cabinet's rows the run did not see; how many. No run begun: 0.

        The run, the keys it saw and the cabinet's count of live rows come in one query. Every
        key a run saw is a live row once its page is stored (written, or confirmed unchanged),
        so when the live rows are exactly as many as the distinct keys seen, none was left
        unseen: the run is marked finished without reading the dataset's keys (the common case:
        one statement on PostgreSQL, which counts the distinct digests itself; two round trips
        on SQLite). Otherwise the live rows older than the run are compared with the
        keys seen, and the unseen ones tombstoned ``batch`` rows per transaction, so the
        dataset's sequence lock (which its other writers wait on) is held for one batch at a
        time. A seen row that another writer removed while the run went on (none of wbsync's
        own: one live job per cabinet and sync, and retention removes old days only) could let
        the counts agree with a row unseen: that row stays live until the next run compares,
        the same direction as a digest collision (``key_digest``).
        """
        ds = dataset(name)
        if self._db.dialect == "postgresql":
            # The common case in one statement: every live row seen, the run finished.
            params = {"cabinet_id": cabinet_id, "dataset": ds.name}
            [ended] = await self._db.fetch(_pg_finish(ds), params)
            if not ended["runs"] or ended["finished"]:
                return 0
        slots = (
            await self._db.execute(_progress(ds), {"cabinet_id": cabinet_id, "dataset": ds.name})
        ).all()
        if not slots:
            return 0
        run = slots[0]
        seen = seen_digests(slot.digests for slot in slots)
        tombstoned = 0
        if int(run.live) != len(seen):
            started = int(run.started_seq)
            async with self._db.transaction() as conn:  # a server-side cursor needs one
                gone = await self._unseen(conn, ds, cabinet_id, started, seen)
            for start in range(0, len(gone), batch):
                chunk = gone[start : start + batch]
                tombstoned += await self._tombstone(ds, cabinet_id, started, chunk)
        # The run is over (unless a newer one began meanwhile): its row stays, inactive.
        params = {
            "run_cabinet_id": cabinet_id,
            "run_dataset": ds.name,
            "run_started_at": run.started_at,
        }
        await self._db.execute(_FORGET, params)
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
        async with self._db.transaction() as conn:
            locked = await lock_sequence(conn, self._db, ds.name)
            base = locked.last
            # A tombstone's grace runs on the calendar (retention's).
            now = locked.stamp(clock.calendar_now())
            statement = tombstone_statement(ds)
            params = tombstone_params(ds, cabinet_id, started, now, base + 1, keys)
            await conn.execute(statement, params)
            result = await conn.execute(
                select(func.count(), func.max(table.c.seq)).where(table.c.seq > base)
            )
            changed, last = result.one()
            if changed:
                await advance_sequence(conn, ds.name, int(last), now)
        if changed:
            await self._rows.notify(
                ChangeEvent(ds.name, cabinet_id, int(changed), int(last), prev_seq=base)
            )
        return int(changed)
