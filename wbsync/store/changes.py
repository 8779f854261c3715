"""The change feed: sequence numbers for every write of a dataset, and reading by them.

Every write of a dataset row (insert, update, tombstone) stamps the row with the next number of
that dataset's sequence (``wb_change_sequences``). A writer holds the dataset's sequence row
locked from the moment it takes numbers until its transaction commits, so a dataset's writers
commit one after the other, in the order of their numbers: a reader that sees number ``n`` has
already been able to see every number below it, and paging by ``seq > after`` never skips a
change that commits later with a smaller number (what a plain PostgreSQL sequence, shared by
concurrent transactions, would allow). SQLite has one writer at a time anyway. On PostgreSQL a
page may also be written by one statement in autocommit (:mod:`wbsync.store.rows`): it is its
own transaction, and takes the same lock, held to its commit.

The feed is the table itself, ordered by ``seq``: each row appears once, at its last write. A row
written twice between two reads is read once, in its newer state (the older state is gone from
the mirror too); a reader keeping the last ``seq`` it read never misses a row's latest state and
never reads the same write twice. Each change says what it did (``op``: a live row whose ``seq``
is its ``inserted_seq`` is an insert, a tombstone a delete, any other an update), and
``changed_at`` is stamped under the lock, never before the dataset's last stamp.

A cursor is a bare number or the token ``<dataset>:<seq>`` (checked against the dataset). Pruning
a tombstone raises the dataset's low-water mark (``low_seq``) past it; a cursor above 0 below the
mark would miss that delete and is refused (``FeedCursorGoneError``): the reader resynchronises
from :func:`read_snapshot` (the live rows as of a number) and reads the feed on from that number.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import Row, Select, bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from wbsync.errors import FeedCursorError, FeedCursorGoneError
from wbsync.store.datasets import Dataset, KeyValue, dataset
from wbsync.store.db import Database
from wbsync.store.schema import change_sequences, dataset_table

__all__ = [
    "CURSOR_MAX_CHARS",
    "FEED_PAGE_MAX",
    "Change",
    "ChangeEvent",
    "ChangeListener",
    "ChangeOp",
    "ChangePage",
    "SequenceLock",
    "SnapshotPage",
    "advance_sequence",
    "cursor_token",
    "iter_changes",
    "lock_sequence",
    "parse_cursor",
    "read_changes",
    "read_snapshot",
    "utc_text",
]

#: The most changes one feed page returns (the API's and ``Store.changes``'s ``limit`` bound).
FEED_PAGE_MAX = 1000


ChangeOp = Literal["insert", "update", "delete"]
"""What a change did: the row's first version (or its return from a tombstone), a later
version, or a tombstone."""

#: The longest cursor text accepted: ``<dataset>:<seq>``, a dataset name of at most 100
#: characters (the registry's bound) and a 19-digit number (a ``BIGINT``).
CURSOR_MAX_CHARS = 100 + 1 + 19


def utc_text(moment: datetime) -> str:
    """A timestamp as the feed writes it, everywhere (API, export): ISO 8601 ending in ``Z``."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def cursor_token(name: str, seq: int) -> str:
    """The cursor ``<dataset>:<seq>``: the feed's ``cursor``, checked against the dataset."""
    return f"{name}:{seq}"


