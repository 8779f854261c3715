"""The change feed over HTTP as a contract: a removed cabinet's rows arrive as deletes, cursors
are refused with their reason, a cursor below the low-water mark is 410 and the snapshot route
resynchronises, the export writes what the API writes."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx

from tests.support.api import AUTH
from wbsync.cabinets.export import export_changes
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.store.changes import CURSOR_MAX_CHARS
from wbsync.store.datasets import TOMBSTONE_GRACE_DAYS
from wbsync.system import clock

Replica = dict[tuple[int, int], dict[str, Any]]
PAST_GRACE = timedelta(days=TOMBSTONE_GRACE_DAYS + 1)


def _stocks(nms: range, quantity: int = 1) -> list[dict[str, int]]:
    return [{"nmId": nm, "chrtId": 1, "warehouseId": 7, "quantity": quantity} for nm in nms]


def _apply(replica: Replica, changes: list[dict[str, Any]]) -> None:
    for change in changes:
        key = (change["cabinet_id"], change["key"]["nm_id"])
        if change["op"] == "delete":
            replica.pop(key, None)
        else:
            replica[key] = change["data"]


async def _get(api: httpx.AsyncClient, url: str, **params: Any) -> dict[str, Any]:
    reply = await api.get(url, params=params, headers=AUTH)
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


async def _live(runtime: Runtime, cabinets: list[Cabinet]) -> Replica:
    return {
        (c.id, row["nmId"]): row
        for c in cabinets
        for row in await runtime.store.fetch("stocks", c.id)
    }


async def test_a_reader_paging_while_a_cabinet_is_removed_ends_equal_to_the_live_rows(
    api: httpx.AsyncClient,
    api_runtime: Runtime,
    add_cabinet: Callable[..., Awaitable[Cabinet]],
) -> None:
    store = api_runtime.store
    kept, gone = await add_cabinet(0), await add_cabinet(1)
    await store.upsert("stocks", kept.id, _stocks(range(30)))
    await store.upsert("stocks", gone.id, _stocks(range(40)))
    replica: Replica = {}
    removed = asyncio.Event()
    ops: list[str] = []

    async def reader() -> None:
        cursor = "0"
        while True:
            done = removed.is_set()
            page = await _get(api, "/api/v1/datasets/stocks/changes", after=cursor, limit=7)
            _apply(replica, page["changes"])
            ops.extend(c["op"] for c in page["changes"] if c["cabinet_id"] == gone.id)
            cursor = page["cursor"]
            if done and not page["more"]:
                return

    async def remove() -> None:
        await store.remove_cabinet(gone.id, batch=9)
        await store.upsert("stocks", kept.id, _stocks(range(5), quantity=2))
        removed.set()

    await asyncio.gather(reader(), remove())
    assert replica == await _live(api_runtime, [kept, gone])
    assert {key[0] for key in replica} == {kept.id}
    assert ops.count("delete") == 40

    # Its feed answers while its tombstones last, and it is gone from the cabinets.
    own = await _get(api, f"/api/v1/cabinets/{gone.id}/datasets/stocks", limit=100)
    assert [c["op"] for c in own["changes"]] == ["delete"] * 40
    assert (await api.get(f"/api/v1/cabinets/{gone.id}", headers=AUTH)).status_code == 404
    listed = (await api.get("/api/v1/cabinets", headers=AUTH)).json()
    assert [c["id"] for c in listed] == [kept.id]
    # The stream told of every delete, a batch an entry.
    entries: Any = await api_runtime.redis.xrange(api_runtime.change_stream.key)
    deletes = [f for _id, f in entries if f["cabinet"] == str(gone.id)][1:]  # [0]: the upsert
    assert [int(f["rows"]) for f in deletes] == [9, 9, 9, 9, 4]

    # Once its tombstones are pruned, the removal is finished: the record goes.
    await store.prune(clock.calendar_now() + PAST_GRACE)
    assert await store.finish_removals() == 1
    after = await api.get(f"/api/v1/cabinets/{gone.id}/datasets/stocks", headers=AUTH)
    assert after.status_code == 404


async def test_a_cursor_that_cannot_be_right_is_a_422_saying_why(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: Callable[..., Awaitable[Cabinet]]
) -> None:
    cabinet = await add_cabinet(0)
    await api_runtime.store.upsert("orders", cabinet.id, [{"srid": "a"}])
    await api_runtime.store.upsert("stocks", cabinet.id, _stocks(range(3)))
    for after, reason in [
        ("", "empty"),
        ("x1", "malformed"),
        ("1.5", "malformed"),
        ("stocks:1", "other-dataset"),
        ("99", "future"),
        ("orders:2", "future"),
    ]:
        for url in (
            f"/api/v1/cabinets/{cabinet.id}/datasets/orders",
            "/api/v1/datasets/orders/changes",
            "/api/v1/datasets/orders/snapshot",
        ):
            reply = await api.get(url, params={"after": after}, headers=AUTH)
            assert reply.status_code == 422, (url, after, reply.text)
            problem = reply.json()
            assert problem["reason"] == reason, (after, problem)
            assert problem["errors"][0]["field"] == "query.after"
            assert problem["errors"][0]["reason"] == reason
    too_long = "orders:" + "1" * CURSOR_MAX_CHARS  # past the bound: refused before reading
    reply = await api.get(
        "/api/v1/datasets/orders/changes", params={"after": too_long}, headers=AUTH
    )
    assert reply.status_code == 422 and reply.json()["errors"][0]["field"] == "query.after"
    page = await _get(api, "/api/v1/datasets/orders/changes")
    assert (page["next"], page["cursor"], page["low_water"]) == (1, "orders:1", 0)
    assert (await _get(api, "/api/v1/datasets/orders/changes", after="orders:1"))["changes"] == []
    # The route's documentation says the same as docs/data.md.
    schema = (await api.get("/openapi.json", headers=AUTH)).json()
    params = schema["paths"]["/api/v1/datasets/{name}/changes"]["get"]["parameters"]
    [after_doc] = [p["description"] for p in params if p["name"] == "after"]
    assert "<dataset>:<seq>" in after_doc and "410" in after_doc and "empty" in after_doc


async def test_a_cursor_below_the_low_water_mark_is_410_and_the_resync_ends_equal(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: Callable[..., Awaitable[Cabinet]]
) -> None:
    store = api_runtime.store
    cabinets = [await add_cabinet(0), await add_cabinet(1)]
    for cabinet in cabinets:
        await store.write("stocks", cabinet.id, _stocks(range(12)))
    replica: Replica = {}
    page = await _get(api, "/api/v1/datasets/stocks/changes", limit=1000)
    _apply(replica, page["changes"])
    cursor = page["cursor"]
    for cabinet in cabinets:  # deletes while the reader is away, pruned after their grace
        await store.write("stocks", cabinet.id, _stocks(range(4), quantity=3), whole=True)
    await store.prune(clock.calendar_now() + PAST_GRACE, datasets=("stocks",))

    gone = await api.get("/api/v1/datasets/stocks/changes", params={"after": cursor}, headers=AUTH)
    assert gone.status_code == 410, gone.text
    problem = gone.json()
    assert gone.headers["content-type"].startswith("application/problem+json")
    assert problem["resync"] == "/api/v1/datasets/stocks/snapshot"
    assert problem["low_water"] > int(cursor.split(":")[1])
    assert str(problem["low_water"]) in problem["detail"]

    # The resync (docs/data.md): the snapshot at a number, paged, then the feed from it.
    fresh: Replica = {}
    snap = await _get(api, problem["resync"], limit=5)
    while True:
        _apply(fresh, snap["changes"])
        await store.write("stocks", cabinets[0].id, _stocks(range(2), quantity=len(fresh)))
        if not snap["more"]:
            break
        snap = await _get(api, problem["resync"], at=snap["at"], after=snap["next"], limit=5)
    cursor = snap["resume"]
    while True:
        page = await _get(api, "/api/v1/datasets/stocks/changes", after=cursor, limit=5)
        _apply(fresh, page["changes"])
        cursor = page["cursor"]
        if not page["more"]:
            break
    live = await _live(api_runtime, cabinets)
    assert fresh == live
    assert set(replica) - set(live)  # what the old replica held stale, the new one does not


async def test_export_and_api_write_the_same_changes(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: Callable[..., Awaitable[Cabinet]]
) -> None:
    store = api_runtime.store
    cabinet = await add_cabinet(0)
    await store.upsert("stocks", cabinet.id, _stocks(range(4)))
    await store.write("stocks", cabinet.id, _stocks(range(2), quantity=5), whole=True)
    via_api = (await _get(api, "/api/v1/datasets/stocks/changes"))["changes"]
    out = io.StringIO()
    await export_changes(store, "stocks", out)
    via_export = [json.loads(line) for line in out.getvalue().splitlines()]
    assert via_export == via_api
    assert {c["op"] for c in via_api} == {"update", "delete"}
    assert all(c["changed_at"].endswith("Z") for c in via_api)
