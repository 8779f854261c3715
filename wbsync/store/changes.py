"""The change feed: what a change is, the pages it is read in, and their cursors.

Every write of a dataset row (insert, update, tombstone) stamps the row with the next number of
that dataset's sequence (:mod:`wbsync.store.sequences`, which keeps a dataset's writers
committing in the order of their numbers); the feed is read by those numbers
(:mod:`wbsync.store.feed`).

The feed is the table itself, ordered by ``seq``: each row appears once, at its last write. A row
written twice between two reads is read once, in its newer state (the older state is gone from
the mirror too); a reader keeping the last ``seq`` it read never misses a row's latest state and
never reads the same write twice. Each change says what it did (``op``: a live row whose ``seq``
is its ``inserted_seq`` is an insert, a tombstone a delete, any other an update), and
``changed_at`` is stamped under the lock, never before the dataset's last stamp.

A cursor is a bare number or the token ``<dataset>:<seq>`` (checked against the dataset,
:func:`parse_cursor`). Pruning a tombstone raises the dataset's low-water mark (``low_seq``) past
it; a cursor above 0 below the mark would miss that delete and is refused
(``FeedCursorGoneError``): the reader resynchronises from ``read_snapshot`` (the live rows as of
a number) and reads the feed on from that number.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from wbsync.errors import FeedCursorError
from wbsync.store.datasets import KeyValue

__all__ = [
    "CURSOR_MAX_CHARS",
    "FEED_PAGE_MAX",
    "Change",
    "ChangeEvent",
    "ChangeListener",
    "ChangeOp",
    "ChangePage",
    "SnapshotPage",
    "cursor_token",
    "parse_cursor",
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