@dataclass(frozen=True, slots=True)
class Change:
    """One row's last write: its sequence number, key, data, operation, and whether it is a
    tombstone (``op == "delete"``)."""

    seq: int
    cabinet_id: int
    key: dict[str, KeyValue]
    data: dict[str, Any]
    changed_at: datetime
    deleted: bool
    op: ChangeOp = "update"

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the API's and the export's shape)."""
        return {
            "seq": self.seq,
            "cabinet_id": self.cabinet_id,
            "key": self.key,
            "op": self.op,
            "deleted": self.deleted,
            "changed_at": utc_text(self.changed_at),
            "data": self.data,
        }


@dataclass(frozen=True, slots=True)
class ChangePage:
    """One page of the feed; ``next`` is the cursor of the page after it (``after=next``).

    ``more`` says the page was full, so another may follow at once. ``low_water``: the lowest
    ``after`` from which the feed is complete (deletes included); ``cursor``: ``next`` as the
    token ``<dataset>:<seq>``, the recommended form.
    """

    changes: list[Change]
    next: int
    more: bool
    dataset: str = ""
    low_water: int = 0

    @property
    def cursor(self) -> str:
        """``next`` as a checked token (``<dataset>:<seq>``)."""
        return cursor_token(self.dataset, self.next)


@dataclass(frozen=True, slots=True)
class SnapshotPage:
    """One page of a consistent snapshot of a dataset's live rows as of number ``at``.

    ``changes`` are live rows with ``after < seq <= at``, in ``seq`` order; send ``next`` as
    ``after`` (with the same ``at``) while ``more``; then read the feed from ``at``
    (``resume``): it brings every write after the snapshot, deletes included.
    """

    changes: list[Change]
    at: int
    next: int
    more: bool
    dataset: str
    low_water: int

    @property
    def resume(self) -> str:
        """The feed cursor to read on from once the snapshot is read."""
        return cursor_token(self.dataset, self.at)


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """What one committed write of a page did: told to listeners (the Redis stream).

    The write's changes are numbered in ``prev_seq < seq <= last_seq`` (with gaps): ``prev_seq``
    is the dataset's last number before the write, taken under the same lock, so it is the
    ``last_seq`` of the dataset's previous write, and a reader whose cursor is below it missed
    an event (docs/data.md, "Gaps and catching up").
    """

    dataset: str
    cabinet_id: int
    rows: int
    last_seq: int
    prev_seq: int


ChangeListener = Callable[[ChangeEvent], Awaitable[None]]


_row = change_sequences.c
# Built once: the same statement objects keep their compiled forms (SQLAlchemy's cache).
_LOCK_PG = (
    select(_row.last_seq, _row.last_changed_at)
    .where(_row.dataset == bindparam("name"))
    .with_for_update()
)
_LOCK_SQLITE = (
    update(change_sequences)
    .where(_row.dataset == bindparam("name"))
    .values(last_seq=_row.last_seq)
    .returning(_row.last_seq, _row.last_changed_at)
)
_ADVANCE = (
    update(change_sequences)
    .where(_row.dataset == bindparam("name"))
    .values(last_seq=bindparam("last"), last_changed_at=bindparam("stamped"))
)


@dataclass(frozen=True, slots=True)
class SequenceLock:
    """A dataset's sequence, locked: the last number given out and the last ``changed_at``."""

    last: int
    last_changed_at: datetime | None

    def stamp(self, now: datetime) -> datetime:
        """``changed_at`` for the writes numbered after ``last``: ``now``, never earlier than
        the last stamp given out (another host's clock may be ahead, or a writer that read the
        clock first may have taken the lock second)."""
        floor = self.last_changed_at
        return now if floor is None or now >= floor else floor


async def lock_sequence(conn: AsyncConnection, database: Database, name: str) -> SequenceLock:
    """Lock ``name``'s sequence for the rest of ``conn``'s transaction; where it stands.

    PostgreSQL: ``SELECT ... FOR UPDATE`` (marks the row, writes no new version). SQLite: a
    no-op ``UPDATE`` first, so the transaction holds the write lock before it reads.
    """
    lock = _LOCK_PG if database.dialect == "postgresql" else _LOCK_SQLITE
    row = (await conn.execute(lock, {"name": name})).one_or_none()
    if row is not None:
        return SequenceLock(int(row.last_seq), row.last_changed_at)
    # First write of a dataset (one a plugin added after the migration): create its row.
    insert = database.insert_ignoring(change_sequences)
    await conn.execute(insert, {"dataset": name, "last_seq": 0, "low_seq": 0})
    return await lock_sequence(conn, database, name)


