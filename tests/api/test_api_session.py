"""The status page's session cookie: signed, never the key, expiring, Secure over HTTPS."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.support.api import API_KEY
from wbsync.api import create_app
from wbsync.api.auth import COOKIE, SESSION_TTL_S, new_session, session_matches
from wbsync.shared.runtime import Runtime

SQLITE_ONLY = pytest.mark.parametrize("db_backend", ["sqlite"], indirect=True)


def _client(runtime: Runtime, base: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(runtime)), base_url=base)


@SQLITE_ONLY
async def test_the_key_is_traded_for_a_signed_expiring_cookie(api_runtime: Runtime) -> None:
    async with _client(api_runtime, "http://wbsync.test") as api:
        reply = await api.get(f"/?key={API_KEY}")
        assert reply.status_code == 303 and reply.headers["location"] == "/"
        assert reply.headers["cache-control"] == "no-store"
        cookie = reply.headers["set-cookie"]
        value = reply.cookies[COOKIE]
        assert API_KEY not in cookie and API_KEY not in value
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", f"max-age={SESSION_TTL_S}", "path=/"} <= attributes
        assert "secure" not in attributes  # plain HTTP: a Secure cookie would never come back

        api.cookies.clear()  # each request below sends exactly the cookie it names
        page = await api.get("/", headers={"Cookie": f"{COOKIE}={value}"})
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        for forged in (API_KEY, value[:-1] + ("0" if value[-1] != "0" else "1"), "1.x", ""):
            sent = {"Cookie": f"{COOKIE}={forged}"}
            assert (await api.get("/", headers=sent)).status_code == 401


@SQLITE_ONLY
async def test_over_https_the_cookie_is_secure(api_runtime: Runtime) -> None:
    async with _client(api_runtime, "https://wbsync.test") as api:
        reply = await api.get(f"/?key={API_KEY}")
    assert reply.status_code == 303
    assert "secure" in {p.strip().lower() for p in reply.headers["set-cookie"].split(";")}


def test_a_session_lapses_and_dies_with_its_key() -> None:
    now = time.time()
    value = new_session(API_KEY, now=now)
    assert session_matches(value, [API_KEY], now=now + SESSION_TTL_S - 1)
    assert not session_matches(value, [API_KEY], now=now + SESSION_TTL_S + 1)
    assert not session_matches(value, ["another-key-" + "x" * 32], now=now)
