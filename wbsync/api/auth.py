"""API keys: a bearer header on every route but the probes; the status page also takes a cookie.

Keys come from ``WBSYNC_API_KEYS`` and are compared in constant time. A key is never logged:
the access log writes the path without its query string, and no error message repeats a key.

The status page is for browsers, which cannot send a bearer header by themselves: opening
``/?key=<key>`` once answers with a redirect to ``/`` that sets a session cookie, so the key
leaves the address bar and the page's refreshes carry the cookie. The cookie holds no key: it is
``<expiry>.<HMAC-SHA256 of the expiry under the key>``, so it lapses after ``SESSION_TTL_S``, and
removing the key from ``WBSYNC_API_KEYS`` ends its sessions. It is HttpOnly, SameSite=Strict, and
Secure when the page is served over HTTPS. The cookie is honoured by the page only; every other
route still needs the header.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Sequence

from fastapi import Request

from wbsync.api.problems import Problem
from wbsync.config import Settings
from wbsync.errors import ConfigError

__all__ = [
    "COOKIE",
    "SESSION_TTL_S",
    "api_keys",
    "bearer_key",
    "caller_of",
    "key_matches",
    "new_session",
    "require_key",
    "require_page_key",
    "session_matches",
    "unauthorized",
]

COOKIE = "wbsync_session"
# A status-page session lasts a working day; then the page asks for ?key= again.
SESSION_TTL_S = 12 * 3600
_SESSION_CONTEXT = b"wbsync status page session v1|"


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


def _session_mac(key: str, expires: int) -> str:
    return hmac.new(
        key.encode(), _SESSION_CONTEXT + str(expires).encode(), hashlib.sha256
    ).hexdigest()


def new_session(key: str, *, now: float | None = None) -> str:
    """A session cookie value for a caller who showed ``key``: ``<expiry>.<mac>``, no key."""
    expires = int(time.time() if now is None else now) + SESSION_TTL_S
    return f"{expires}.{_session_mac(key, expires)}"


def session_matches(value: str, keys: Sequence[str], *, now: float | None = None) -> bool:
    """True if ``value`` is an unexpired session made with one of ``keys`` (constant time)."""
    expires_text, _, mac = value.partition(".")
    if not expires_text.isdigit() or len(expires_text) > 12:
        return False
    expires = int(expires_text)
    if expires <= (time.time() if now is None else now):
        return False
    found = False
    for key in keys:
        found |= hmac.compare_digest(mac.encode(), _session_mac(key, expires).encode())
    return found


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


def caller_of(request: Request) -> str:
    """Who sent a request, for an audit line: which configured key (its place in
    WBSYNC_API_KEYS, never the key) or the page's session, and from which address."""
    given, keys = _bearer(request), _keys(request)
    if given is not None:
        places = [n for n, key in enumerate(keys, 1) if key_matches(given, [key])]
        who = f"API key #{places[0]} of WBSYNC_API_KEYS" if places else "an unknown key"
    else:
        who = "a status-page session"
    host = request.client.host if request.client else "an unknown address"
    return f"{who} from {host}"


def require_key(request: Request) -> None:
    """Dependency: the request carries a valid bearer key, else 401."""
    given = _bearer(request)
    if given is None or not key_matches(given, _keys(request)):
        raise unauthorized()


def require_page_key(request: Request) -> None:
    """Dependency of the status page: a valid bearer key or session cookie, else 401."""
    given, session = _bearer(request), request.cookies.get(COOKIE)
    if given is not None:
        ok = key_matches(given, _keys(request))
    else:
        ok = session is not None and session_matches(session, _keys(request))
    if not ok:
        problem = unauthorized()
        problem.detail = "open /?key=<API key> once (it sets a cookie), or send a bearer key"
        raise problem
