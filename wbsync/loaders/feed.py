"""wbsync's change feed read over HTTP, for a loader: discovery, pages, gone cursors, resyncs.

A feed is a cabinet's (``/api/v1/cabinets/{id}/datasets/{name}``) or, for a fleet-wide dataset
(one copy for every cabinet), the fleet's (``/api/v1/datasets/{name}/changes``): every method
that reads one takes the cabinet's id, or None for the fleet's.

Synchronous on purpose: a loader runs inside its tool's own pipeline (dlt's extract step calls
generators and uses ``requests``), not in wbsync's event loop. Every request goes through the
``requests.Session`` the caller gives (dlt's retrying one), with the API key as a bearer token.

The feed's contract is read in one small function per clause, so a change of the contract is a
change of one function: a change's operation (:func:`is_delete`), a page's cursor
(:func:`page_cursor`), the 410 of a cursor below the low-water mark (:meth:`FeedApi.page`), the
resync route (:func:`resync_path`) and the discovery route (:func:`dataset_info`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

from wbsync.errors import LoaderError

__all__ = [
    "FEED_PAGE_ROWS",
    "REQUEST_TIMEOUT_S",
    "DatasetInfo",
    "FeedApi",
    "FeedPage",
    "Gone",
    "change_row",
    "dataset_info",
    "is_delete",
    "page_cursor",
    "resync_path",
]

#: Changes asked for per page: the API's largest ``limit`` (docs/data.md, HTTP).
FEED_PAGE_ROWS = 1000
#: Seconds one request to wbsync's API may take (connect and read each).
REQUEST_TIMEOUT_S = 60.0
#: The columns a loaded row carries besides its key columns (the data stays one JSON value).
ROW_COLUMNS = ("cabinet_id", "seq", "changed_at", "deleted", "data")


@dataclass(frozen=True, slots=True)
class DatasetInfo:
    """A dataset to load: its name, key columns (``None``: read them off its first change), its
    feed's high-water mark when discovery gave one, and whether it is fleet-wide (its rows
    nobody's: the fleet's feed serves it, no cabinet's)."""

    name: str
    key: tuple[str, ...] | None = None
    high: int | None = None
    fleet: bool = False


@dataclass(frozen=True, slots=True)
class FeedPage:
    """One page of a feed as loadable rows; ``next`` is the cursor after it."""

    rows: list[dict[str, Any]]
    key: tuple[str, ...] | None
    next: str
    more: bool


@dataclass(frozen=True, slots=True)
class Gone:
    """The cursor is below the feed's low-water mark (410): resync, then read on."""

    detail: str


def is_delete(change: dict[str, Any]) -> bool:
    """Whether a change removes its row: a tombstone."""
    op = change.get("op")
    if op is not None:
        return bool(op == "delete")
    return bool(change["deleted"])


def page_cursor(page: dict[str, Any]) -> str:
    """The cursor to send as ``after`` for the page after ``page``, as an opaque string: the
    ``<dataset>:<seq>`` token where the feed gives one (it refuses another dataset's), else
    the bare ``next``."""
    return str(page.get("cursor") or page["next"])


def change_row(change: dict[str, Any]) -> dict[str, Any]:
    """A change as the row a warehouse keeps: cabinet, key columns, seq, stamp, delete, data
    (a fleet-wide dataset's change, whose ``cabinet_id`` is null, has no cabinet column)."""
    key: dict[str, Any] = change["key"]
    clash = set(key) & set(ROW_COLUMNS)
    if clash:
        raise LoaderError(f"a key column is named like a loader column: {sorted(clash)}")
    cabinet = change["cabinet_id"]
    return {
        **({} if cabinet is None else {"cabinet_id": cabinet}),
        **key,
        "seq": change["seq"],
        "changed_at": change["changed_at"],
        "deleted": is_delete(change),
        "data": change["data"],
    }


def dataset_info(entry: dict[str, Any]) -> DatasetInfo:
    """One entry of ``GET /api/v1/datasets`` as a DatasetInfo: its key's columns, its feed's
    ``high_water_mark``."""
    key = tuple(str(field["column"]) for field in entry["key"])
    fleet = entry.get("scope") == "fleet"
    return DatasetInfo(str(entry["name"]), key, int(entry["high_water_mark"]), fleet)


