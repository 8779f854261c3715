"""The cabinet lifecycle over HTTP: replace a token, reactivate, rename."""

from __future__ import annotations

import httpx

from tests.support.api import AUTH, SELLERS
from wbsync.emulator import Emulator
from wbsync.emulator.server import ALL_CATEGORIES
from wbsync.shared.runtime import Runtime

FINANCE = "rnp-finance-sync"


async def test_token_activate_rename_keep_the_cabinets_data(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    no_finance = [c for c in ALL_CATEGORIES if c != "finance"]
    created = await api.post(
        "/api/v1/cabinets",
        json={"name": "shop", "token": api_emulator.token(SELLERS[0], categories=no_finance)},
        headers=AUTH,
    )
    assert created.status_code == 201, created.text
    cabinet = created.json()
    assert "lacks category 'finance'" in cabinet["unserved"][FINANCE]
    base = f"/api/v1/cabinets/{cabinet['id']}"
    await api_runtime.store.cursors.save(cabinet["id"], FINANCE, {"rrdId": 42})

    full = api_emulator.token(SELLERS[0])
    replaced = await api.put(f"{base}/token", json={"token": full}, headers=AUTH)
    assert replaced.status_code == 200 and replaced.json()["unserved"] == {}
    assert full not in replaced.text
    assert (await api_runtime.store.cabinets.get(cabinet["id"])).token() == full
    assert await api_runtime.store.cursors.get(cabinet["id"], FINANCE) == {"rrdId": 42}
    other = await api.put(
        f"{base}/token", json={"token": api_emulator.token(SELLERS[1])}, headers=AUTH
    )
    assert other.status_code == 409 and "add it as a new cabinet" in other.text
    bad = await api.put(f"{base}/token", json={"token": "not-a-jwt"}, headers=AUTH)
    assert bad.status_code == 422

    assert (await api.post(f"{base}/deactivate", headers=AUTH)).json()["active"] is False
    assert (await api.post(f"{base}/activate", headers=AUTH)).json()["active"] is True
    renamed = await api.post(f"{base}/rename", json={"name": "north"}, headers=AUTH)
    assert renamed.status_code == 200 and renamed.json()["name"] == "north"
    await api.post("/api/v1/cabinets", json={"name": "south", "token": full}, headers=AUTH)
    taken = await api.post(f"{base}/rename", json={"name": "south"}, headers=AUTH)
    assert taken.status_code == 409 and "'south' already exists" in taken.text


async def test_check_asks_wb_on_every_section_and_confirms_the_seller(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    no_finance = [c for c in ALL_CATEGORIES if c != "finance"]
    token = api_emulator.token(SELLERS[0], categories=no_finance)
    cabinet = await api_runtime.store.cabinets.add("shop", token, SELLERS[0])
    assert (await api.post(f"/api/v1/cabinets/{cabinet.id}/check")).status_code == 401
    checked = await api.post(f"/api/v1/cabinets/{cabinet.id}/check", headers=AUTH)
    assert checked.status_code == 200, checked.text
    report = checked.json()
    assert token not in checked.text
    assert report["ok"] is False and report["cabinet"] == {"id": cabinet.id, "name": "shop"}
    assert report["seller"]["status"] == "confirmed"
    assert report["seller"]["seller_id"] == SELLERS[0]
    assert report["token"]["type"] == "personal" and report["token"]["expiring_soon"] is False
    by_section = {s["section"]: s for s in report["sections"]}
    finance = by_section.pop("finance")
    assert (finance["status"], finance["category_granted"]) == ("refused", False)
    assert {s["status"] for s in by_section.values()} == {"ok"}
    assert api_emulator.counters.total("rate_limited") == 0
    missing = await api.post("/api/v1/cabinets/999/check", headers=AUTH)
    assert missing.status_code == 404
