"""A dlt source of wbsync's change feed: one merged table per dataset, kept by cursor.

``wbsync_source(base_url, api_key)`` yields one resource per dataset. A cabinet's dataset is
read cabinet by cabinet over the HTTP API, each from the cursor dlt keeps for that (cabinet,
dataset) in the resource's state; a fleet-wide dataset (``scope: fleet``, one copy for every
cabinet, WB's tariffs) is read from its one fleet feed, from the one cursor kept for it. So a
run reads only what changed since the last one. Rows merge on (``cabinet_id``, the dataset's key
columns), a fleet-wide dataset's on its key columns alone (its table has no ``cabinet_id``); a
tombstone is a hard delete; when a row comes twice in one run, its highest ``seq`` wins. WB's
data stays one JSON column, ``data``.

A cursor below the feed's low-water mark (410 Gone) is resynced: the feed's live rows come from
its snapshot route, the rows the destination holds for that cabinet (for a fleet-wide dataset,
in its table) and the snapshot lacks are deleted, and the feed is read on from the snapshot's
``resume`` cursor. A cabinet the API no longer knows (404) has its rows deleted and its cursor
dropped. A dataset whose high-water mark has not moved since the last run is not read at all.
docs/data.md, "Loading into a warehouse with dlt", shows a pipeline.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import dlt
from dlt.common.data_types.typing import TDataType
from dlt.common.schema.typing import TColumnSchema
from dlt.destinations.exceptions import DatabaseUndefinedRelation
from dlt.extract import DltResource
from dlt.sources.helpers.requests import Client

from wbsync.errors import LoaderError
from wbsync.loaders.feed import REQUEST_TIMEOUT_S, DatasetInfo, FeedApi, FeedPage, Gone

__all__ = ["wbsync_source"]

#: The hints every dataset's table takes besides its primary key.
COLUMNS: dict[str, TColumnSchema] = {
    "cabinet_id": {"data_type": "bigint", "nullable": False},
    "seq": {"data_type": "bigint", "dedup_sort": "desc"},
    "changed_at": {"data_type": "timestamp"},
    "deleted": {"data_type": "bool", "hard_delete": True},
    "data": {"data_type": "json"},
}
#: A fleet-wide dataset's: the same, without the cabinet (its rows are nobody's).
FLEET_COLUMNS = {name: hints for name, hints in COLUMNS.items() if name != "cabinet_id"}
#: Where a fleet-wide dataset's resource keeps its one feed's cursor (a cabinet's: at its id).
FLEET = "fleet"

#: The ``seq`` of a delete the loader makes itself (a resync's, a forgotten cabinet's): above
#: every real one, so it wins dlt's dedup over a row of the same key read earlier in the run.
_LAST = 2**63 - 1

#: A feed of one dataset: a cabinet's (its id), or the fleet's (None) for a fleet-wide dataset.
Feed = int | None


@dlt.source(name="wbsync", section="wbsync", max_table_nesting=0)
def wbsync_source(
    base_url: str = dlt.config.value,
    api_key: str = dlt.secrets.value,
    *,
    datasets: Sequence[str] | None = None,
    cabinets: Sequence[int] | None = None,
) -> Iterator[DltResource]:
    """wbsync's change feed at ``base_url``: a resource per dataset (all, or ``datasets``), of
    every cabinet (or ``cabinets``); a fleet-wide dataset's resource reads its one fleet feed,
    whatever ``cabinets``. ``base_url`` and ``api_key`` may come from dlt's config."""
    api = FeedApi(
        Client(request_timeout=REQUEST_TIMEOUT_S, raise_for_status=False).session, base_url, api_key
    )
    listed = functools.cache(api.cabinets)  # one listing for every dataset of the run
    wanted = (lambda: list(cabinets)) if cabinets is not None else listed
    for info in _datasets(api, datasets):
        yield _resource(api, info, wanted, follow_removed=cabinets is None)


