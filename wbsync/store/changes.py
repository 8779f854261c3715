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
never reads the same write twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from wbsync.errors import FeedCursorError
from wbsync.store.datasets import Dataset, KeyValue, dataset
from wbsync.store.db import Database
from wbsync.store.schema import change_sequences, dataset_table

__all__ = [
    "FEED_PAGE_MAX",
    "Change",
    "ChangeEvent",
    "ChangeListener",
    "ChangePage",
    "SequenceLock",
    "advance_sequence",
    "iter_changes",
    "lock_sequence",
    "parse_cursor",
    "read_changes",
]

#: The most changes one feed page returns (the API's and ``Store.changes``'s ``limit`` bound).
FEED_PAGE_MAX = 1000


@dataclass(frozen=True, slots=True)
class Change:
    """One row's last write: its sequence number, key, data and whether it is a tombstone."""

    seq: int
    cabinet_id: int
    key: dict[str, KeyValue]
    data: dict[str, Any]
    changed_at: datetime
    deleted: bool

    def as_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the API's and the export's shape)."""
        return {
            "seq": self.seq,
            "cabinet_id": self.cabinet_id,
            "key": self.key,
            "deleted": self.deleted,
            "changed_at": self.changed_at.isoformat(),
            "data": self.data,
        }


@dataclass(frozen=True, slots=True)
class ChangePage:
    """One page of the feed; ``next`` is the cursor of the page after it (``after=next``).

    ``more`` says the page was full, so another may follow at once.
    """

    changes: list[Change]
    next: int
    more: bool


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


def parse_cursor(value: str | int | None) -> int:
    """An ``after`` cursor as a number; FeedCursorError naming it when it is not one."""
    if value is None or value == "":
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.isascii() and value.isdecimal():
        number = int(value)
    else:
        raise FeedCursorError(
            f"cursor 'after' must be a sequence number (an integer >= 0), got {value!r}"
        )
    if number < 0:
        raise FeedCursorError(f"cursor 'after' must be >= 0, got {number}")
    return number


async def read_changes(
    database: Database,
    name: str | Dataset,
    *,
    after: int = 0,
    cabinet_id: int | None = None,
    limit: int = FEED_PAGE_MAX,
) -> ChangePage:
    """The changes of a dataset (of one cabinet, or all) with ``seq > after``, in ``seq`` order.

    A cursor beyond the last number the dataset gave out is a FeedCursorError (a reader holding
    it would wait forever for changes it believes it has read); ``limit`` is 1..FEED_PAGE_MAX.
    """
    ds = dataset(name)
    if not 1 <= limit <= FEED_PAGE_MAX:
        raise FeedCursorError(f"limit must be 1..{FEED_PAGE_MAX}, got {limit}")
    after = parse_cursor(after)
    table = dataset_table(ds)
    keys = [k.column for k in ds.key]
    query = (
        select(
            table.c.seq,
            table.c.cabinet_id,
            *(table.c[k] for k in keys),
            table.c.data,
            table.c.changed_at,
            table.c.deleted_at,
        )
        .where(table.c.seq > after)
        .order_by(table.c.seq)
        .limit(limit)
    )
    if cabinet_id is not None:
        query = query.where(table.c.cabinet_id == cabinet_id)
    last_query = select(change_sequences.c.last_seq).where(change_sequences.c.dataset == ds.name)
    async with database.connection() as conn:
        # The end first: a row read below was committed before it or is numbered under it.
        end = int(await conn.scalar(last_query) or 0)
        if after > end:
            raise FeedCursorError(
                f"cursor 'after'={after} is beyond the end of the {ds.name} feed ({end}); "
                "it was not given out by this database: start again from 0"
            )
        rows = (await conn.execute(query)).all()
    changes = [
        Change(
            seq=int(r.seq),
            cabinet_id=int(r.cabinet_id),
            key={k: r._mapping[k] for k in keys},
            data=dict(r.data),
            changed_at=r.changed_at,
            deleted=r.deleted_at is not None,
        )
        for r in rows
    ]
    return ChangePage(
        changes=changes, next=changes[-1].seq if changes else after, more=len(changes) == limit
    )


async def iter_changes(
    database: Database,
    name: str | Dataset,
    *,
    after: int = 0,
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
