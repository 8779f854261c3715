"""The HTTP API: auth on every route, validation, 404s, cabinets, triggers, live jobs, logs."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime

import httpx
import pytest
from fastapi import FastAPI

from tests.support.api import API_KEY, AUTH, SELLERS
from tests.support.waiting import wait_for
from wbsync.composition.workers import build_workers
from wbsync.emulator import Emulator
from wbsync.jobs.model import Outcome
from wbsync.observability.logs import configure_logging
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
from wbsync.system import clock

AddCabinet = Callable[..., Awaitable[Cabinet]]
PROBES = {"/healthz", "/readyz"}
FINANCE = "rnp-finance-sync"
# A finance window the tests close and never wait out (within the furthest a bucket may be
# pushed: an hour of WB time, 18 s at this scale).
CLOSED_MS = 15_000


def _routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, concrete path) of every route of the app, path parameters filled in."""
    out = [("GET", "/openapi.json"), ("GET", "/")]  # the two routes left out of the schema
    for path, operations in app.openapi()["paths"].items():
        path = path.replace("{cabinet_id}", "1").replace("{queue}", FINANCE)
        out += [(method.upper(), path) for method in operations]
    return out


async def test_every_route_but_the_probes_needs_a_valid_key(
    api: httpx.AsyncClient, add_cabinet: AddCabinet
) -> None:
    await add_cabinet()
    app = api._transport.app  # type: ignore[attr-defined]
    routes = _routes(app)
    assert len(routes) >= 14 and ("GET", "/") in routes and ("GET", "/metrics") in routes
    for method, path in routes:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY}):
            reply = await api.request(method, path, headers=headers, json={})
            if path in PROBES:
                assert reply.status_code == 200, (method, path)
                continue
            assert reply.status_code == 401, (method, path, headers)
            assert reply.headers["content-type"] == "application/problem+json"
            assert reply.json()["status"] == 401
            assert reply.headers["www-authenticate"].startswith("Bearer")
    assert (await api.get("/?key=wrong")).status_code == 401


async def test_validation_errors_are_422_naming_the_field(
    api: httpx.AsyncClient, add_cabinet: AddCabinet
) -> None:
    cabinet = await add_cabinet()
    cases = [
        ("POST", "/api/v1/cabinets", {"token": "x" * 40}, "body.name"),
        ("POST", "/api/v1/cabinets", {"name": "n", "token": "not-a-jwt"}, "body.token"),
        ("POST", "/api/v1/cabinets", {"name": "n", "token": "t", "extra": 1}, "body.extra"),
        ("GET", "/api/v1/cabinets/abc", None, "path.cabinet_id"),
        ("GET", f"/api/v1/cabinets/{cabinet.id}/wb/goods?limit=0", None, "query.limit"),
        ("GET", f"/api/v1/cabinets/{cabinet.id}/wb/adverts?status=x", None, "query.status.0"),
        (
            "GET",
            f"/api/v1/cabinets/{cabinet.id}/wb/adverts?payment_type=z",
            None,
            "query.payment_type",
        ),
    ]
    for method, path, body, field in cases:
        reply = await api.request(method, path, json=body, headers=AUTH)
        assert reply.status_code == 422, (path, reply.text)
        problem = reply.json()
        assert reply.headers["content-type"] == "application/problem+json"
        assert field in [e["field"] for e in problem["errors"]], problem
        assert "x" * 40 not in reply.text  # the input (maybe a token) is not echoed


async def test_unknown_ids_are_404(
    api: httpx.AsyncClient, add_cabinet: AddCabinet, api_runtime: Runtime
) -> None:
    """A 404, and no dependency taken for down: a missing cabinet is not a failed database."""
    cabinet = await add_cabinet()
    missing = cabinet.id + 1000
    paths = [
        ("GET", f"/api/v1/cabinets/{missing}"),
        ("POST", f"/api/v1/cabinets/{missing}/deactivate"),
        ("GET", f"/api/v1/cabinets/{missing}/jobs"),
        ("GET", f"/api/v1/cabinets/{missing}/buckets"),
        ("POST", f"/api/v1/cabinets/{missing}/syncs/{FINANCE}"),
        ("POST", f"/api/v1/cabinets/{cabinet.id}/syncs/no-such-queue"),
        ("GET", f"/api/v1/cabinets/{missing}/wb/acceptance-coefficients"),
        ("GET", f"/api/v1/cabinets/{missing}/wb/goods"),
        ("GET", f"/api/v1/cabinets/{missing}/wb/adverts"),
        ("GET", "/no/such/route"),
    ]
    for method, path in paths:
        reply = await api.request(method, path, headers=AUTH)
        assert reply.status_code == 404, (path, reply.text)
        assert reply.json()["status"] == 404
    assert api_runtime.health.down_now() == []