def _datasets(api: FeedApi, names: Sequence[str] | None) -> list[DatasetInfo]:
    known = api.datasets()
    if known is None:
        if names is None:
            raise LoaderError("this wbsync has no GET /api/v1/datasets: name the datasets")
        return [DatasetInfo(n) for n in names]
    if names is None:
        return known
    by_name = {d.name: d for d in known}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise LoaderError(f"no dataset {missing}; known: {', '.join(sorted(by_name))}")
    return [by_name[n] for n in names]


def _primary_key(info: DatasetInfo, key: Sequence[str]) -> list[str]:
    return list(key) if info.fleet else ["cabinet_id", *key]


def _resource(
    api: FeedApi, info: DatasetInfo, wanted: Callable[[], list[int]], *, follow_removed: bool
) -> DltResource:
    resource = dlt.resource(
        _changes(api, info, wanted, follow_removed=follow_removed),
        name=info.name,
        write_disposition={"disposition": "merge", "strategy": "delete-insert"},
        columns=FLEET_COLUMNS if info.fleet else COLUMNS,
    )
    if info.key is not None:
        resource.apply_hints(primary_key=_primary_key(info, info.key))
    return resource


def _changes(
    api: FeedApi, info: DatasetInfo, wanted: Callable[[], list[int]], *, follow_removed: bool
) -> Iterator[Any]:
    """Every feed's changes of one dataset since the cursors in the resource's state: each
    cabinet's, or a fleet-wide dataset's one feed (no cabinet listed for it)."""
    state = dlt.current.resource_state()
    cursors: dict[str, str] = state.setdefault("cursors", {})
    feeds: Sequence[Feed] = (
        (None,) if info.fleet else _cabinets(wanted(), cursors, follow_removed=follow_removed)
    )
    if _unchanged(info, state, cursors, feeds):
        return
    for feed in feeds:
        yield from _feed_changes(api, info, feed, cursors)
    if info.high is not None:
        state["high"] = info.high


def _cabinets(listed: list[int], cursors: dict[str, str], *, follow_removed: bool) -> list[int]:
    """The cabinets to read: those listed and, following removals, those read before and gone
    from the list now, read once more: the API answers their deletes, or a 404 that deletes
    their rows here."""
    removed = [int(c) for c in cursors if follow_removed and int(c) not in listed]
    return sorted({*listed, *removed})


def _slot(feed: Feed) -> str:
    """The feed's key in the resource's cursors."""
    return FLEET if feed is None else str(feed)


def _unchanged(
    info: DatasetInfo, state: dict[str, Any], cursors: dict[str, str], feeds: Sequence[Feed]
) -> bool:
    """Whether the dataset's feed is where the last run found it (its high-water mark, as
    discovery gives it, is the one read then) and every feed wanted now was read then: no
    request to make. Sequence numbers only grow, so an equal mark means no write since."""
    if info.high is None or state.get("high") != info.high:
        return False
    return all(_slot(f) in cursors for f in feeds)


def _where(info: DatasetInfo, feed: Feed) -> str:
    return f"{info.name} (fleet-wide)" if feed is None else f"cabinet {feed}, {info.name}"


def _feed_changes(
    api: FeedApi, info: DatasetInfo, feed: Feed, cursors: dict[str, str]
) -> Iterator[Any]:
    slot = _slot(feed)
    after = cursors.get(slot, "0")
    read: set[tuple[Any, ...]] = set()  # keys loaded this run, not yet in the destination
    resynced = False
    while True:
        page = api.page(feed, info.name, after)
        if page is None:  # a cabinet the API no longer knows
            yield from _stale_deletes(info, feed, set(), read)
            cursors.pop(slot, None)
            return
        if isinstance(page, Gone):
            if resynced:
                # The feed moved past the snapshot's number before it was read on from (a
                # resync longer than the tombstones' grace): the next run starts again.
                raise LoaderError(
                    f"{_where(info, feed)}: still below the low-water mark after a resync: "
                    f"{page.detail}"
                )
            after = yield from _resync(api, info, feed, read)
            cursors[slot] = after
            resynced = True
            continue
        if page.rows:
            yield _hinted(info, page)
            read.update(_keys(info.key or page.key, page.rows))
        cursors[slot] = after = page.next
        if not page.more:
            return