async def advance_sequence(conn: AsyncConnection, name: str, last: int, stamped: datetime) -> None:
    """Record ``last`` as the last number ``name`` gave out, and ``stamped`` as the last
    ``changed_at`` (under ``lock_sequence``)."""
    await conn.execute(_ADVANCE, {"name": name, "last": last, "stamped": stamped})


def parse_cursor(value: str | int | None, *, dataset: str | None = None) -> int:
    """An ``after`` cursor as a number; FeedCursorError saying what is wrong with it.

    A cursor is a bare number or the token ``<dataset>:<number>`` (the page's ``cursor``); a
    token naming another dataset than ``dataset`` is refused. None is 0 (Python's default);
    an empty text is refused: a blank stored cursor must not read as "from the start".
    """
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        number = _parse_text(value, dataset)
    else:
        raise FeedCursorError(
            f"cursor 'after' must be a sequence number (an integer >= 0) or a "
            f"'<dataset>:<seq>' token, got {value!r}"
        )
    if number < 0:
        raise FeedCursorError(f"cursor 'after' must be >= 0, got {number}")
    return number


def _parse_text(value: str, dataset: str | None) -> int:
    if value == "":
        raise FeedCursorError(
            "cursor 'after' is empty: send the previous page's 'cursor' (or 'next'), "
            "or 0 to read from the beginning",
            reason="empty",
        )
    name, _, digits = value.rpartition(":")
    shown = value if len(value) <= CURSOR_MAX_CHARS else value[:CURSOR_MAX_CHARS] + "..."
    if len(value) > CURSOR_MAX_CHARS or not (digits.isascii() and digits.isdecimal()):
        raise FeedCursorError(
            f"cursor 'after' must be a sequence number (an integer >= 0) or a "
            f"'<dataset>:<seq>' token, got {shown!r}"
        )
    if name and dataset is not None and name != dataset:
        raise FeedCursorError(
            f"cursor 'after'={shown!r} is a cursor of the {name} feed, not of {dataset}: "
            f"send a cursor this feed gave, or 0 to read {dataset} from the beginning",
            reason="other-dataset",
        )
    return int(digits)


_seq = change_sequences.c


def _marks(name: str) -> Select[Any]:
    return select(_seq.last_seq, _seq.low_seq).where(_seq.dataset == name)


def _future(after: int, end: int, name: str) -> FeedCursorError:
    return FeedCursorError(
        f"cursor 'after'={after} is beyond the end of the {name} feed ({end}); "
        "it was not given out by this database's feed of this dataset: start again from 0",
        reason="future",
    )


def _gone(after: int, low: int, name: str) -> FeedCursorGoneError:
    return FeedCursorGoneError(
        f"cursor 'after'={after} is below the {name} feed's low-water mark ({low}): "
        "tombstones after it were pruned, so the feed from it would miss deletes; "
        f"resynchronise from GET /api/v1/datasets/{name}/snapshot (docs/data.md)",
        low_water=low,
    )


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= FEED_PAGE_MAX:
        raise FeedCursorError(f"limit must be 1..{FEED_PAGE_MAX}, got {limit}", reason="limit")


def _rows_query(ds: Dataset, after: int, cabinet_id: int | None, limit: int) -> Select[Any]:
    table = dataset_table(ds)
    query = (
        select(
            table.c.seq,
            table.c.cabinet_id,
            *(table.c[k.column] for k in ds.key),
            table.c.data,
            table.c.changed_at,
            table.c.deleted_at,
            table.c.inserted_seq,
        )
        .where(table.c.seq > after)
        .order_by(table.c.seq)
        .limit(limit)
    )
    if cabinet_id is not None:
        query = query.where(table.c.cabinet_id == cabinet_id)
    return query


def _change(ds: Dataset, row: Row[Any]) -> Change:
    deleted = row.deleted_at is not None
    op: ChangeOp = "delete" if deleted else "insert" if row.inserted_seq == row.seq else "update"
    return Change(
        seq=int(row.seq),
        cabinet_id=int(row.cabinet_id),
        key={k.column: row._mapping[k.column] for k in ds.key},
        data=dict(row.data),
        changed_at=row.changed_at,
        deleted=deleted,
        op=op,
    )


