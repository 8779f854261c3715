"""``wbsync export``: a dataset's change feed written out as JSON lines or CSV, in constant memory.

The feed is read in keyset pages of ``batch`` changes (``Store.iter_changes``) and each page is
written before the next is read, so memory holds one page whatever the feed's length. The last
line's ``seq`` is the cursor to pass as ``--after`` next time.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from typing import Literal, TextIO

from wbsync.store import Dataset, Store
from wbsync.store.changes import FEED_PAGE_MAX, Change, utc_text
from wbsync.store.datasets import dataset

__all__ = ["EXPORT_BATCH_ROWS", "ExportFormat", "ExportStats", "export_changes"]

#: Changes read per database round trip (and so held in memory at once) by ``wbsync export``.
EXPORT_BATCH_ROWS = FEED_PAGE_MAX

ExportFormat = Literal["jsonl", "csv"]


@dataclass(slots=True)
class ExportStats:
    """What an export wrote: changes, pages read, the largest page, the last ``seq``."""

    rows: int = 0
    pages: int = 0
    largest_page: int = 0
    last_seq: int | None = None


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


async def export_changes(
    store: Store,
    name: str | Dataset,
    out: TextIO,
    *,
    cabinet_id: int | None = None,
    after: int | str = 0,
    fmt: ExportFormat = "jsonl",
    batch: int = EXPORT_BATCH_ROWS,
) -> ExportStats:
    """Write ``name``'s changes after ``after`` (of one cabinet, or all) to ``out``.

    ``jsonl``: one change per line as the API shows it. ``csv``: a header, then ``seq``,
    ``cabinet_id``, the key columns, ``deleted``, ``changed_at`` (ending in ``Z``, as the
    API's), ``data`` (JSON text) and ``op`` (last: columns are added, never moved). ``after``
    is a sequence number or a ``<dataset>:<seq>`` cursor, checked as the API checks it.
    """
    ds = dataset(name)
    stats = ExportStats()
    writer = csv.writer(out) if fmt == "csv" else None
    keys = [k.column for k in ds.key]
    if writer is not None:
        writer.writerow(["seq", "cabinet_id", *keys, "deleted", "changed_at", "data", "op"])
    async for page in store.iter_changes(ds, after=after, cabinet_id=cabinet_id, batch=batch):
        stats.pages += 1
        stats.largest_page = max(stats.largest_page, len(page.changes))
        for change in page.changes:
            if writer is not None:
                writer.writerow(_csv_row(change, keys))
            else:
                out.write(_json(change.as_json()) + "\n")
        stats.rows += len(page.changes)
        stats.last_seq = page.next
    out.flush()
    return stats


def _csv_row(change: Change, keys: list[str]) -> list[object]:
    return [
        change.seq,
        change.cabinet_id,
        *(change.key[k] for k in keys),
        "true" if change.deleted else "false",
        utc_text(change.changed_at),
        _json(change.data),
        change.op,
    ]
