"""The emulator's own behaviour over real HTTP: auth, 429s, counters, reset, faults, data."""

from __future__ import annotations

import math
import random
import time
from collections.abc import AsyncIterator, Awaitable
from datetime import date, timedelta

import httpx
import pytest

from tests.support.waiting import wait_for
from tests.support.wb import ANCHOR, SELLER_A, SELLER_B
from wbsync.emulator import (
    EmulatorConfig,
    FaultRule,
    LimitSpec,
    ReplyLatency,
    expected_rows,
    running_emulator,
)
from wbsync.emulator.buckets import Buckets
from wbsync.emulator.server import Emulator
from wbsync.emulator.wbdocs import Rate
from wbsync.wb.tokens import Category, TokenType, mint_token

FINANCE = "/api/finance/v1/sales-reports/detailed"
FIN_BODY = {"dateFrom": "2026-07-01", "dateTo": "2026-08-17", "limit": 5}
PROBLEM_KEYS = {
    "title",
    "detail",
    "code",
    "requestId",
    "origin",
    "status",
    "statusText",
    "timestamp",
}


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": token}


@pytest.fixture
async def minute_http() -> AsyncIterator[tuple[Emulator, httpx.AsyncClient]]:
    """An emulator whose finance window (3 s at scale 0.05) outlasts two back-to-back requests
    however busy the machine, and a plain HTTP client of it."""
    config = EmulatorConfig(time_scale=0.05, anchor_date=ANCHOR)
    async with running_emulator(config) as emu:
        async with httpx.AsyncClient(base_url=emu.base_url, timeout=10.0) as http:
            yield emu, http


@pytest.mark.parametrize(
    "header",
    [None, "garbage", "a.b.c", "expired", "foreign"],
)
async def test_bad_tokens_get_401_problem(
    emulator: Emulator, emu_http: httpx.AsyncClient, header: str | None
) -> None:
    if header == "expired":
        header = emulator.token(SELLER_A, lifetime=timedelta(seconds=-5))
    elif header == "foreign":
        header = mint_token(key="not-the-emulator-key-0123456789abcdef", seller_id=SELLER_A)
    headers = _auth(header) if header else {}
    resp = await emu_http.post(FINANCE, json=FIN_BODY, headers=headers)
    assert resp.status_code == 401
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert PROBLEM_KEYS <= body.keys()
    assert body["title"] == "unauthorized" and body["detail"].startswith("token problem; ")
    assert body["requestId"] == resp.headers["X-Request-Id"]
    assert emulator.counters.total(seller=SELLER_A) == 0
    # WB: every status but 429 says what is left; a token naming no seller spends nothing, so
    # the finance method's whole burst.
    assert resp.headers["X-Ratelimit-Remaining"] == "1"