async def read_changes(
    database: Database,
    name: str | Dataset,
    *,
    after: int | str = 0,
    cabinet_id: int | None = None,
    limit: int = FEED_PAGE_MAX,
) -> ChangePage:
    """The changes of a dataset (of one cabinet, or all) with ``seq > after``, in ``seq`` order.

    ``after`` is a number or a ``<dataset>:<seq>`` token (:func:`parse_cursor`). A cursor
    beyond the last number the dataset gave out is a FeedCursorError (a reader holding it
    would wait forever for changes it believes it has read); one above 0 and below the
    low-water mark a FeedCursorGoneError (deletes after it were pruned); ``limit`` is
    1..FEED_PAGE_MAX.
    """
    ds = dataset(name)
    _check_limit(limit)
    after = parse_cursor(after, dataset=ds.name)
    async with database.connection() as conn:
        # The end first: a row read below was committed before it or is numbered under it.
        end, _ = (await conn.execute(_marks(ds.name))).one_or_none() or (0, 0)
        if after > end:
            raise _future(after, int(end), ds.name)
        rows = (await conn.execute(_rows_query(ds, after, cabinet_id, limit))).all()
        # The mark after the rows: a tombstone the rows miss was pruned, and the pruning
        # raised the mark in its own transaction, so it shows here.
        low = int(await conn.scalar(_marks(ds.name).with_only_columns(_seq.low_seq)) or 0)
    if 0 < after < low:
        raise _gone(after, low, ds.name)
    changes = [_change(ds, r) for r in rows]
    return ChangePage(
        changes=changes,
        next=changes[-1].seq if changes else after,
        more=len(changes) == limit,
        dataset=ds.name,
        low_water=low,
    )


async def read_snapshot(
    database: Database,
    name: str | Dataset,
    *,
    at: int | str | None = None,
    after: int | str = 0,
    cabinet_id: int | None = None,
    limit: int = FEED_PAGE_MAX,
) -> SnapshotPage:
    """A page of the live rows with ``after < seq <= at``, in ``seq`` order (a resync).

    ``at`` None is the feed's end now: keep the first page's ``at`` for the pages after it.
    A row written after ``at`` is not in the snapshot (its new ``seq`` is past ``at``): the
    feed from ``at`` brings it, or its tombstone. Together they are the live rows, exactly.
    """
    ds = dataset(name)
    _check_limit(limit)
    after = parse_cursor(after, dataset=ds.name)
    table = dataset_table(ds)
    async with database.connection() as conn:
        end, low = (await conn.execute(_marks(ds.name))).one_or_none() or (0, 0)
        upto = int(end) if at is None else parse_cursor(at, dataset=ds.name)
        if upto > end:
            raise _future(upto, int(end), ds.name)
        if after > upto:
            raise FeedCursorError(
                f"cursor 'after'={after} is past the snapshot's 'at'={upto}: send the "
                "previous snapshot page's 'next' with its 'at'",
                reason="future",
            )
        query = _rows_query(ds, after, cabinet_id, limit).where(
            table.c.seq <= upto, table.c.deleted_at.is_(None)
        )
        rows = (await conn.execute(query)).all()
    changes = [_change(ds, r) for r in rows]
    return SnapshotPage(
        changes=changes,
        at=upto,
        next=changes[-1].seq if changes else upto,
        more=len(changes) == limit,
        dataset=ds.name,
        low_water=int(low),
    )


async def iter_changes(
    database: Database,
    name: str | Dataset,
    *,
    after: int | str = 0,
    cabinet_id: int | None = None,
    batch: int = FEED_PAGE_MAX,
) -> AsyncIterator[ChangePage]:
    """Every page of the feed from ``after`` to its current end, one ``batch`` at a time.

    Keyset paging on ``seq``: memory holds one page, whatever the feed's length.
    """
    while True:
        page = await read_changes(database, name, after=after, cabinet_id=cabinet_id, limit=batch)
        if page.changes:
            yield page
        if not page.more:
            return
        after = page.next
