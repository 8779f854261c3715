"""The storage façade: one object that the CLI, the workers and the demo hold."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Collection, Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from wbsync.store.cabinet_repository import CabinetRepository
from wbsync.store.cabinets import Cabinet, CabinetRef
from wbsync.store.changes import FEED_PAGE_MAX, ChangeListener, ChangePage, SnapshotPage
from wbsync.store.columns import read_column, set_column
from wbsync.store.crypto import TokenCipher
from wbsync.store.cursors import CursorRepository
from wbsync.store.datasets import Dataset, KeyValue
from wbsync.store.datasets import dataset as dataset_of
from wbsync.store.db import Database
from wbsync.store.feed import iter_changes, read_changes, read_snapshot
from wbsync.store.ledger import Ledger
from wbsync.store.marks import WaterMarks, water_marks
from wbsync.store.removal import REMOVAL_BATCH_ROWS, finish_removals, tombstone_cabinet
from wbsync.store.retention import PRUNE_BATCH_ROWS, Pruned, prune
from wbsync.store.rows import PageWrite, RowRepository
from wbsync.store.runs import RunRepository
from wbsync.store.snapshots import SnapshotRepository
from wbsync.store.suspensions import Suspension, SuspensionRepository
from wbsync.store.windows import tombstone_window

__all__ = ["Store"]

log = logging.getLogger(__name__)


class Store:
    """Cabinets, cursors, runs, synced rows and the send logs, over one started :class:`Database`.

    The constructor does no I/O; the database's lifecycle belongs to whoever created it.
    ``secret_key`` (``Settings.secret_key``) is needed only to store or reveal a token.
    """

    def __init__(self, database: Database, *, secret_key: str | None) -> None:
        self.database = database
        self.cabinets = CabinetRepository(database, TokenCipher(secret_key))
        self.cursors = CursorRepository(database)
        self.ledger = Ledger(database)
        self.runs = RunRepository(database)
        self._rows = RowRepository(database, self.cursors)
        self.snapshots = SnapshotRepository(database, self._rows)
        self.suspended = SuspensionRepository(database)
        """Suspensions, all of it (``suspend``, ``claim_probe``, ...); the common reads below."""

    async def suspensions(self) -> list[Suspension]:
        """Every suspension in force (``wbsync.store.suspensions``): one query."""
        return await self.suspended.all()

    async def lift_suspensions(
        self, cabinet_id: int, section: str | None = None
    ) -> list[Suspension]:
        """Lift the cabinet's suspensions (all with ``section`` None, else that section's);
        what was lifted."""
        return await self.suspended.lift(cabinet_id, section)

    async def token_expiries(self) -> list[tuple[int, str, datetime | None]]:
        """(cabinet_id, name, token_expires_at) of every active cabinet: one query."""
        return await self.suspended.token_expiries()

    def add_listener(self, listener: ChangeListener) -> None:
        """Call ``listener`` after every committed write that changed rows (e.g. a stream)."""
        self._rows.listeners.append(listener)

    def __repr__(self) -> str:
        return f"Store({self.database!r})"

    async def upsert(
        self, dataset: str | Dataset, cabinet_id: int | None, rows: Sequence[Mapping[str, Any]]
    ) -> int:
        """Insert or update WB rows of ``dataset`` for a cabinet (None: a fleet-wide dataset's);
        the number of rows written (rows equal to the stored ones are not written)."""
        return await self._rows.upsert(dataset, cabinet_id, rows)

    async def write(
        self,
        dataset: str | Dataset,
        cabinet_id: int | None,
        rows: Sequence[Mapping[str, Any]],
        *,
        seen: bool = False,
        cursor: tuple[str, Mapping[str, Any]] | None = None,
        announce: bool = True,
        begin: bool = False,
        whole: bool = False,
    ) -> PageWrite:
        """Store one page (``upsert``'s write) and say what it did; ``seen`` also records its
        keys in the cabinet's snapshot run (see :class:`SnapshotRepository`), and ``begin``
        begins that run first, in the page's statement on PostgreSQL; ``cursor``
        (a sync's name and cursor) saves the sync's cursor, in the page's transaction; with
        ``announce`` False the listeners are not told of the page's change event (the result
        holds it, for the caller to send on); ``whole`` says the page is every row the cabinet
        has in ``dataset``, and tombstones the others in the same write (no snapshot run).
        A fleet-wide dataset's page is written with ``cabinet_id`` None."""
        starts = None
        if begin and cabinet_id is not None:
            cabinet = cabinet_id
            starts = lambda: self.snapshots.begin(dataset, cabinet)  # noqa: E731
        return await self._rows.write(
            dataset,
            cabinet_id,
            rows,
            seen=seen,
            cursor=cursor,
            announce=announce,
            begin=starts,
            whole=whole,
        )

    async def tombstone_window(
        self,
        dataset: str | Dataset,
        cabinet_id: int,
        first: date,
        last: date,
        keep: Collection[tuple[KeyValue, ...]],
    ) -> int:
        """Tombstone the cabinet's live rows of ``dataset`` dated ``first`` to ``last`` whose
        keys are not in ``keep`` (a report of that window no longer has them); how many."""
        ds = dataset_of(dataset)
        return await tombstone_window(self.database, self._rows, ds, cabinet_id, first, last, keep)

    async def changes(
        self,
        dataset: str | Dataset,
        *,
        after: int | str = 0,
        cabinet_id: int | None = None,
        limit: int = FEED_PAGE_MAX,
    ) -> ChangePage:
        """One page of ``dataset``'s change feed after ``after`` (a sequence number or a
        ``<dataset>:<seq>`` cursor, see :mod:`wbsync.store.changes`)."""
        return await read_changes(
            self.database, dataset, after=after, cabinet_id=cabinet_id, limit=limit
        )

    async def snapshot(
        self,
        dataset: str | Dataset,
        *,
        at: int | str | None = None,
        after: int | str = 0,
        cabinet_id: int | None = None,
        limit: int = FEED_PAGE_MAX,
    ) -> SnapshotPage:
        """One page of a consistent snapshot of ``dataset``'s live rows as of ``at`` (the
        feed's end when None): how a reader below the low-water mark resynchronises."""
        return await read_snapshot(
            self.database, dataset, at=at, after=after, cabinet_id=cabinet_id, limit=limit
        )

    def iter_changes(
        self,
        dataset: str | Dataset,
        *,
        after: int | str = 0,
        cabinet_id: int | None = None,
        batch: int = FEED_PAGE_MAX,
    ) -> AsyncIterator[ChangePage]:
        """Every page of ``dataset``'s feed from ``after`` to its end, ``batch`` rows each."""
        return iter_changes(self.database, dataset, after=after, cabinet_id=cabinet_id, batch=batch)

    async def water_marks(self, datasets: Iterable[Dataset]) -> dict[str, WaterMarks]:
        """Each dataset's feed ends (its last and its lowest present sequence numbers), by name."""
        return await water_marks(self.database, datasets)

    async def prune(
        self,
        now: datetime,
        *,
        datasets: tuple[str | Dataset, ...] | None = None,
        batch: int = PRUNE_BATCH_ROWS,
    ) -> list[Pruned]:
        """One retention pass as of ``now`` (see :mod:`wbsync.store.retention`)."""
        return await prune(self.database, now, datasets=datasets, batch=batch)

    async def remove_cabinet(self, ref: CabinetRef, *, batch: int = REMOVAL_BATCH_ROWS) -> Cabinet:
        """Remove a cabinet (``CabinetRepository.remove``) and tombstone its rows, each a
        change in the feed, ``batch`` rows per transaction (:mod:`wbsync.store.removal`); a
        removal interrupted before is resumed. The removed cabinet."""
        cabinet = await self.cabinets.remove(ref)
        count = await tombstone_cabinet(self.database, self._rows, cabinet.id, batch=batch)
        log.info("cabinet %d: %d rows tombstoned by its removal", cabinet.id, count)
        return cabinet

    async def finish_removals(self) -> int:
        """Finish the removed cabinets' removals (see :func:`finish_removals`); how many
        records were deleted (their tombstones all pruned)."""
        return await finish_removals(self.database, self.cabinets, self._rows)

    async def set_column(
        self,
        dataset: str | Dataset,
        cabinet_id: int,
        column: str,
        values: Mapping[tuple[KeyValue, ...], str | None],
    ) -> int:
        """Set one of ``dataset``'s own columns (``Dataset.columns``) on the rows of the given
        natural keys; how many rows it changed (``wbsync.store.columns``)."""
        return await set_column(self.database, dataset, cabinet_id, column, values)

    async def column(
        self, dataset: str | Dataset, cabinet_id: int, column: str
    ) -> dict[tuple[KeyValue, ...], str | None]:
        """One of ``dataset``'s own columns on the cabinet's live rows, by natural key."""
        return await read_column(self.database, dataset, cabinet_id, column)

    async def count(self, dataset: str | Dataset, cabinet_id: int | None = None) -> int:
        """How many rows ``dataset`` holds (for one cabinet, or all)."""
        return await self._rows.count(dataset, cabinet_id)

    async def fetch(
        self,
        dataset: str | Dataset,
        cabinet_id: int | None,
        *,
        key: Mapping[str, KeyValue] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """A cabinet's stored WB rows of ``dataset`` (a fleet-wide one's: ``cabinet_id``
        None), ordered by natural key."""
        return await self._rows.fetch(dataset, cabinet_id, key=key, limit=limit, offset=offset)
