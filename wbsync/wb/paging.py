"""WB's paging styles as pagers: async iterators of :class:`Page`, each the rows of one reply
and the cursor that resumes right after them.

A sync stores a page's rows and its cursor before it asks for the next page, so a deferral or
a crash between two pages fetches nothing twice that was stored. The three styles WB uses:

* :func:`offset_pages`: ``limit`` + ``offset`` until a short (or empty) page; the cursor is the
  next offset (the goods price list, the stocks report, the analytics reports).
* :func:`batch_pages`: a list of ids sent in batches of WB's maximum; the cursor is how many
  ids are done (campaign stats, bids, funnel history).
* :func:`key_pages`: "after this key" until an empty page; the cursor is the last row's key
  (the finance report's ``rrdId``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from wbsync.errors import WbBadResponseError
from wbsync.observability.context import report_upstream_failure
from wbsync.wb.endpoints import Endpoint
from wbsync.wb.replies import WbReply
from wbsync.wb.words import words_in_json

__all__ = [
    "Page",
    "Row",
    "bad_reply",
    "batch_pages",
    "batches",
    "key_pages",
    "offset_pages",
    "rows_at",
]

Row = dict[str, Any]
T = TypeVar("T")
K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Page:
    """One reply's rows and the cursor to resume after them."""

    rows: list[Row]
    cursor: Any


def bad_reply(reply: WbReply, ep: Endpoint, what: str) -> WbBadResponseError:
    """An unusable reply (``what`` was wrong with it, with WB's words when the body is an error
    object, e.g. ``{"error": true, "errorText": ...}`` with a 200), already counted against the
    running job's failure budget, so the budget stops the job from inside it like any other
    upstream failure. Raise it."""
    error = WbBadResponseError(
        what,
        method=ep.name,
        status=reply.status,
        request_id=reply.request_id,
        words=words_in_json(reply.data, error_only=True),
    )
    report_upstream_failure(error)
    return error


def rows_at(reply: WbReply, ep: Endpoint, *path: str) -> list[Row]:
    """The list of objects at ``path`` (keys into nested objects) of ``reply``'s body; a 204 or
    WB's "no data" refusal (``WbReply.no_data``) is an empty list; anything else is an unusable
    reply (:func:`bad_reply`) naming where."""
    data = reply.data
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    if data is None and (reply.status == 204 or reply.no_data):
        return []
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise bad_reply(reply, ep, f"expected a list of objects at {'.'.join(path) or 'body'}")
    return data


def batches(items: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    """``items`` cut into runs of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def offset_pages(
    fetch: Callable[[int, int], Awaitable[list[Row]]],
    *,
    limit: int,
    offset: int = 0,
    stop_short: bool = True,
) -> AsyncIterator[Page]:
    """``fetch(limit, offset)`` page after page; the cursor is the next offset.

    Ends on an empty page, and (``stop_short``) on a page shorter than ``limit``; a method whose
    pages may come short before the end (WB's goods list) passes ``stop_short=False``.
    """
    while True:
        rows = await fetch(limit, offset)
        if not rows:
            return
        offset += len(rows)
        yield Page(rows, offset)
        if stop_short and len(rows) < limit:
            return


async def batch_pages(
    items: Sequence[T], size: int, fetch: Callable[[Sequence[T]], Awaitable[list[Row]]]
) -> AsyncIterator[Page]:
    """``fetch(batch)`` for each batch of at most ``size`` items; the cursor is how many items
    are done (resume with ``items[cursor:]``)."""
    done = 0
    for batch in batches(items, size):
        rows = await fetch(batch)
        done += len(batch)
        yield Page(rows, done)


async def key_pages(
    fetch: Callable[[K], Awaitable[list[Row]]], *, after: K, key: Callable[[Row], K]
) -> AsyncIterator[Page]:
    """``fetch(after)`` until an empty page; the cursor is ``key`` of each page's last row."""
    while True:
        rows = await fetch(after)
        if not rows:
            return
        after = key(rows[-1])
        yield Page(rows, after)
