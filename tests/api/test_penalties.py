"""WB's penalties over the API: listed with the cabinet's name and WB's words, on the status
page (JSON and HTML), counted by the metrics, and lifted by hand with an audit line.

Real Redis, a real database per backend, the emulator on loopback; the app in process.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api import API_KEY, AUTH, SELLERS
from wbsync.api.auth import COOKIE, new_session
from wbsync.api.page import PENALTY_CABINETS_SHOWN
from wbsync.emulator import Emulator, FaultRule
from wbsync.errors import RateLimitExceeded
from wbsync.ratelimit import GLOBAL_GROUP, BucketScope, Limit
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT as FINANCE_EP
from wbsync.wb import methods
from wbsync.wb.methods import TARIFFS_ACCEPTANCE_COEFFICIENTS as COEFFICIENTS

AddCabinet = Callable[..., Awaitable[Cabinet]]
# Under the limiter's cap at the tests' time scale, and far longer than any test runs.
WAIT_MS = 60_000
FINANCE_WORDS = "Too many requests: limited by 5e0c1a2b (finance)"
GLOBAL_WORDS = "global limiter: limited by 7d1f"
# An orphan: a seller id no stored cabinet has.
ORPHAN = SELLERS[3]


def _global(seller: str) -> BucketScope:
    # The limiter spends the seller's global bucket by its group name; the limit is its own.
    return BucketScope(seller, GLOBAL_GROUP, Limit(period_s=1.0, limit=1, burst=1))


async def _penalise(runtime: Runtime, cabinet: Cabinet) -> BucketScope:
    """A finance penalty on ``cabinet``'s seller, a global one on it and on an orphan seller."""
    finance = runtime.client(cabinet).scope(FINANCE_EP)
    limiter = runtime.limiter
    await limiter.penalize(finance, WAIT_MS, words=FINANCE_WORDS)
    await limiter.penalize(_global(cabinet.seller_id), WAIT_MS / 2, words=GLOBAL_WORDS)
    await limiter.penalize(_global(ORPHAN), WAIT_MS / 3)
    return finance


async def _json(api: httpx.AsyncClient, path: str) -> Any:
    reply = await api.get(path, headers=AUTH)
    assert reply.status_code == 200, reply.text
    return reply.json()