def _keys(key: Sequence[str] | None, rows: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    if key is None:
        return set()
    return {tuple(row[k] for k in key) for row in rows if not row["deleted"]}


def _hinted(info: DatasetInfo, page: FeedPage) -> Any:
    """The page's rows with the table's key: its columns and their types (text stays text, a
    key like "2026-12-06T00:00:00" is not taken for a timestamp), from discovery or the page."""
    key = info.key or page.key
    if key is None or not page.rows:
        return page.rows
    sample = page.rows[0]
    columns: dict[str, TColumnSchema] = {
        k: {"data_type": _key_type(sample[k]), "nullable": False} for k in key
    }
    hints = dlt.mark.make_hints(primary_key=_primary_key(info, key), columns=columns)
    return dlt.mark.with_hints(page.rows, hints)


def _key_type(value: object) -> TDataType:
    return "bigint" if isinstance(value, int) and not isinstance(value, bool) else "text"


def _resync(
    api: FeedApi, info: DatasetInfo, feed: Feed, read: set[tuple[Any, ...]]
) -> Generator[Any, None, str]:
    """The feed's rows replaced by its snapshot's; returns the cursor to read on from.

    The snapshot's rows stream through page by page; only their keys are held, to tell which
    rows it lacks of those loaded before and those ``read`` earlier in this run.
    """
    keep: set[tuple[Any, ...]] = set()
    cursor = "0"
    for page in api.resync(feed, info.name):
        if page.rows:
            yield _hinted(info, page)
        keep |= _keys(info.key or page.key, page.rows)
        cursor = page.next
    yield from _stale_deletes(info, feed, keep, read)
    return cursor


def _stale_deletes(
    info: DatasetInfo, feed: Feed, keep: set[tuple[Any, ...]], read: set[tuple[Any, ...]]
) -> Iterator[Any]:
    """Deletes of the feed's rows (the cabinet's, or a fleet-wide table's), loaded or ``read``
    this run, whose keys are not in ``keep``."""
    key = info.key or _loaded_key(info.name)
    if key is None:
        return  # nothing of this dataset was loaded yet
    loaded = set(_loaded_keys(info.name, feed, key))
    gone = sorted((loaded | read) - keep, key=repr)
    if gone:
        owner = {} if feed is None else {"cabinet_id": feed}
        deletes = [
            {**owner, **dict(zip(key, k, strict=True)), "seq": _LAST, "deleted": True} for k in gone
        ]
        yield _hinted(info, FeedPage(deletes, key, "", False))


def _loaded_key(table: str) -> tuple[str, ...] | None:
    """The key columns the pipeline's schema holds for ``table`` (from an earlier run)."""
    schema = dlt.current.pipeline().default_schema
    if table not in schema.tables:
        return None
    columns = schema.get_table_columns(table)
    key = [name for name, col in columns.items() if col.get("primary_key")]
    return tuple(k for k in key if k != "cabinet_id") or None


def _loaded_keys(table: str, feed: Feed, key: Sequence[str]) -> list[tuple[Any, ...]]:
    """The keys of the feed's rows the destination holds in ``table``: the cabinet's, or every
    row of a fleet-wide dataset's table.

    Through the destination's SQL client (every destination that merges has one), not dlt's
    dataset API, which needs a sqlglot of the version it was built with.
    """
    with dlt.current.pipeline().sql_client() as client:
        columns = ", ".join(client.escape_column_name(k) for k in key)
        query = f"SELECT {columns} FROM {client.make_qualified_table_name(table)}"
        args: list[int] = []
        if feed is not None:
            query += f" WHERE {client.escape_column_name('cabinet_id')} = %s"
            args.append(feed)
        try:
            rows = client.execute_sql(query, *args)
        except DatabaseUndefinedRelation:
            return []
    return [tuple(r) for r in rows or []]