def resync_path(cabinet_id: int | None, dataset: str) -> str:
    """The route that answers a cabinet's live rows of a dataset (the fleet's for None) and the
    cursor to go on from."""
    if cabinet_id is None:
        return f"/api/v1/datasets/{quote(dataset, safe='')}/snapshot"
    return f"/api/v1/cabinets/{cabinet_id}/datasets/{quote(dataset, safe='')}/snapshot"


def _feed_path(cabinet_id: int | None, dataset: str) -> str:
    if cabinet_id is None:
        return f"/api/v1/datasets/{quote(dataset, safe='')}/changes"
    return f"/api/v1/cabinets/{cabinet_id}/datasets/{quote(dataset, safe='')}"


def _page(body: dict[str, Any]) -> FeedPage:
    changes: list[dict[str, Any]] = body["changes"]
    key = tuple(changes[0]["key"]) if changes else None
    return FeedPage([change_row(c) for c in changes], key, page_cursor(body), bool(body["more"]))


class FeedApi:
    """wbsync's API as a loader reads it; builds no connection until the first request."""

    def __init__(
        self,
        session: requests.Session,
        base_url: str,
        api_key: str,
        *,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self._session = session
        self._base = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
        self._timeout = timeout_s

    def _get(
        self, path: str, params: dict[str, Any] | None = None, *, expect: Sequence[int] = ()
    ) -> requests.Response:
        try:
            reply = self._session.get(
                self._base + path, params=params, headers=self._headers, timeout=self._timeout
            )
        except requests.RequestException as exc:
            raise LoaderError(f"GET {path}: {type(exc).__name__}: {exc}") from None
        if reply.status_code != 200 and reply.status_code not in expect:
            raise LoaderError(f"GET {path}: HTTP {reply.status_code}: {_detail(reply)}")
        return reply

    def cabinets(self) -> list[int]:
        """Every cabinet's id (``GET /api/v1/cabinets``)."""
        return [int(c["id"]) for c in self._get("/api/v1/cabinets").json()]

    def datasets(self) -> list[DatasetInfo] | None:
        """The datasets and their keys (``GET /api/v1/datasets``); None if this wbsync lacks it."""
        reply = self._get("/api/v1/datasets", expect=(404, 405))
        if reply.status_code != 200:
            return None
        body = reply.json()
        entries = body["datasets"] if isinstance(body, dict) else body
        return [dataset_info(e) for e in entries]

    def page(self, cabinet_id: int | None, dataset: str, after: str) -> FeedPage | Gone | None:
        """The cabinet's changes after ``after`` (the fleet's for None): a page, Gone (410), or
        None (no such cabinet)."""
        params = {"after": after, "limit": FEED_PAGE_ROWS}
        reply = self._get(_feed_path(cabinet_id, dataset), params, expect=(404, 410))
        if reply.status_code == 410:
            return Gone(_detail(reply))
        if reply.status_code == 404:
            # The dataset's 404 (unknown, or fleet-wide asked of a cabinet) is an error; only a
            # cabinet's feed answers one for the cabinet itself.
            about_dataset = _problem(reply).get("detail", "").startswith(("no dataset", "dataset "))
            if about_dataset or cabinet_id is None:
                raise LoaderError(f"GET {_feed_path(cabinet_id, dataset)}: {_detail(reply)}")
            return None
        return _page(reply.json())

    def resync(self, cabinet_id: int | None, dataset: str) -> Iterator[FeedPage]:
        """The cabinet's (the fleet's for None) live rows of a dataset as of one sequence
        number, page by page; the last page's ``next`` is the feed cursor to read on from (the
        snapshot's ``resume``)."""
        params: dict[str, Any] = {"after": "0", "limit": FEED_PAGE_ROWS}
        while True:
            body = self._get(resync_path(cabinet_id, dataset), params).json()
            rows = [change_row(c) for c in body["changes"]]
            key = tuple(body["changes"][0]["key"]) if body["changes"] else None
            if not body["more"]:
                yield FeedPage(rows, key, str(body["resume"]), False)
                return
            yield FeedPage(rows, key, str(body["next"]), True)
            params = {"at": body["at"], "after": body["next"], "limit": FEED_PAGE_ROWS}


def _problem(reply: requests.Response) -> dict[str, Any]:
    try:
        body = reply.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _detail(reply: requests.Response) -> str:
    problem = _problem(reply)
    return str(problem.get("detail") or problem.get("title") or reply.reason or "")
