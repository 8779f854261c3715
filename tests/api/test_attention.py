"""What an operator sees of the cabinets WB refuses: the "needs attention" panel (status JSON
and HTML), ``GET /api/v1/attention``, the cabinets' state metrics, all gone after a lift, and
the panel's Resume button.

Real Redis, a real database per backend, the emulator's tokens; the app in process.
Suspensions are written through the store, as the jobs write them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.api import API_KEY, AUTH, SELLERS
from wbsync.api.attention import ATTENTION_SHOWN, EXPIRING_WITHIN_DAYS, Expiry, attention_out
from wbsync.api.auth import COOKIE, new_session
from wbsync.emulator import Emulator
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.store.suspensions import Suspension
from wbsync.wb.tokens import parse_token

REVOKED = "401 Unauthorized: token problem; token is revoked"
NO_MONEY = "402 Payment Required: insufficient funds on the balance"
LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)


async def _cabinet(
    runtime: Runtime, emulator: Emulator, i: int, name: str, lifetime: timedelta
) -> Cabinet:
    """A cabinet whose emulator token expires ``lifetime`` from now (in the past if negative)."""
    seller = SELLERS[i % len(SELLERS)]  # a seller may have more than one cabinet
    token = emulator.token(seller, lifetime=lifetime)
    expires = parse_token(token, now=LONG_AGO).expires_at
    return await runtime.store.cabinets.add(name, token, seller, token_expires_at=expires)


async def _refused_shop(runtime: Runtime, emulator: Emulator) -> dict[str, Cabinet]:
    """shop: revoked (the whole cabinet) and its content refused; lender: no balance for
    finance; soon: a token expiring in 3 days; old: an expired one; fine: nothing to see."""
    made = {
        "shop": await _cabinet(runtime, emulator, 0, "shop", timedelta(days=90)),
        "lender": await _cabinet(runtime, emulator, 1, "lender", timedelta(days=90)),
        "soon": await _cabinet(runtime, emulator, 2, "soon", timedelta(days=3)),
        "old": await _cabinet(runtime, emulator, 3, "old", timedelta(days=-1)),
        "fine": await _cabinet(runtime, emulator, 4, "fine", timedelta(days=90)),
    }
    probe = datetime.now(UTC) + timedelta(hours=6)
    suspend = runtime.store.suspended.suspend
    await suspend(made["shop"].id, None, kind="token", words=REVOKED, probe_at=probe)
    await suspend(made["shop"].id, "content", kind="category", words="scope", probe_at=probe)
    await suspend(made["lender"].id, "finance", kind="payment", words=NO_MONEY, probe_at=None)
    return made


async def _json(api: httpx.AsyncClient, path: str) -> Any:
    reply = await api.get(path, headers=AUTH)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _check_listed(attention: dict[str, Any], made: dict[str, Cabinet]) -> None:
    rows = [(s["cabinet"], s["section"], s["kind"]) for s in attention["suspensions"]]
    assert rows[0] == ("shop", None, "token")  # the whole cabinets first
    assert set(rows[1:]) == {("shop", "content", "category"), ("lender", "finance", "payment")}
    whole = attention["suspensions"][0]
    assert whole["cabinet_id"] == made["shop"].id and whole["words"] == REVOKED
    assert whole["lifts"] == ["new_token", "resume", "probe"] and whole["probe_at"]
    assert datetime.fromisoformat(whole["since"]) <= datetime.now(UTC)
    [payment] = [s for s in attention["suspensions"] if s["kind"] == "payment"]
    assert payment["words"] == NO_MONEY and payment["lifts"] == ["balance", "resume"]
    assert attention["suspensions_total"] == 3
    tokens = [(t["cabinet"], t["expired"]) for t in attention["tokens"]]
    assert tokens == [("old", True), ("soon", False)]  # the soonest first
    soon = attention["tokens"][1]
    assert 2 * 86400 < soon["remaining_s"] <= 3 * 86400
    assert attention["tokens"][0]["remaining_s"] == 0 and attention["tokens_total"] == 2
    assert attention["expiring_within_days"] == EXPIRING_WITHIN_DAYS


async def test_the_panel_and_the_route_list_suspensions_and_tokens_with_what_lifts_them(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    made = await _refused_shop(api_runtime, api_emulator)

    _check_listed(await _json(api, "/api/v1/attention"), made)
    _check_listed((await _json(api, "/api/v1/status"))["attention"], made)

    html = (await api.get("/", headers=AUTH)).text
    panel = html[html.index("<h2>Needs attention</h2>") : html.index("<h2>WB's penalties")]
    shop = made["shop"].id
    assert f"shop (#{shop})" in panel and "the whole cabinet" in panel and REVOKED in panel
    assert "section content" in panel and "section finance" in panel and NO_MONEY in panel
    assert f"wbsync cabinets token {shop}" in panel
    assert f"wbsync cabinets resume {shop} --section content" in panel
    assert f"POST /api/v1/cabinets/{shop}/resume" in panel and "the next probe, at" in panel
    assert "money on the WB balance" in panel
    assert f"old (#{made['old'].id})" in panel and "<b>expired</b>" in panel
    assert f"soon (#{made['soon'].id})" in panel
    assert '<td class="n">2 d 23 h</td>' in panel or '<td class="n">3 d 0 h</td>' in panel
    assert "fine (#" not in panel

    flagged = await _json(api, "/api/v1/status?state=needs-attention")
    names = {c["cabinet"]["name"] for c in flagged["cabinets"]}
    assert names == {"shop", "lender", "soon", "old"} and flagged["matched"] == 4


async def _gauges(api: httpx.AsyncClient) -> dict[tuple[str, str], float]:
    reply = await api.get("/metrics", headers=AUTH)
    assert reply.status_code == 200
    wanted = {
        "wbsync_cabinets",
        "wbsync_cabinet_sections_suspended",
        "wbsync_cabinet_token_least_remaining_seconds",
    }
    return {
        (s.name, s.labels.get("state") or s.labels.get("section") or ""): s.value
        for f in text_string_to_metric_families(reply.text)
        if f.name in wanted
        for s in f.samples
    }


async def test_metrics_count_cabinets_by_state_and_a_lift_clears_them(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    made = await _refused_shop(api_runtime, api_emulator)

    gauges = await _gauges(api)
    states = {k: v for (name, k), v in gauges.items() if name == "wbsync_cabinets"}
    assert states == {"active": 5, "expiring": 1, "expired": 1, "refused": 1}
    sections = "wbsync_cabinet_sections_suspended"
    assert gauges[(sections, "content")] == 1 and gauges[(sections, "finance")] == 1
    least = gauges[("wbsync_cabinet_token_least_remaining_seconds", "")]
    assert 2 * 86400 < least <= 3 * 86400  # soon's, not old's (expired)

    for cabinet in (made["shop"], made["lender"]):
        reply = await api.post(f"/api/v1/cabinets/{cabinet.id}/resume", headers=AUTH)
        assert reply.status_code == 200, reply.text

    attention = await _json(api, "/api/v1/attention")
    assert attention["suspensions"] == [] and attention["suspensions_total"] == 0
    gauges = await _gauges(api)
    assert gauges[("wbsync_cabinets", "refused")] == 0
    assert gauges[(sections, "content")] == 0 and gauges[(sections, "finance")] == 0


async def test_the_panels_resume_button_needs_the_key_and_returns_to_the_same_view(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    made = await _refused_shop(api_runtime, api_emulator)
    shop, old = made["shop"].id, made["old"].id
    await api_runtime.store.suspended.suspend(old, None, kind="expired", words=None, probe_at=None)
    html = (await api.get("/", params={"state": "needs-attention"}, headers=AUTH)).text
    view = "state=needs-attention&sort=stuck&page=1&per_page=50"
    whole, content = f"/resume/{shop}?{view}", f"/resume/{shop}?{view}&section=content"
    for action in (whole, content, f"/resume/{made['lender'].id}?{view}&section=finance"):
        assert f'action="{action.replace("&", "&amp;")}"' in html
    # An expired token's suspension is lifted by a new token only: no button.
    assert html.count('class="resume"') == 3 and f"/resume/{old}?" not in html

    assert (await api.post(content)).status_code == 401
    api.cookies.set(COOKIE, new_session(API_KEY))  # what the browser holds after /?key=
    reply = await api.post(content)
    assert reply.status_code == 303 and reply.headers["location"] == f"/?{view}"
    # The page's next read is afresh: the section is gone, the whole cabinet's stays.
    panel = (await _json(api, "/api/v1/status"))["attention"]
    rows = {(s["cabinet"], s["section"]) for s in panel["suspensions"]}
    assert rows == {("shop", None), ("lender", "finance"), ("old", None)}
    assert (await api.post(whole)).status_code == 303  # every suspension of the cabinet
    panel = (await _json(api, "/api/v1/status"))["attention"]
    assert {s["cabinet"] for s in panel["suspensions"]} == {"lender", "old"}
    assert (await api.post(whole)).status_code == 303  # nothing left to lift: back all the same
    missing = await api.post(f"/resume/999999?{view}")
    assert missing.status_code == 404 and "999999" in missing.text


async def test_a_new_token_takes_a_cabinet_off_the_panel(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    made = await _refused_shop(api_runtime, api_emulator)
    for name in ("shop", "old"):
        token = api_emulator.token(made[name].seller_id)
        reply = await api.put(
            f"/api/v1/cabinets/{made[name].id}/token", headers=AUTH, json={"token": token}
        )
        assert reply.status_code == 200, reply.text

    attention = await _json(api, "/api/v1/attention")
    assert [s["cabinet"] for s in attention["suspensions"]] == ["lender"]
    assert [t["cabinet"] for t in attention["tokens"]] == ["soon"]


async def test_a_deactivated_cabinet_needs_no_attention(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    made = await _refused_shop(api_runtime, api_emulator)
    for name in ("shop", "soon"):
        await api_runtime.store.cabinets.deactivate(made[name].id)

    attention = await _json(api, "/api/v1/attention")
    assert [s["cabinet"] for s in attention["suspensions"]] == ["lender"]
    assert [t["cabinet"] for t in attention["tokens"]] == ["old"]
    gauges = await _gauges(api)
    assert gauges[("wbsync_cabinets", "active")] == 3
    assert gauges[("wbsync_cabinets", "refused")] == 0
    assert gauges.get(("wbsync_cabinet_sections_suspended", "content"), 0) == 0


def _suspension(i: int, section: str | None) -> Suspension:
    since = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=i)
    return Suspension(i, f"cab-{i}", section, "token", "x", since, None)


def test_a_page_shows_the_first_rows_and_counts_the_rest() -> None:
    now = datetime(2026, 6, 1, tzinfo=UTC)
    many = ATTENTION_SHOWN * 2
    suspensions = [_suspension(i, "finance" if i % 2 else None) for i in range(many)]
    expiries: list[Expiry] = [(i, f"cab-{i}", now + timedelta(hours=i - 10)) for i in range(many)]
    expiries.append((many, "unknown", None))

    shown = attention_out(suspensions, expiries, now, shown=ATTENTION_SHOWN)
    assert len(shown.suspensions) == ATTENTION_SHOWN and shown.suspensions_total == many
    assert all(s.section is None for s in shown.suspensions)  # the whole cabinets first
    assert len(shown.tokens) == ATTENTION_SHOWN and shown.tokens_total == many
    assert all(t.expired for t in shown.tokens[:11])  # the expired first
    assert not shown.tokens[11].expired and shown.tokens[11].remaining_s == 3600
    assert len(attention_out(suspensions, expiries, now).tokens) == many  # the route's: all