async def test_cabinets_create_list_show_deactivate_never_return_the_token(
    api: httpx.AsyncClient, api_emulator: Emulator
) -> None:
    token = api_emulator.token(SELLERS[0])
    created = await api.post(
        "/api/v1/cabinets", json={"name": "shop", "token": token}, headers=AUTH
    )
    assert created.status_code == 201, created.text
    cabinet = created.json()
    assert cabinet["name"] == "shop" and cabinet["seller_id"] == SELLERS[0] and cabinet["active"]
    again = await api.post("/api/v1/cabinets", json={"name": "shop", "token": token}, headers=AUTH)
    assert again.status_code == 409
    listed = await api.get("/api/v1/cabinets", headers=AUTH)
    assert [c["id"] for c in listed.json()] == [cabinet["id"]]
    assert cabinet.pop("unserved") == {}  # the token serves every queue
    shown = await api.get(f"/api/v1/cabinets/{cabinet['id']}", headers=AUTH)
    assert shown.json() == cabinet
    off = await api.post(f"/api/v1/cabinets/{cabinet['id']}/deactivate", headers=AUTH)
    assert off.status_code == 200 and off.json()["active"] is False
    refused = await api.post(f"/api/v1/cabinets/{cabinet['id']}/syncs/{FINANCE}", headers=AUTH)
    assert refused.status_code == 409
    for reply in (created, again, listed, shown, off, refused):
        assert token not in reply.text and "token" not in reply.json()


