"""Synced WB rows: upserted on each dataset's natural key, written only when their data changed.

The conflict update is guarded (``WHERE data IS DISTINCT FROM excluded.data``, SQLite's ``IS
NOT`` on canonical JSON text), so a row WB sent again unchanged is not rewritten: no new row
version, no dead tuple, no index write, no feed entry. A written row gets the next change
sequence number (:mod:`wbsync.store.sequences`) and ``changed_at``, stamped once the sequence is
locked and never before the dataset's last stamp (``SequenceLock.stamp``; on PostgreSQL's page
statement ``GREATEST`` with ``last_changed_at`` in its ``lock``), so ``changed_at`` never
decreases along ``seq``; and ``inserted_seq``, its number when the write is the row's first
live one (an insert, or a return from a tombstone), kept on later updates.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Table, case, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from wbsync.errors import StoreError
from wbsync.store.changes import ChangeEvent, ChangeListener
from wbsync.store.cursors import CursorRepository
from wbsync.store.datasets import Dataset, KeyValue, dataset
from wbsync.store.db import Database, json_bytes
from wbsync.store.page_statement import pg_page_statement
from wbsync.store.schema import dataset_table, utcnow
from wbsync.store.seen import key_digest, record_seen, slot_chunks
from wbsync.store.sequences import advance_sequence, lock_sequence
from wbsync.store.tombstones import tombstone_params, tombstone_statement
from wbsync.system import clock

__all__ = ["BATCH_ROWS", "PageWrite", "RowRepository"]

# Rows per executemany call: bounds the memory of one driver round trip on huge pages
# (a finance page can hold 100k rows) while keeping round trips few.
BATCH_ROWS = 1000


@dataclass(frozen=True, slots=True)
class PageWrite:
    """What storing one page did: distinct keys in it, rows written, the last sequence number,
    the change event listeners are told of (None when no row changed), and the rows a whole
    page tombstoned (``RowRepository.write(whole=True)``)."""

    rows: int
    changed: int
    last_seq: int | None
    event: ChangeEvent | None = None
    tombstoned: int = 0


@dataclass(frozen=True, slots=True)
class _Page:
    """One page to store: its distinct rows in key order and what is written with them."""

    dataset: Dataset
    cabinet_id: int
    ordered: list[tuple[tuple[KeyValue, ...], Mapping[str, Any]]]
    changed_at: datetime
    """The clock when the page was built: the statement's stamp, floored by the last one."""
    digests: bytes
    """Its keys' digests, sorted, for a snapshot run's seen set (empty when not recorded)."""
    cursor: tuple[str, Mapping[str, Any]] | None
    """A sync's name and cursor, saved with the rows."""
    begin: bool = False
    """The page begins the cabinet's snapshot run of its dataset (its first page)."""
    whole: bool = False
    """The page is every row the cabinet has in the dataset: the others are tombstoned."""


@dataclass(frozen=True, slots=True)
class _Written:
    """What a page's statement or transaction did: rows written, rows tombstoned, the
    dataset's last number before it (0 when it wrote nothing) and its own last number."""

    changed: int
    tombstoned: int
    last: int | None
    base: int = 0


def _changed(table: Table, excluded: Any) -> Any:
    # A tombstoned row that comes back is written even when its data is the same.
    return table.c.data.is_distinct_from(excluded.data) | table.c.deleted_at.is_not(None)


def _inserted(table: Table, excluded: Any) -> Any:
    # A row back from a tombstone is an insert again (its reader applied the delete).
    return case(
        (table.c.deleted_at.is_not(None), excluded.inserted_seq), else_=table.c.inserted_seq
    )


_COMPUTED = (("inserted_seq", _inserted),)


