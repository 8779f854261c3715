"""The datasets' rows, change feeds and snapshots as the API shows them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, field_serializer

from wbsync.store.changes import (
    Change,
    ChangeOp,
    ChangePage,
    SnapshotPage,
    cursor_token,
    utc_text,
)

__all__ = [
    "ChangeOut",
    "ChangePageOut",
    "RowsOut",
    "SnapshotPageOut",
    "change_page_out",
    "snapshot_page_out",
]


class RowsOut(BaseModel):
    """Rows read from WB on demand."""

    rows: list[dict[str, Any]]
    next_offset: int | None = None


class ChangeOut(BaseModel):
    """One row's last write: its sequence number, natural key, operation, WB's data."""

    seq: int
    cabinet_id: int
    key: dict[str, int | str]
    op: ChangeOp = Field(
        description="insert: the row's first version (or its return after a delete); update: "
        "a later version; delete: a tombstone (its data is the row's last). Rows last written "
        "before migration 0008 read as update."
    )
    deleted: bool = Field(description="The row is a tombstone (op is delete).")
    changed_at: datetime = Field(
        description="When the row was written (UTC, ending in Z); never decreases along seq."
    )
    data: dict[str, Any]

    @field_serializer("changed_at")
    def _utc(self, value: datetime) -> str:
        return utc_text(value)


class ChangePageOut(BaseModel):
    """A page of a dataset's change feed; send ``cursor`` (or ``next``) as ``after`` next."""

    dataset: str
    changes: list[ChangeOut]
    next: int = Field(description="The last seq of this page: a bare-number cursor.")
    cursor: str = Field(
        description="`next` as the token `<dataset>:<seq>`, the recommended `after`: a token "
        "of another dataset is refused, where a bare number cannot be checked."
    )
    more: bool
    low_water: int = Field(
        description="The feed's low-water mark: the lowest `after` from which it is complete, "
        "deletes included. Tombstones pruned after their grace raise it; retention pruning of "
        "dated rows does not (it is not in the feed). An `after` above 0 below it is 410."
    )


class SnapshotPageOut(BaseModel):
    """A page of a consistent snapshot of the live rows as of ``at`` (the resync)."""

    dataset: str
    at: int = Field(description="The snapshot's sequence number: send it with every page.")
    changes: list[ChangeOut] = Field(description="Live rows with after < seq <= at.")
    next: int = Field(description="The last seq of this page: the next page's `after`.")
    more: bool
    resume: str = Field(
        description="Once `more` is false: the feed cursor (`<dataset>:<at>`) to read on from."
    )
    low_water: int


def _change_out(c: Change) -> ChangeOut:
    return ChangeOut(
        seq=c.seq,
        cabinet_id=c.cabinet_id,
        key=c.key,
        op=c.op,
        deleted=c.deleted,
        changed_at=c.changed_at,
        data=c.data,
    )


def change_page_out(dataset: str, page: ChangePage) -> ChangePageOut:
    """A feed page as the API shows it."""
    return ChangePageOut(
        dataset=dataset,
        changes=[_change_out(c) for c in page.changes],
        next=page.next,
        cursor=cursor_token(dataset, page.next),
        more=page.more,
        low_water=page.low_water,
    )


def snapshot_page_out(page: SnapshotPage) -> SnapshotPageOut:
    """A snapshot page as the API shows it."""
    return SnapshotPageOut(
        dataset=page.dataset,
        at=page.at,
        changes=[_change_out(c) for c in page.changes],
        next=page.next,
        more=page.more,
        resume=page.resume,
        low_water=page.low_water,
    )
