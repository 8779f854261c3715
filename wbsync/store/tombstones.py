"""Tombstones: a dataset's live rows marked deleted by key, each a sequenced change.

One statement per dataset (built once) and its parameters, shared by the writers that tombstone:
a whole page's absent rows (``RowRepository.write(whole=True)``), a complete snapshot run's
unseen rows (``SnapshotRepository.complete``) and a removed cabinet's rows
(``tombstone_cabinet``). Each caller holds the dataset's sequence lock and numbers the
tombstones after its last number.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Update, bindparam, update

from wbsync.store.datasets import Dataset, KeyValue
from wbsync.store.schema import dataset_table

__all__ = ["tombstone_params", "tombstone_statement"]


@functools.cache
def tombstone_statement(ds: Dataset) -> Update:
    """Tombstone one live row of the dataset by its key (``k_<column>``) and cabinet
    (``tomb_cabinet``) unless it was written after number ``tomb_started``: ``deleted_at`` and
    ``changed_at`` set to ``tomb_now``, ``seq`` to ``new_seq``. Built once per dataset."""
    table = dataset_table(ds)
    return (
        update(table)
        .where(
            table.c.cabinet_id == bindparam("tomb_cabinet"),
            *(table.c[k.column] == bindparam(f"k_{k.column}") for k in ds.key),
            table.c.deleted_at.is_(None),
            table.c.seq <= bindparam("tomb_started"),
        )
        .values(
            deleted_at=bindparam("tomb_now"),
            changed_at=bindparam("tomb_now"),
            seq=bindparam("new_seq"),
        )
    )


def tombstone_params(
    ds: Dataset,
    cabinet_id: int,
    started: int,
    now: datetime,
    first: int,
    keys: Sequence[tuple[KeyValue, ...]],
) -> list[dict[str, Any]]:
    """``tombstone_statement``'s parameters for ``keys``, numbered from ``first``."""
    columns = [k.column for k in ds.key]
    return [
        {
            "tomb_cabinet": cabinet_id,
            "tomb_started": started,
            "tomb_now": now,
            "new_seq": first + i,
            **{f"k_{c}": v for c, v in zip(columns, key, strict=True)},
        }
        for i, key in enumerate(keys)
    ]