class RowRepository:
    """Upsert, count and read the rows of the registered datasets."""

    def __init__(self, database: Database, cursors: CursorRepository) -> None:
        self._db = database
        self._cursors = cursors
        self.listeners: list[ChangeListener] = []
        """Told of every committed write that changed rows, after its commit: one writer's in
        its commit order; concurrent writers' may interleave."""

    async def notify(self, event: ChangeEvent) -> None:
        """Tell every listener of a committed write."""
        for listener in self.listeners:
            await listener(event)

    async def upsert(
        self, name: str | Dataset, cabinet_id: int, rows: Sequence[Mapping[str, Any]]
    ) -> int:
        """Insert or update ``rows`` of one dataset for one cabinet; the number of rows written.

        A row equal to the stored one is not written (and not counted). When a key repeats (in
        this call or against stored rows) the later row wins.
        """
        return (await self.write(name, cabinet_id, rows)).changed

    async def write(
        self,
        name: str | Dataset,
        cabinet_id: int,
        rows: Sequence[Mapping[str, Any]],
        *,
        seen: bool = False,
        cursor: tuple[str, Mapping[str, Any]] | None = None,
        announce: bool = True,
        begin: Callable[[], Awaitable[None]] | None = None,
        whole: bool = False,
    ) -> PageWrite:
        """Store one page in one transaction: rows that changed get a sequence number each.

        After the commit the listeners are told of the change event, unless ``announce`` is
        False: then the caller, which gets the event in the result, sends it on.

        ``seen`` also records the page's keys in the cabinet's snapshot run in progress (what
        a complete run compares the table with to find deleted rows), and ``cursor`` (a sync's
        name and cursor) saves where the sync goes on from, both in the same transaction.
        On PostgreSQL a page of at most ``BATCH_ROWS`` distinct keys is one statement in
        autocommit (one round trip, see ``pg_page_statement``). Otherwise one transaction of
        statements: the sequence lock, the guarded upsert returning the numbers of the rows it
        wrote (one per ``BATCH_ROWS`` rows), the sequence's advance when rows changed, the
        seen keys, the cursor.

        ``begin`` begins the snapshot run the page is the first of: on PostgreSQL in the
        page's statement, otherwise by calling it before the page's transaction
        (``SnapshotRepository.begin``).

        ``whole`` says the page is every row the cabinet has in the dataset (a snapshot that
        comes in one reply): in the same statement or transaction, the cabinet's live rows not
        in it are tombstoned, each a sequenced change numbered after the page's own, so no
        snapshot run is needed (an empty whole page tombstones every live row).
        """
        ds = dataset(name)
        # PostgreSQL refuses to update one row twice in a statement; the last copy wins anyway.
        by_key: dict[tuple[KeyValue, ...], Mapping[str, Any]] = {}
        for index, row in enumerate(rows):
            try:
                by_key[ds.row_key(row)] = row
            except StoreError as exc:
                raise StoreError(f"{ds.name} row {index}: {exc}") from None
        if not by_key and not whole:
            if begin is not None:
                await begin()
            if cursor is not None:
                await self._cursors.save(cabinet_id, *cursor)
            return PageWrite(rows=0, changed=0, last_seq=None)
        # Key order: concurrent writers on PostgreSQL then lock rows in one order, no deadlock.
        ordered = sorted(by_key.items(), key=lambda item: item[0])
        page = _Page(
            dataset=ds,
            cabinet_id=cabinet_id,
            ordered=ordered,
            changed_at=clock.calendar_now(),  # on the calendar (retention's)
            digests=b"".join(sorted(key_digest(key) for key, _ in ordered)) if seen else b"",
            cursor=cursor,
            begin=begin is not None,
            whole=whole,
        )
        done = None
        if self._db.dialect == "postgresql" and len(ordered) <= BATCH_ROWS:
            done = await self._write_statement(page)
        if done is None:
            if begin is not None:
                await begin()
            done = await self._write_transaction(page)
        last = done.last
        event = None
        if last is not None:
            changed = done.changed + done.tombstoned
            event = ChangeEvent(ds.name, cabinet_id, changed, last, prev_seq=done.base)
        if event is not None and announce:
            await self.notify(event)
        return PageWrite(
            rows=len(ordered),
            changed=done.changed,
            last_seq=last,
            event=event,
            tombstoned=done.tombstoned,
        )

    async def _write_statement(self, page: _Page) -> _Written | None:
        """The page in one PostgreSQL statement, or None when the dataset has no sequence row
        yet (nothing was written)."""
        ds, cursor = page.dataset, page.cursor
        statement = pg_page_statement(ds)
        params: dict[str, Any] = {
            f"k{i}": [key[i] for key, _ in page.ordered] for i in range(len(ds.key))
        }
        chunks = slot_chunks(page.digests)
        written_at = utcnow()
        params.update(
            # One JSON array of the rows, as bytes (see ``pg_page_statement``).
            data=json_bytes(
                [row if isinstance(row, dict) else dict(row) for _, row in page.ordered]
            ),
            dataset=ds.name,
            cabinet_id=page.cabinet_id,
            now=page.changed_at,
            seen_slots=len(chunks),
            seen=chunks,
            begin=page.begin,
            begun_at=written_at,
            sync=None if cursor is None else cursor[0],
            cursor=None if cursor is None else dict(cursor[1]),
            cursor_at=written_at,
            whole=page.whole,
            page_rows=len(page.ordered),
        )
        [result] = await self._db.fetch(statement, params)
        if not result["known"]:
            return None
        last, base = result["last"], result["base"]
        return _Written(
            changed=int(result["changed"]),
            tombstoned=int(result["tombstoned"]),
            last=None if last is None else int(last),
            base=int(base or 0),
        )

    async def _write_transaction(self, page: _Page) -> _Written:
        """The page in one transaction of statements."""
        ds, cabinet_id = page.dataset, page.cabinet_id
        table = dataset_table(ds)
        columns = [k.column for k in ds.key]
        statement = self._db.upsert_statement(
            table,
            conflict=("cabinet_id", *columns),
            update=("data", "changed_at", "seq", "deleted_at"),
            where=_changed,
            returning=("seq",),
            computed=_COMPUTED,
        )
        async with self._db.transaction() as conn:
            locked = await lock_sequence(conn, self._db, ds.name)
            base, stamp = locked.last, locked.stamp(clock.calendar_now())
            # Each row is offered the next number; only the rows written take theirs (the
            # others leave gaps, which readers never wait on).
            params = [
                {
                    "cabinet_id": cabinet_id,
                    **dict(zip(columns, key, strict=True)),
                    "data": dict(row),
                    "changed_at": stamp,
                    "seq": base + 1 + index,
                    "deleted_at": None,
                    "inserted_seq": base + 1 + index,
                }
                for index, (key, row) in enumerate(page.ordered)
            ]
            written: list[int] = []
            for start in range(0, len(params), BATCH_ROWS):
                result = await conn.execute(statement, params[start : start + BATCH_ROWS])
                written.extend(result.scalars())
            gone = []
            if page.whole:
                gone = await _tombstone_absent(conn, page, base, stamp)
            last = max([*written, *gone], default=None)
            if last is not None:
                await advance_sequence(conn, ds.name, last, stamp)
            if page.digests:
                await record_seen(conn, self._db, cabinet_id, ds.name, page.digests)
            if page.cursor is not None:
                await self._cursors.save_in(conn, cabinet_id, *page.cursor)
        return _Written(changed=len(written), tombstoned=len(gone), last=last, base=base)

    async def count(self, name: str | Dataset, cabinet_id: int | None = None) -> int:
        """How many live rows (not tombstoned) a dataset holds, for one cabinet or for all."""
        table = dataset_table(name)
        query = select(func.count()).select_from(table).where(table.c.deleted_at.is_(None))
        if cabinet_id is not None:
            query = query.where(table.c.cabinet_id == cabinet_id)
        async with self._db.connection() as conn:
            return int(await conn.scalar(query) or 0)

    async def fetch(
        self,
        name: str | Dataset,
        cabinet_id: int,
        *,
        key: Mapping[str, KeyValue] | None = None,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """A cabinet's live rows of a dataset as WB sent them, ordered by natural key.

        ``key`` filters on key columns by their column names (e.g. ``{"nm_id": 1}``).
        """
        ds = dataset(name)
        table = dataset_table(ds)
        query = (
            select(table.c.data)
            .where(table.c.cabinet_id == cabinet_id, table.c.deleted_at.is_(None))
            .order_by(*(table.c[k.column] for k in ds.key))
            .offset(offset)
            .limit(limit)
        )
        known = {k.column for k in ds.key}
        for column, value in (key or {}).items():
            if column not in known:
                raise StoreError(f"{ds.name} has no key column {column!r}; it has {sorted(known)}")
            query = query.where(table.c[column] == value)
        async with self._db.connection() as conn:
            result = await conn.execute(query)
            return [dict(data) for data in result.scalars()]


async def _tombstone_absent(
    conn: AsyncConnection, page: _Page, base: int, stamp: datetime
) -> list[int]:
    """Tombstone the cabinet's live rows of the page's dataset whose keys are not in the page,
    in key order, numbered after the page's own (from ``base`` + its rows + 1), in the caller's
    transaction (which holds the dataset's sequence lock, at ``base``); their numbers."""
    ds, table = page.dataset, dataset_table(page.dataset)
    columns = [table.c[k.column] for k in ds.key]
    kept = {key for key, _ in page.ordered}
    live = await conn.execute(
        select(*columns)
        .where(table.c.cabinet_id == page.cabinet_id, table.c.deleted_at.is_(None))
        .order_by(*columns)
    )
    gone = [tuple(row) for row in live if tuple(row) not in kept]
    if not gone:
        return []
    first = base + len(page.ordered) + 1
    params = tombstone_params(ds, page.cabinet_id, base, stamp, first, gone)
    await conn.execute(tombstone_statement(ds), params)
    return [p["new_seq"] for p in params]
