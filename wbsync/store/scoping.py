"""Whose rows a statement touches: a cabinet's, or a fleet-wide dataset's (no cabinet column).

A dataset of scope ``"fleet"`` (``Dataset.scope``) is written with no cabinet (``cabinet_id``
None) and read whole; asking one for a cabinet's rows is a mistake said in words, not an empty
answer. A per-cabinet dataset is written for one cabinet and read for one or for all.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Table

from wbsync.errors import StoreError
from wbsync.store.datasets import Dataset

__all__ = ["cabinet_filter", "check_writer"]


def check_writer(ds: Dataset, cabinet_id: int | None) -> None:
    """``StoreError`` unless ``cabinet_id`` fits the dataset's scope: None for a fleet-wide
    dataset, a cabinet's id for the others."""
    if ds.fleet and cabinet_id is not None:
        raise StoreError(
            f"dataset {ds.name} is fleet-wide (one copy for every cabinet): its rows are "
            f"written with no cabinet, got cabinet {cabinet_id}"
        )
    if not ds.fleet and cabinet_id is None:
        raise StoreError(f"dataset {ds.name} is per cabinet: its rows need a cabinet")


def cabinet_filter(ds: Dataset, table: Table, cabinet_id: int | None) -> list[ColumnElement[Any]]:
    """The clauses that keep one cabinet's rows (none for every cabinet's, ``cabinet_id`` None);
    ``StoreError`` for a cabinet's rows of a fleet-wide dataset."""
    if cabinet_id is None:
        return []
    if ds.fleet:
        raise StoreError(
            f"dataset {ds.name} is fleet-wide (one copy for every cabinet): it has no rows of "
            f"cabinet {cabinet_id}; read it without a cabinet"
        )
    return [table.c.cabinet_id == cabinet_id]
