"""The water marks of the datasets' change feeds: where each feed ends, and where it begins.

The high-water mark is the last sequence number a dataset gave out (``wb_change_sequences``): a
reader whose cursor reached it has read every change committed when it was read. The low-water
mark is the lowest number still in the dataset's table (rows pruned by retention or tombstones
pruned after their grace are gone from the feed): one index look-up per dataset (``ix_<table>
_seq``), whatever the table's size. :func:`low_water_mark` is the one place that says how it is
found. ``complete_from`` is the mark the feed checks cursors against
(``wb_change_sequences.low_seq``, :mod:`wbsync.store.changes`): the lowest ``after`` from which
the feed is complete, deletes included, raised by every pruned tombstone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from wbsync.store.datasets import Dataset
from wbsync.store.db import Database
from wbsync.store.schema import change_sequences, dataset_table

__all__ = ["WaterMarks", "low_water_mark", "water_marks"]


@dataclass(frozen=True, slots=True)
class WaterMarks:
    """A dataset's feed ends: ``high``, its last number (0 before its first write), ``low``,
    the lowest number still in it (None when its table holds no row), and ``complete_from``,
    the lowest cursor the feed is complete from (a page's ``low_water``)."""

    high: int
    low: int | None
    complete_from: int = 0


async def low_water_mark(conn: AsyncConnection, ds: Dataset) -> int | None:
    """The lowest sequence number still in ``ds``'s table, None when it is empty."""
    table = dataset_table(ds)
    low = await conn.scalar(select(func.min(table.c.seq)))
    return None if low is None else int(low)


async def water_marks(database: Database, datasets: Iterable[Dataset]) -> dict[str, WaterMarks]:
    """Each dataset's :class:`WaterMarks`, by name, read in one transaction."""
    wanted = list(datasets)
    ends = select(
        change_sequences.c.dataset, change_sequences.c.last_seq, change_sequences.c.low_seq
    ).where(change_sequences.c.dataset.in_([ds.name for ds in wanted]))
    async with database.connection() as conn:
        # The lows first: a high read after them is at or above every number they saw.
        lows = {ds.name: await low_water_mark(conn, ds) for ds in wanted}
        highs = {name: (int(last), int(mark)) for name, last, mark in await conn.execute(ends)}
    return {
        name: WaterMarks(
            high=highs.get(name, (0, 0))[0], low=low, complete_from=highs.get(name, (0, 0))[1]
        )
        for name, low in lows.items()
    }
