"""The request context (correlation id, access line) and the guard in front of every body.

``BodyGuard``: a request body is read only from a caller holding an API key, and only up to
``MAX_BODY_BYTES``; both are checked before any route (or FastAPI's parsing) sees the request, so
an unauthenticated or oversized upload costs neither memory nor event-loop time.

The correlation id comes from an incoming ``X-Request-ID`` (when it is a sane token) or is made
here; it is set for the request's code (so every log line of the request carries it) and sent
back in the reply's ``X-Request-ID``. The access line names the path without its query string,
which may hold the status page's ``?key=``.
"""

from __future__ import annotations

import logging
import re

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wbsync.api.auth import bearer_key, key_matches, unauthorized
from wbsync.api.problems import Problem, problem_response
from wbsync.observability.context import correlation
from wbsync.system import clock

__all__ = ["HEADER", "MAX_BODY_BYTES", "BodyGuard", "RequestContext"]

log = logging.getLogger("wbsync.api.access")

HEADER = "X-Request-ID"
# Anything else is replaced: a client must not be able to forge log structure through it.
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

# The API takes names and tokens (a WB token is under 1 KiB); 64 KiB leaves room and no more.
MAX_BODY_BYTES = 64 * 1024
# No route reads a body sent with these, so a probe keeps answering whatever a client attaches.
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


def _too_large() -> Problem:
    return Problem(
        413,
        "too-large",
        "Request body too large",
        f"request bodies are limited to {MAX_BODY_BYTES} bytes",
        max_bytes=MAX_BODY_BYTES,
    )


class BodyGuard:
    """ASGI middleware: no key, no body read (401); a body past ``MAX_BODY_BYTES`` is 413.

    A request announcing a body (``Content-Length`` above 0, or chunked; GET, HEAD and OPTIONS
    aside, whose bodies no route reads) must carry a valid bearer key, since every route that
    takes a body needs one. A declared length over the limit
    is refused from the headers; a chunked body is counted while it is read and refused as soon
    as it passes the limit. The (small) body is then handed to the app in one piece.
    """

    def __init__(self, app: ASGIApp, *, keys: tuple[str, ...]) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        try:
            declared = int(headers.get("content-length", "0"))
        except ValueError:
            declared = 0
        if scope["method"] in _BODILESS or (not chunked and declared <= 0):
            await self.app(scope, receive, send)
            return
        given = bearer_key(headers.get("authorization", ""))
        problem: Problem | None = None
        if given is None or not key_matches(given, self.keys):
            problem = unauthorized()
        elif declared > MAX_BODY_BYTES:
            problem = _too_large()
        if problem is None:
            body, problem = await _read_body(receive)
        if problem is not None:  # the rest of the body is never read: close the connection
            problem.headers["Connection"] = "close"
            await problem_response(problem)(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)


async def _read_body(receive: Receive) -> tuple[bytes, Problem | None]:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            return b"", Problem(400, "incomplete", "Incomplete request", "the body was cut off")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return b"", _too_large()
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: only http.disconnect is left to wait for

    return replay


class RequestContext:
    """ASGI middleware: correlation id in, correlation id out, one log line per request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = Headers(scope=scope).get(HEADER)
        given = incoming if incoming and _SANE_ID.fullmatch(incoming) else None
        started = clock.monotonic()
        status = 0

        with correlation(given) as cid:

            async def send_with_id(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                    MutableHeaders(scope=message).append(HEADER, cid)
                await send(message)

            try:
                await self.app(scope, receive, send_with_id)
            except Exception:
                log.exception("unhandled error")
                if status:  # the reply has started; nothing more can be sent
                    raise
                problem = Problem(500, "internal", "Internal error", "the server failed")
                await problem_response(problem)(scope, receive, send_with_id)
            finally:
                log.info(
                    "%s %s %d %.1f ms",
                    scope["method"],
                    scope["path"],
                    status,
                    (clock.monotonic() - started) * 1000.0,
                )