async def test_wrong_category_gets_401_and_disallowed_type_403(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    token = emulator.token(SELLER_A, categories=[Category.CONTENT])
    resp = await emu_http.post(FINANCE, json=FIN_BODY, headers=_auth(token))
    # WB's status table: 401 when the token's category does not match the method's.
    assert resp.status_code == 401 and resp.json()["title"] == "unauthorized"
    assert "finance" in resp.json()["detail"]
    # Every reply but a 429 says what is left of the seller's bucket (untouched: full).
    assert resp.headers["X-Ratelimit-Remaining"] == "1"
    base = emulator.token(SELLER_A, token_type=TokenType.BASE, categories=[Category.ANALYTICS])
    resp = await emu_http.post(
        "/api/analytics/v1/stocks-report/wb-warehouses", json={}, headers=_auth(base)
    )
    assert resp.status_code == 403 and "base token" in resp.json()["detail"]


async def test_429_carries_wb_headers_and_problem_body(
    minute_http: tuple[Emulator, httpx.AsyncClient],
) -> None:
    emulator, emu_http = minute_http
    headers = _auth(emulator.token(SELLER_A))
    first = await emu_http.post(FINANCE, json=FIN_BODY, headers=headers)
    assert first.status_code == 200 and first.headers["X-Ratelimit-Remaining"] == "0"
    second = await emu_http.post(FINANCE, json=FIN_BODY, headers=headers)
    assert second.status_code == 429
    assert "X-Ratelimit-Remaining" not in second.headers
    # Scale 0.05: one request a minute refills in 3 s; fractional seconds in the headers.
    assert 0 < float(second.headers["X-Ratelimit-Retry"]) <= 3.0
    assert 0 < float(second.headers["X-Ratelimit-Reset"]) <= 3.0
    assert "." in second.headers["X-Ratelimit-Retry"] + second.headers["X-Ratelimit-Reset"]
    assert second.headers["X-Ratelimit-Limit"] == "1"
    body = second.json()
    assert PROBLEM_KEYS <= body.keys()
    assert body["title"] == "too many requests" and body["detail"].startswith("limited by ")
    assert body["status"] == 429 and body["statusText"] == "Too Many Requests"
    assert body["requestId"] == second.headers["X-Request-Id"]
    # A different seller has its own bucket.
    other = await emu_http.post(FINANCE, json=FIN_BODY, headers=_auth(emulator.token(SELLER_B)))
    assert other.status_code == 200


async def test_scale_one_headers_are_whole_seconds_and_overrides_apply() -> None:
    config = EmulatorConfig(
        limits={"prices": LimitSpec(period_s=6, limit=1, burst=2)}, anchor_date=ANCHOR
    )
    async with running_emulator(config) as emu, httpx.AsyncClient(base_url=emu.base_url) as http:
        headers = _auth(emu.token(SELLER_A))
        path, params = "/api/v2/list/goods/filter", {"limit": 1}
        started = time.monotonic()
        statuses = [(await http.get(path, params=params, headers=headers)) for _ in range(3)]
        elapsed_s = time.monotonic() - started
        assert [r.status_code for r in statuses] == [200, 200, 429]
        assert statuses[0].headers["X-Ratelimit-Remaining"] == "1"
        assert statuses[2].headers["X-Ratelimit-Limit"] == "2"
        # Whole seconds, rounded up: the next token is 6 s after the first request, the full
        # bucket 12 s after it; the third request came elapsed_s after the first.
        retry, reset = (
            int(statuses[2].headers[h]) for h in ("X-Ratelimit-Retry", "X-Ratelimit-Reset")
        )
        assert 6 - math.ceil(elapsed_s) <= retry <= 6
        assert 12 - math.ceil(elapsed_s) <= reset <= 12


async def test_counters_over_http_and_reset(
    minute_http: tuple[Emulator, httpx.AsyncClient],
) -> None:
    emulator, emu_http = minute_http
    headers = _auth(emulator.token(SELLER_A))
    await emu_http.post(FINANCE, json=FIN_BODY, headers=headers)
    await emu_http.post(FINANCE, json=FIN_BODY, headers=headers)
    snap = (await emu_http.get("/__emulator/counters")).json()
    fin = snap["sellers"][SELLER_A]["finance.detailed_report"]
    assert fin["requests"] == 2 and fin["rate_limited"] == 1
    assert fin["status"] == {"200": 1, "429": 1}
    assert snap["total"] == {"requests": 2, "rate_limited": 1, "faults": 0}
    assert (await emu_http.post("/__emulator/reset")).status_code == 200
    assert (await emu_http.get("/__emulator/counters")).json()["total"]["requests"] == 0
    # The bucket was reset too: the next call is served at once.
    assert (await emu_http.post(FINANCE, json=FIN_BODY, headers=headers)).status_code == 200


async def test_count_faults_hit_the_next_n_requests(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    rules = [{"kind": "error", "method": "prices.goods_list", "count": 2, "status": 503}]
    assert (await emu_http.post("/__emulator/faults", json={"rules": rules})).status_code == 200
    headers = _auth(emulator.token(SELLER_A))
    got = [
        (await emu_http.get("/api/v2/list/goods/filter", params={"limit": 1}, headers=headers))
        for _ in range(3)
    ]
    assert [r.status_code for r in got] == [503, 503, 200]
    assert got[0].headers["content-type"].startswith("application/problem+json")
    counters = emulator.counters.snapshot()["sellers"][SELLER_A]["prices.goods_list"]
    assert counters["faults"] == 2
    assert (await emu_http.get("/__emulator/faults")).json()["rules"][0]["left"] == 0


async def test_injected_429_has_scaled_retry(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    emulator.set_faults([FaultRule(kind="rate_limit", count=1, retry_s=30)])
    headers = _auth(emulator.token(SELLER_A))
    resp = await emu_http.get("/api/v2/list/goods/filter", params={"limit": 1}, headers=headers)
    assert resp.status_code == 429 and resp.headers["X-Ratelimit-Retry"] == "0.03"
    assert resp.json()["title"] == "too many requests"


async def test_malformed_dropped_and_slow_replies(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    headers = _auth(emulator.token(SELLER_A))
    path, params = "/api/v2/list/goods/filter", {"limit": 1}
    emulator.set_faults([FaultRule(kind="malformed", count=1)])
    resp = await emu_http.get(path, params=params, headers=headers)
    with pytest.raises(ValueError):
        resp.json()
    emulator.set_faults([FaultRule(kind="drop", count=1)])
    with pytest.raises(httpx.TransportError):
        await emu_http.get(path, params=params, headers=headers)
    emulator.set_faults([FaultRule(kind="slow", count=1, delay_ms=150)])
    started = time.monotonic()
    assert (await emu_http.get(path, params=params, headers=headers)).status_code == 200
    assert time.monotonic() - started >= 0.15


async def test_share_faults_repeat_with_the_same_seed(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    headers = _auth(emulator.token(SELLER_A))
    # A bucket large enough that only the faults decide.
    roomy = LimitSpec(period_s=60, limit=1, burst=100)
    emulator.change_limits({"tariffs.acceptance_coefficients": roomy})

    async def run() -> list[int]:
        rules = [{"kind": "error", "share": 0.5}]
        await emu_http.post("/__emulator/faults", json={"rules": rules, "seed": 7})
        return [
            (
                await emu_http.get("/api/tariffs/v1/acceptance/coefficients", headers=headers)
            ).status_code
            for _ in range(12)
        ]

    first = await run()
    emulator.reset(faults=False, counters=False, limits=False)
    assert await run() == first
    assert 500 in first and 200 in first


async def test_data_is_deterministic_and_served_over_http(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    fresh = expected_rows(emulator.config, SELLER_A, "content.cards_list")
    assert fresh == emulator.expected(SELLER_A, "content.cards_list")
    assert fresh != expected_rows(emulator.config, SELLER_B, "content.cards_list")
    over_http = await emu_http.get(
        "/__emulator/expected/content.cards_list", params={"seller": SELLER_A}
    )
    assert over_http.json() == fresh
    sized = EmulatorConfig(seller_sizes={SELLER_B: {"products": 3}}, anchor_date=ANCHOR)  # type: ignore[dict-item]
    assert len(expected_rows(sized, SELLER_B, "content.cards_list")) == 3


async def test_bids_are_remembered(emulator: Emulator, emu_http: httpx.AsyncClient) -> None:
    headers = _auth(emulator.token(SELLER_A))
    key = next(iter(emulator.state.seller(SELLER_A).bids))
    advert_id, nm_id, query = key
    item = {"advert_id": advert_id, "nm_id": nm_id, "norm_query": query, "bid": 321}
    resp = await emu_http.post("/adv/v0/normquery/bids", json={"bids": [item]}, headers=headers)
    assert resp.status_code == 200
    got = await emu_http.post(
        "/adv/v0/normquery/get-bids",
        json={"items": [{"advert_id": advert_id, "nm_id": nm_id}]},
        headers=headers,
    )
    row = next(b for b in got.json()["bids"] if b["norm_query"] == query)
    assert row["bid"] == 321 and row["bid_kopecks"] == 32100


async def test_token_route_issues_tokens_the_emulator_accepts(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    resp = await emu_http.post(
        "/__emulator/tokens", json={"seller": SELLER_A, "categories": ["tariffs"]}
    )
    assert resp.status_code == 400  # tariffs is not a category
    resp = await emu_http.post(
        "/__emulator/tokens",
        json={"seller": SELLER_A, "type": "service", "categories": ["content"]},
    )
    token = resp.json()["token"]
    ok = await emu_http.get("/api/tariffs/v1/acceptance/coefficients", headers=_auth(token))
    assert ok.status_code == 200 and ok.headers["X-Request-Id"]


async def test_unknown_path_is_wb_style_404(emu_http: httpx.AsyncClient) -> None:
    resp = await emu_http.get("/api/v9/nothing")
    assert resp.status_code == 404 and resp.json()["title"] == "path not found"


async def test_limits_change_at_run_time_and_back(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    headers = _auth(emulator.token(SELLER_A))
    path, params = "/api/v2/list/goods/filter", {"limit": 1}
    strict = {"period_s": 3600.0, "limit": 1, "burst": 1}
    changed = await emu_http.post("/__emulator/limits", json={"limits": {"prices": strict}})
    assert changed.status_code == 200
    assert changed.json()["changed"] == {"prices": strict}
    assert changed.json()["methods"]["prices.upload_task"]["limits"]["personal"] == strict
    replies = [await emu_http.get(path, params=params, headers=headers) for _ in range(2)]
    assert [r.status_code for r in replies] == [200, 429]
    assert replies[1].headers["X-Ratelimit-Limit"] == "1"
    # Scale 0.001: one token an hour comes back in 3.6 s.
    assert 1.0 < float(replies[1].headers["X-Ratelimit-Retry"]) <= 3.6
    # Per token type: Base tokens get their own number, the others keep WB's.
    per_type = {"base": {"period_s": 60.0, "limit": 1, "burst": 3}}
    await emu_http.post("/__emulator/limits", json={"limits": {"prices": per_type}})
    table = (await emu_http.get("/__emulator/limits")).json()["methods"]["prices.goods_list"]
    assert table["limits"]["base"]["burst"] == 3 and table["limits"]["personal"]["burst"] == 5
    cleared = await emu_http.delete("/__emulator/limits")
    assert cleared.json()["changed"] == {}
    # WB's own limit again: 10 per 6 s refills within milliseconds at this scale.
    await wait_for(
        lambda: _status(emu_http.get(path, params=params, headers=headers), 200), timeout_s=10
    )


async def _status(reply: Awaitable[httpx.Response], status: int) -> bool:
    return (await reply).status_code == status


async def test_bad_limit_changes_are_refused_with_the_reason(emu_http: httpx.AsyncClient) -> None:
    unknown = await emu_http.post(
        "/__emulator/limits", json={"limits": {"nope": {"period_s": 1, "limit": 1, "burst": 1}}}
    )
    assert unknown.status_code == 400 and "nope" in unknown.json()["detail"]
    zero = await emu_http.post(
        "/__emulator/limits", json={"limits": {"prices": {"period_s": 1, "limit": 0, "burst": 1}}}
    )
    assert zero.status_code == 400 and "limit" in zero.json()["detail"]
    assert (await emu_http.get("/__emulator/limits")).json()["changed"] == {}


def _arrivals(bucket: Buckets, times_ms: list[float]) -> list[bool]:
    rate = Rate(period_s=0.06, limit=1, burst=1)  # one token every 60 ms
    return [bucket.take("s", "g", rate, now=t / 1000.0).allowed for t in times_ms]


def test_the_bucket_keeps_the_debt_of_early_requests() -> None:
    """Early by 4 ms on every request (grace 10 ms): let through while the debt is within the
    grace, then refused; on time, or jittering around on time, never refused."""
    early = _arrivals(Buckets(grace_s=0.010), [60.0 * k - 4.0 * k for k in range(8)])
    assert early[:3] == [True, True, True] and not all(early)
    assert _arrivals(Buckets(grace_s=0.010), [60.0 * k for k in range(50)]) == [True] * 50
    jitter = [60.0 * k + (-4.0 if k % 2 else 4.0) for k in range(50)]
    assert _arrivals(Buckets(grace_s=0.010), jitter) == [True] * 50
    # A request early by more than the grace is refused outright.
    assert _arrivals(Buckets(grace_s=0.010), [0.0, 45.0]) == [True, False]


def test_reply_latency_is_a_seeded_long_tailed_draw() -> None:
    latency = ReplyLatency(median_ms=150, sigma=0.6, max_ms=1000)
    draws = [latency.draw_s(random.Random("x")) for _ in range(3)]
    assert draws[0] == draws[1] == draws[2]  # the same seed, the same delay
    rng = random.Random(1)
    sample = sorted(latency.draw_s(rng) * 1000 for _ in range(20_000))
    assert 140 < sample[len(sample) // 2] < 160  # the median
    assert 2.0 < sample[int(len(sample) * 0.9)] / 150 < 2.4  # the tail: p90 ~2.2x the median
    assert sample[-1] == 1000  # capped
    assert ReplyLatency().draw_s(rng) == 0.0  # none by default


async def test_every_reply_waits_out_the_configured_latency() -> None:
    fixed = ReplyLatency(median_ms=120, sigma=0)
    async with running_emulator(EmulatorConfig(anchor_date=ANCHOR, latency=fixed)) as emu:
        async with httpx.AsyncClient(base_url=emu.base_url, timeout=10.0) as http:
            headers = _auth(emu.token(SELLER_A))
            started = time.monotonic()
            reply = await http.get(
                "/api/v2/list/goods/filter", params={"limit": 1}, headers=headers
            )
            assert reply.status_code == 200
            assert time.monotonic() - started >= 0.12


#: The finance row's fields WB's OpenAPI (October 2026) declares as dates.
FINANCE_DATES = ("dateFrom", "dateTo", "createDate", "rrDate")
FINANCE_NULLABLE_DATES = ("fixTariffDateFrom", "fixTariffDateTo", "utdUcdDate")


async def test_finance_rows_read_as_wb_documents_them(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    """As clients generated from WB's October 2026 OpenAPI read the report: ``sellerPromo`` a
    number, the buyer's KPP and the UTD's number and date present, and a date is a date or
    null, never "" (which such a client refuses)."""
    headers = _auth(emulator.token(SELLER_A))
    body = {"dateFrom": "2026-07-01", "dateTo": "2026-08-17", "limit": 100_000}
    resp = await emu_http.post(FINANCE, json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    rows = resp.json()
    assert len(rows) >= 10
    for row in rows:
        assert isinstance(row["sellerPromo"], int | float), row["sellerPromo"]
        assert isinstance(row["buyerTaxRegistrationReasonCode"], str)
        assert isinstance(row["utdUcdNumber"], str)
        for name in FINANCE_NULLABLE_DATES:
            assert row.get(name) is None or date.fromisoformat(row[name]), (name, row.get(name))
        for name in FINANCE_DATES:
            assert row[name] != "", name
    # Both kinds of row occur: with and without a UTD, with and without a fixed tariff.
    assert {row["utdUcdDate"] is None for row in rows} == {True, False}
    assert {row["fixTariffDateFrom"] is None for row in rows} == {True, False}
    b2b = [row for row in rows if row["isB2b"]]
    assert b2b and all(len(row["buyerTaxRegistrationReasonCode"]) == 9 for row in b2b)


async def test_acceptance_coefficients_are_disabled_by_default_as_wb_documents() -> None:
    """WB documents the method as temporarily disabled: a default emulator answers it as a
    disabled method (404, WB's detail) and keeps it so after a reset; serve_disabled_in_docs
    serves it."""
    path = "/api/tariffs/v1/acceptance/coefficients"
    async with running_emulator(EmulatorConfig(anchor_date=ANCHOR)) as emu:
        async with httpx.AsyncClient(base_url=emu.base_url, timeout=10.0) as http:
            headers = _auth(emu.token(SELLER_A))
            off = await http.get(path, headers=headers)
            emu.reset()
            still = await http.get(path, headers=headers)
    for resp in (off, still):
        assert resp.status_code == 404 and resp.json()["title"] == "method is disabled"
    served = EmulatorConfig(anchor_date=ANCHOR, serve_disabled_in_docs=True)
    async with running_emulator(served) as emu:
        async with httpx.AsyncClient(base_url=emu.base_url, timeout=10.0) as http:
            on = await http.get(path, headers=_auth(emu.token(SELLER_A)))
    assert on.status_code == 200 and on.json()


async def test_the_global_limiter_refuses_every_method_of_the_seller_until_it_lifts(
    emulator: Emulator, emu_http: httpx.AsyncClient
) -> None:
    # 18,236 WB seconds (the longest penalty WB gave) at scale 0.001: 18.236 s, never waited.
    rule = FaultRule(kind="global_limit", seller=SELLER_A, count=1, retry_s=18_236, extends=True)
    emulator.set_faults([rule])
    headers = _auth(emulator.token(SELLER_A))
    goods = await emu_http.get("/api/v2/list/goods/filter", params={"limit": 1}, headers=headers)
    finance = await emu_http.post(FINANCE, json=FIN_BODY, headers=headers)
    for refused in (goods, finance):
        assert refused.status_code == 429
        assert 18.0 < float(refused.headers["X-Ratelimit-Retry"]) <= 18.236
        assert float(refused.headers["X-Ratelimit-Reset"]) <= 18.236
        assert "X-Ratelimit-Limit" in refused.headers
        assert "global limiter" in refused.json()["detail"]
    assert goods.json()["detail"] == finance.json()["detail"]  # one limiter, above the methods
    other = _auth(emulator.token(SELLER_B))
    assert (await emu_http.post(FINANCE, json=FIN_BODY, headers=other)).status_code == 200
    # A reset lifts it.
    await emu_http.post("/__emulator/reset", json={"buckets": True})
    assert (await emu_http.post(FINANCE, json=FIN_BODY, headers=headers)).status_code == 200
