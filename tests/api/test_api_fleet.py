"""A fleet-wide dataset over the API: discovery says so, its feed and snapshot carry no cabinet,
and a cabinet's route for it is a 404 that names the fleet's."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx

from tests.support.api import AUTH
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet


async def test_a_fleet_datasets_feed_has_no_cabinet_and_no_cabinets_route(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: Callable[..., Awaitable[Cabinet]]
) -> None:
    cabinet = await add_cabinet()
    fees = [{"subjectID": s, "subjectName": f"s{s}", "kgvpMarketplace": 12.5} for s in (7, 8)]
    await api_runtime.store.write("tariffs_commission", None, fees, whole=True)

    found = await api.get("/api/v1/datasets/tariffs_commission", headers=AUTH)
    assert found.status_code == 200
    assert (found.json()["scope"], found.json()["high_water_mark"]) == ("fleet", 2)
    assert (await api.get("/api/v1/datasets/orders", headers=AUTH)).json()["scope"] == "cabinet"

    page = await api.get("/api/v1/datasets/tariffs_commission/changes", headers=AUTH)
    assert page.status_code == 200
    assert [(c["cabinet_id"], c["key"], c["op"]) for c in page.json()["changes"]] == [
        (None, {"subject_id": 7}, "insert"),
        (None, {"subject_id": 8}, "insert"),
    ]
    snapshot = await api.get("/api/v1/datasets/tariffs_commission/snapshot", headers=AUTH)
    assert [c["cabinet_id"] for c in snapshot.json()["changes"]] == [None, None]

    for route in ("", "/snapshot"):
        url = f"/api/v1/cabinets/{cabinet.id}/datasets/tariffs_commission{route}"
        refused = await api.get(url, headers=AUTH)
        assert refused.status_code == 404
        assert "/api/v1/datasets/tariffs_commission/changes" in refused.json()["detail"]


async def test_triggering_a_fleet_queue_runs_the_fleets_one_job(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: Callable[..., Awaitable[Cabinet]]
) -> None:
    first, second = await add_cabinet(0), await add_cabinet(1)
    url = "/api/v1/cabinets/{}/syncs/wb-tariffs-sync"
    started = await api.post(url.format(first.id), headers=AUTH)
    assert started.status_code == 202 and started.json()["cabinet"] == "fleet"
    again = await api.post(url.format(second.id), headers=AUTH)
    assert again.status_code == 409 and again.json()["job_id"] == started.json()["job_id"]
    await api_runtime.queue("wb-tariffs-sync").obliterate()
