"""A dataset's change sequence: the numbers its writes are stamped with, taken under a lock.

Every write of a dataset row (insert, update, tombstone) stamps the row with the next number of
that dataset's sequence (``wb_change_sequences``). A writer holds the dataset's sequence row
locked from the moment it takes numbers until its transaction commits, so a dataset's writers
commit one after the other, in the order of their numbers: a reader that sees number ``n`` has
already been able to see every number below it, and paging by ``seq > after`` never skips a
change that commits later with a smaller number (what a plain PostgreSQL sequence, shared by
concurrent transactions, would allow). SQLite has one writer at a time anyway. On PostgreSQL a
page may also be written by one statement in autocommit (:mod:`wbsync.store.page_statement`):
it is its own transaction, and takes the same lock, held to its commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from wbsync.store.db import Database
from wbsync.store.schema import change_sequences

__all__ = ["SequenceLock", "advance_sequence", "lock_sequence"]


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
