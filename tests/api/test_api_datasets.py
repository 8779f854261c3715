"""The change feed over HTTP: a cabinet's and the fleet's, keyset pages, cursors checked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx

from tests.support.api import AUTH
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.store.changes import FEED_PAGE_MAX


def _stock(nm: int, quantity: int) -> dict[str, int]:
    return {"nmId": nm, "chrtId": 1, "warehouseId": 7, "quantity": quantity}


async def test_pages_by_next_cursor_with_tombstones_per_cabinet_and_fleet_wide(
    api: httpx.AsyncClient,
    api_runtime: Runtime,
    add_cabinet: Callable[..., Awaitable[Cabinet]],
) -> None:
    store = api_runtime.store
    first, second = await add_cabinet(0), await add_cabinet(1)
    await store.upsert("stocks", first.id, [_stock(nm, 1) for nm in range(5)])
    await store.upsert("stocks", second.id, [_stock(nm, 2) for nm in range(3)])
    await store.snapshots.begin("stocks", first.id)
    await store.write("stocks", first.id, [_stock(0, 1), _stock(1, 9)], seen=True)
    await store.snapshots.complete("stocks", first.id)  # 2..4 tombstoned, 1 changed

    read: list[tuple[int, int, bool]] = []
    after = 0
    while True:
        reply = await api.get(
            f"/api/v1/cabinets/{first.id}/datasets/stocks",
            params={"after": after, "limit": 2},
            headers=AUTH,
        )
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert body["dataset"] == "stocks" and len(body["changes"]) <= 2
        read += [(c["key"]["nm_id"], c["data"]["quantity"], c["deleted"]) for c in body["changes"]]
        after = body["next"]
        if not body["more"]:
            break
    # Each row once, at its last write: 0 unchanged, 1 updated, 2..4 tombstoned (in seq order).
    assert read == [(0, 1, False), (1, 9, False), (2, 1, True), (3, 1, True), (4, 1, True)]

    fleet = await api.get("/api/v1/datasets/stocks/changes", headers=AUTH)
    changes = fleet.json()["changes"]
    assert {c["cabinet_id"] for c in changes} == {first.id, second.id}
    assert [c["seq"] for c in changes] == sorted(c["seq"] for c in changes)
    tail = await api.get(
        "/api/v1/datasets/stocks/changes", params={"after": fleet.json()["next"]}, headers=AUTH
    )
    assert tail.json()["changes"] == [] and tail.json()["next"] == fleet.json()["next"]


async def test_a_malformed_or_future_cursor_is_a_422_naming_after(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: Callable[..., Awaitable[Cabinet]]
) -> None:
    cabinet = await add_cabinet(0)
    await api_runtime.store.upsert("orders", cabinet.id, [{"srid": "a"}])
    for after, says in [
        ("x1", "must be a sequence number"),
        ("-3", "must be a sequence number"),
        ("99", "beyond the end of the orders feed (1)"),
    ]:
        for url in (
            f"/api/v1/cabinets/{cabinet.id}/datasets/orders",
            "/api/v1/datasets/orders/changes",
        ):
            reply = await api.get(url, params={"after": after}, headers=AUTH)
            assert reply.status_code == 422, reply.text
            problem = reply.json()
            assert problem["errors"][0]["field"] == "query.after"
            assert says in problem["detail"]
    too_many = await api.get(
        "/api/v1/datasets/orders/changes", params={"limit": FEED_PAGE_MAX + 1}, headers=AUTH
    )
    assert too_many.status_code == 422 and "query.limit" in too_many.json()["detail"]
    unknown = await api.get("/api/v1/datasets/nope/changes", headers=AUTH)
    assert unknown.status_code == 404 and "no dataset 'nope'" in unknown.json()["detail"]
    assert (await api.get("/api/v1/datasets/orders/changes")).status_code == 401
