"""API keys: a bearer header on every route but the probes; the status page also takes a cookie.

Keys come from ``WBSYNC_API_KEYS`` and are compared in constant time. A key is never logged:
the access log writes the path without its query string, and no error message repeats a key.

The status page is for browsers, which cannot send a bearer header by themselves: opening
``/?key=<key>`` once answers with a redirect to ``/`` that sets the key as an HttpOnly cookie
(SameSite=Lax), so the key leaves the address bar and the page's refreshes carry the cookie. The
cookie is honoured by the page only; every other route still needs the header.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from fastapi import Request

from wbsync.api.problems import Problem
from wbsync.config import Settings
from wbsync.errors import ConfigError

__all__ = [
    "COOKIE",
    "api_keys",
    "bearer_key",
    "key_matches",
    "require_key",
    "require_page_key",
    "unauthorized",
]

COOKIE = "wbsync_key"


def api_keys(settings: Settings) -> tuple[str, ...]:
    """The configured keys; ``ConfigError`` if there are none, so no API serves unguarded."""
    keys = settings.api_key_values()  # each at least API_KEY_MIN_LENGTH long (Settings checks)
    if not keys:
        raise ConfigError(
            "WBSYNC_API_KEYS: the HTTP API needs at least one API key: set "
            "WBSYNC_API_KEYS='[\"...\"]' (a JSON list of bearer keys, each made with "
            "`openssl rand -hex 32`)"
        )
    return keys


def key_matches(given: str, keys: Sequence[str]) -> bool:
    """True if ``given`` is one of ``keys``; every key is compared, each in constant time."""
    data = given.encode()
    found = False
    for key in keys:
        found |= hmac.compare_digest(data, key.encode())
    return found


def bearer_key(authorization: str) -> str | None:
    """The key of an ``Authorization: Bearer <key>`` header value, or None."""
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _bearer(request: Request) -> str | None:
    return bearer_key(request.headers.get("authorization", ""))


def unauthorized() -> Problem:
    """The 401 reply for a missing or wrong key."""
    return Problem(
        401,
        "unauthorized",
        "Unauthorized",
        "send an API key from WBSYNC_API_KEYS as 'Authorization: Bearer <key>'",
        headers={"WWW-Authenticate": 'Bearer realm="wbsync"'},
    )


def _keys(request: Request) -> tuple[str, ...]:
    keys: tuple[str, ...] = request.app.state.api_keys
    return keys


def require_key(request: Request) -> None:
    """Dependency: the request carries a valid bearer key, else 401."""
    given = _bearer(request)
    if given is None or not key_matches(given, _keys(request)):
        raise unauthorized()


def require_page_key(request: Request) -> None:
    """Dependency of the status page: a valid bearer key or cookie, else 401."""
    given = _bearer(request) or request.cookies.get(COOKIE)
    if given is None or not key_matches(given, _keys(request)):
        problem = unauthorized()
        problem.detail = "open /?key=<API key> once (it sets a cookie), or send a bearer key"
        raise problem