async def test_buckets_show_tokens_left_and_the_next_free_token(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    cabinet = await add_cabinet()
    scope = api_runtime.client(cabinet).scope(FINANCE_DETAILED_REPORT)
    penalized_at_ms = clock.now_ms()
    await api_runtime.limiter.penalize(scope, 2000)
    reply = await api.get(f"/api/v1/cabinets/{cabinet.id}/buckets", headers=AUTH)
    elapsed_ms = clock.now_ms() - penalized_at_ms
    assert reply.status_code == 200
    buckets = {b["group"]: b for b in reply.json()}
    assert set(buckets) >= {"finance.detailed_report", "prices", "tariffs.acceptance_coefficients"}
    finance = buckets["finance.detailed_report"]
    assert finance["tokens_left"] == 0
    assert 2000 - elapsed_ms - 1 <= finance["next_token_in_ms"] <= 2000
    assert finance["limit"] == {"period_s": 60.0, "limit": 1, "burst": 1, "time_scale": 0.005}
    prices = buckets["prices"]
    assert prices["tokens_left"] == prices["capacity"] == 5 and prices["next_token_in_ms"] == 0
    assert set(prices["methods"]) == {"prices.goods_list", "prices.upload_task"}


async def test_buckets_show_a_limit_learned_from_wb(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    cabinet = await add_cabinet()
    scope = api_runtime.client(cabinet).scope(FINANCE_DETAILED_REPORT)
    # WB showed one request per 90 s (450 ms at scale 0.005) where the table says 60 s.
    assert await api_runtime.limiter.learn(scope, seen_ms=450.0) is not None
    reply = await api.get(f"/api/v1/cabinets/{cabinet.id}/buckets", headers=AUTH)
    buckets = {b["group"]: b for b in reply.json()}
    learned = buckets["finance.detailed_report"]["learned"]
    assert learned["period_s"] == pytest.approx(90.0) and learned["burst"] == 1
    assert 0 < learned["expires_in_ms"] <= 3600 * 1000 * 0.005
    assert buckets["finance.detailed_report"]["limit"]["period_s"] == 60.0  # the table's
    assert buckets["prices"]["learned"] is None


async def test_trigger_while_live_is_409_and_a_delayed_job_shows_when_it_resumes(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    cabinet = await add_cabinet()
    path = f"/api/v1/cabinets/{cabinet.id}/syncs/{FINANCE}"
    first = await api.post(path, headers=AUTH)
    assert first.status_code == 202, first.text
    job_id = first.json()["job_id"]
    assert first.json() == {
        "job_id": job_id,
        "queue": FINANCE,
        "cabinet": str(cabinet.id),
        "state": "waiting",
    }
    second = await api.post(path, headers=AUTH)
    assert second.status_code == 409
    assert second.json()["job_id"] == job_id and job_id in second.json()["detail"]

    # The finance window is closed for a minute: the worker defers the job instead of sleeping
    # (the test never waits for the window, so the job stays delayed whatever the load).
    scope = api_runtime.client(cabinet).scope(FINANCE_DETAILED_REPORT)
    penalized_at_ms = clock.now_ms()
    await api_runtime.limiter.penalize(scope, CLOSED_MS)
    outcomes: list[Outcome] = []
    [worker] = build_workers(api_runtime, [FINANCE], concurrency=1, on_outcome=outcomes.append)
    await worker.start()
    try:
        await wait_for(_deferred(outcomes))
    finally:
        await worker.close()
    asked_at_ms = clock.now_ms()
    jobs = (await api.get(f"/api/v1/cabinets/{cabinet.id}/jobs", headers=AUTH)).json()
    answered_at_ms = clock.now_ms()
    [job] = jobs
    assert job["job_id"] == job_id and job["state"] == "delayed"
    # Deferred at least once (more is fine: each deferral records the scope that closed).
    assert job["deferrals"] >= 1 and job["deferred_by"] == "finance.detailed_report"
    # It resumes when the finance window opens, and resume_in_ms counts down to that time.
    resume_at_ms = datetime.fromisoformat(job["resume_at"]).timestamp() * 1000
    assert penalized_at_ms + CLOSED_MS - 1 <= resume_at_ms <= answered_at_ms + CLOSED_MS + 1000
    assert (
        resume_at_ms - answered_at_ms - 1 <= job["resume_in_ms"] <= resume_at_ms - asked_at_ms + 1
    )
    third = await api.post(path, headers=AUTH)
    assert third.status_code == 409 and third.json()["job_state"] == "delayed"


def _deferred(outcomes: list[Outcome]) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return any(o.outcome == "deferred" for o in outcomes)

    return check


async def test_probes_and_status_json(api: httpx.AsyncClient, add_cabinet: AddCabinet) -> None:
    await add_cabinet()
    assert (await api.get("/healthz")).json() == {"status": "ok"}
    ready = await api.get("/readyz")
    assert ready.status_code == 200 and ready.json()["checks"] == {"redis": True, "database": True}
    status = (await api.get("/api/v1/status", headers=AUTH)).json()
    assert set(status["queues"]) >= {FINANCE, "booking-slot-monitor"}
    assert [c["cabinet"]["name"] for c in status["cabinets"]] == ["cab-1"]


async def test_process_local_counters_say_they_are_this_processs(api: httpx.AsyncClient) -> None:
    """A standalone API runs no workers: its 0 reschedules must not read as the fleet's."""
    html = (await api.get("/", headers=AUTH)).text
    assert "deferrals (reschedules) by this process&#39;s workers" in html
    assert "429s from WB to this process" in html
    metrics = (await api.get("/metrics", headers=AUTH)).text
    family = "# HELP wbsync_rate_limit_reschedules_total "
    [help_line] = [line for line in metrics.splitlines() if line.startswith(family)]
    assert "a standalone `wbsync api`) counts none" in help_line


async def test_readyz_is_503_when_redis_is_gone(
    api: httpx.AsyncClient, api_runtime: Runtime
) -> None:
    working = api_runtime.redis
    api_runtime.redis = type(working).from_url("redis://127.0.0.1:1")  # nothing listens there
    try:
        reply = await api.get("/readyz")
    finally:
        await api_runtime.redis.aclose()
        api_runtime.redis = working
    assert reply.status_code == 503
    assert reply.json()["checks"] == {"redis": False, "database": True}


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    configure_logging("INFO", stream=stream)
    # The test's own client logs the URLs it calls; the server's lines are what is checked.
    client_log = logging.getLogger("httpx")
    client_level = client_log.level
    client_log.setLevel(logging.WARNING)
    yield stream
    client_log.setLevel(client_level)
    root.handlers[:] = handlers
    root.setLevel(level)


async def test_request_logs_carry_the_correlation_id_and_never_a_key_or_token(
    api: httpx.AsyncClient, api_emulator: Emulator, log_lines: io.StringIO
) -> None:
    token = api_emulator.token(SELLERS[1])
    created = await api.post(
        "/api/v1/cabinets",
        json={"name": "logged", "token": token},
        headers={**AUTH, "X-Request-ID": "req-42"},
    )
    assert created.headers["x-request-id"] == "req-42"
    cabinet_id = created.json()["id"]
    trigger = await api.post(f"/api/v1/cabinets/{cabinet_id}/syncs/{FINANCE}", headers=AUTH)
    made = trigger.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", made)
    forged = await api.get("/healthz", headers={"X-Request-ID": 'a"\nb'})
    assert forged.headers["x-request-id"] != 'a"\nb'
    await api.get(f"/?key={API_KEY}")
    bad = {"name": "bad", "token": token.replace(".", "!")}
    assert (await api.post("/api/v1/cabinets", json=bad, headers=AUTH)).status_code == 422
    text = log_lines.getvalue()
    assert API_KEY not in text and token not in text and "eyJ" not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines and all(line.get("correlation_id") for line in lines)
    mine = [line for line in lines if line["correlation_id"] == "req-42"]
    assert any(line.get("cabinet") == str(cabinet_id) for line in mine)
    triggered = [line for line in lines if line["correlation_id"] == made]
    assert any(line.get("queue") == FINANCE and line.get("job_id") for line in triggered)