async def test_penalties_are_listed_with_the_cabinets_name_and_wbs_words(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    shop = await add_cabinet(0, name="shop-one")
    await add_cabinet(1, name="untouched")
    await _penalise(api_runtime, shop)

    listed = await _json(api, "/api/v1/penalties")
    assert [(p["seller_id"], p["group"]) for p in listed] == [
        (shop.seller_id, FINANCE_EP.group),
        (shop.seller_id, GLOBAL_GROUP),
        (ORPHAN, GLOBAL_GROUP),
    ]  # the longest first
    finance, seller, orphan = listed
    assert [c["name"] for c in finance["cabinets"]] == ["shop-one"]
    assert finance["words"] == FINANCE_WORDS and not finance["global_limiter"]
    assert WAIT_MS / 2 < finance["remaining_ms"] <= WAIT_MS
    assert seller["global_limiter"] and seller["words"] == GLOBAL_WORDS
    assert orphan["cabinets"] == [] and orphan["words"] is None

    status = await _json(api, "/api/v1/status")
    assert status["penalties_total"] == 3
    assert [(p["seller_id"], p["group"]) for p in status["penalties"]] == [
        (p["seller_id"], p["group"]) for p in listed
    ]
    html = (await api.get("/", headers=AUTH)).text
    table = html[html.index('<table class="penalties">') : html.index("<h2>Queues</h2>")]
    assert "shop-one (#" in table and FINANCE_WORDS in table and FINANCE_EP.group in table
    assert "the seller's global limiter" in table and GLOBAL_WORDS in table
    assert "no cabinet has this seller" in table and "untouched" not in table

    penalised = await _json(api, "/api/v1/status?state=penalty")
    assert [c["cabinet"]["name"] for c in penalised["cabinets"]] == ["shop-one"]


async def test_the_page_names_a_few_cabinets_of_a_penalised_seller_and_counts_the_rest(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    held = PENALTY_CABINETS_SHOWN + 3
    shops = [await add_cabinet(0, name=f"shop-{n:02d}") for n in range(held)]
    await _penalise(api_runtime, shops[0])

    listed = await _json(api, "/api/v1/penalties")
    assert len(listed[0]["cabinets"]) == held  # the API lists every one
    html = (await api.get("/", headers=AUTH)).text
    table = html[html.index('<table class="penalties">') : html.index("<h2>Queues</h2>")]
    finance = next(
        row for row in table.split("<tr ")[1:] if f'data-group="{FINANCE_EP.group}"' in row
    )
    named = [s.name for s in shops if f"{s.name} (#{s.id})" in finance]
    assert named == [s.name for s in shops[:PENALTY_CABINETS_SHOWN]]
    assert "and 3 more of this seller" in finance


async def test_lifting_frees_the_bucket_at_once_and_writes_an_audit_line(
    api: httpx.AsyncClient,
    api_runtime: Runtime,
    add_cabinet: AddCabinet,
    caplog: pytest.LogCaptureFixture,
) -> None:
    shop = await add_cabinet(0, name="shop-one")
    finance = await _penalise(api_runtime, shop)
    assert not (await api_runtime.limiter.try_acquire(finance)).acquired

    path = f"/api/v1/penalties/{shop.id}/{FINANCE_EP.group}"
    with caplog.at_level(logging.INFO, logger="wbsync.cabinets.penalties"):
        reply = await api.delete(path, headers=AUTH)
    assert reply.status_code == 200, reply.text
    lifted = reply.json()
    assert lifted["words"] == FINANCE_WORDS and WAIT_MS / 2 < lifted["remaining_ms"] <= WAIT_MS
    assert (await api_runtime.limiter.try_acquire(finance)).acquired  # no wait is left
    [audit] = [r for r in caplog.records if r.name == "wbsync.cabinets.penalties"]
    line = audit.getMessage()
    assert audit.levelno == logging.WARNING and audit.__dict__["cabinet"] == str(shop.id)
    assert "API key #1 of WBSYNC_API_KEYS" in line and "'shop-one'" in line
    assert f"group {FINANCE_EP.group}" in line and f"({lifted['remaining_ms']} ms) remained" in line
    assert AUTH["Authorization"].split()[1] not in line

    left = await _json(api, "/api/v1/penalties")
    assert [(p["seller_id"], p["group"]) for p in left] == [
        (shop.seller_id, GLOBAL_GROUP),
        (ORPHAN, GLOBAL_GROUP),
    ]
    status = await _json(api, "/api/v1/status")  # the page's index was built afresh
    assert status["penalties_total"] == 2

    # The same again: nothing is in force there now.
    again = await api.delete(path, headers=AUTH)
    assert again.status_code == 404
    assert again.json()["detail"] == (
        f"cabinet {shop.id} 'shop-one' (seller {shop.seller_id}) has no penalty in force on "
        f"{FINANCE_EP.group}"
    )
    # The global limiter is lifted by its name.
    seller = await api.delete(f"/api/v1/penalties/{shop.id}/{GLOBAL_GROUP}", headers=AUTH)
    assert seller.status_code == 200 and seller.json()["global_limiter"]


async def test_lifting_refuses_an_unknown_cabinet_or_group_and_needs_the_key(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    shop = await add_cabinet(0)
    await _penalise(api_runtime, shop)
    missing = await api.delete(f"/api/v1/penalties/999/{FINANCE_EP.group}", headers=AUTH)
    assert missing.status_code == 404 and "999" in missing.json()["detail"]
    bad = await api.delete(f"/api/v1/penalties/{shop.id}/no-such-group", headers=AUTH)
    assert bad.status_code == 422
    [error] = bad.json()["errors"]
    assert error["field"] == "path.group" and "no limit group 'no-such-group'" in error["message"]
    assert GLOBAL_GROUP in error["message"]
    for method, path in (
        ("GET", "/api/v1/penalties"),
        ("DELETE", f"/api/v1/penalties/{shop.id}/{FINANCE_EP.group}"),
    ):
        assert (await api.request(method, path)).status_code == 401
    assert len(await _json(api, "/api/v1/penalties")) == 3  # nothing was lifted


async def test_metrics_count_penalties_per_group_until_lifted(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    shop = await add_cabinet(0)
    await _penalise(api_runtime, shop)

    async def gauges() -> dict[tuple[str, str], float]:
        reply = await api.get("/metrics", headers=AUTH)
        assert reply.status_code == 200
        wanted = {"wbsync_wb_penalties", "wbsync_wb_penalty_remaining_seconds"}
        return {
            (f.name, s.labels["group"]): s.value
            for f in text_string_to_metric_families(reply.text)
            if f.name in wanted
            for s in f.samples
        }

    during = await gauges()
    assert during[("wbsync_wb_penalties", GLOBAL_GROUP)] == 2
    assert during[("wbsync_wb_penalties", FINANCE_EP.group)] == 1
    # The longest of the group's penalties (the seller's: half the wait; the orphan's: a third).
    assert WAIT_MS / 3000 < during[("wbsync_wb_penalty_remaining_seconds", GLOBAL_GROUP)]
    assert during[("wbsync_wb_penalty_remaining_seconds", GLOBAL_GROUP)] <= WAIT_MS / 2000
    assert WAIT_MS / 2000 < during[("wbsync_wb_penalty_remaining_seconds", FINANCE_EP.group)]

    for group in (FINANCE_EP.group, GLOBAL_GROUP):
        reply = await api.delete(f"/api/v1/penalties/{shop.id}/{group}", headers=AUTH)
        assert reply.status_code == 200
    after = await gauges()
    assert after[("wbsync_wb_penalties", FINANCE_EP.group)] == 0
    assert after[("wbsync_wb_penalty_remaining_seconds", FINANCE_EP.group)] == 0
    assert after[("wbsync_wb_penalties", GLOBAL_GROUP)] == 1  # the orphan's is still there
    assert after[("wbsync_wb_penalty_remaining_seconds", GLOBAL_GROUP)] <= WAIT_MS / 3000


async def test_penalties_wb_gave_are_listed_with_its_words(
    api: httpx.AsyncClient,
    api_runtime: Runtime,
    api_emulator: Emulator,
    add_cabinet: AddCabinet,
) -> None:
    shop, other = await add_cabinet(0, name="shop-one"), await add_cabinet(1, name="shop-two")
    # WB answers a 429 asking for 10,000 of its seconds (50 s at the tests' scale): from the
    # method's limiter for one seller, from its global limiter for the other.
    rule = FaultRule(kind="rate_limit", method=COEFFICIENTS.name, retry_s=10_000)
    api_emulator.set_faults(
        [
            rule.model_copy(update={"seller": shop.seller_id}),
            rule.model_copy(update={"seller": other.seller_id, "kind": "global_limit"}),
        ]
    )
    for cabinet in (shop, other):
        with contextlib.suppress(RateLimitExceeded):  # past an on-demand read's ceiling
            await methods.acceptance_coefficients(api_runtime.client(cabinet))
    by_name = {p["cabinets"][0]["name"]: p for p in await _json(api, "/api/v1/penalties")}
    assert by_name.keys() == {"shop-one", "shop-two"}
    method, seller = by_name["shop-one"], by_name["shop-two"]
    assert method["group"] == COEFFICIENTS.group and "limited by " in method["words"]
    assert seller["group"] == GLOBAL_GROUP and seller["global_limiter"]
    assert "global limiter" in seller["words"]
    for penalty in (method, seller):
        assert 25_000 < penalty["remaining_ms"] <= 50_000


async def test_the_pages_lift_button_needs_the_key_and_returns_to_the_same_view(
    api: httpx.AsyncClient,
    api_runtime: Runtime,
    add_cabinet: AddCabinet,
    caplog: pytest.LogCaptureFixture,
) -> None:
    shop = await add_cabinet(0, name="shop-one")
    finance = await _penalise(api_runtime, shop)
    html = (await api.get("/", params={"state": "penalty"}, headers=AUTH)).text
    view = "state=penalty&sort=stuck&page=1&per_page=50"
    action = f"/lift/{shop.id}/{FINANCE_EP.group}?{view}"
    assert f'action="{action.replace("&", "&amp;")}"' in html
    assert (await api.post(action)).status_code == 401
    api.cookies.set(COOKIE, new_session(API_KEY))  # what the browser holds after /?key=
    with caplog.at_level(logging.INFO, logger="wbsync.cabinets.penalties"):
        reply = await api.post(action)
    assert reply.status_code == 303 and reply.headers["location"] == f"/?{view}"
    assert (await api_runtime.limiter.try_acquire(finance)).acquired
    [audit] = [r.getMessage() for r in caplog.records if r.name == "wbsync.cabinets.penalties"]
    assert "by a status-page session from " in audit
    again = await api.post(action)
    assert again.status_code == 404 and "has no penalty in force" in again.text
