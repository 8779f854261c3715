"""Reading the change feed: pages of a dataset's changes by ``seq``, and consistent snapshots.

A page is read after the dataset's end (``last_seq``) and before its low-water mark
(``low_seq``), each checked against the cursor: a cursor beyond the end was not given out by
this feed (``FeedCursorError``), one above 0 below the mark would miss pruned deletes
(``FeedCursorGoneError``) and the reader resynchronises from :func:`read_snapshot`. The
change feed's rules are in :mod:`wbsync.store.changes`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Row, Select, select

from wbsync.errors import FeedCursorError, FeedCursorGoneError
from wbsync.store.changes import (
    FEED_PAGE_MAX,
    Change,
    ChangeOp,
    ChangePage,
    SnapshotPage,
    parse_cursor,
)
from wbsync.store.datasets import Dataset, dataset
from wbsync.store.db import Database
from wbsync.store.schema import change_sequences, dataset_table

__all__ = ["iter_changes", "read_changes", "read_snapshot"]


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
