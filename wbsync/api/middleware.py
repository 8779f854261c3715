"""The request context: a correlation id for every request, and one access-log line each.

The id comes from an incoming ``X-Request-ID`` (when it is a sane token) or is made here; it is
set for the request's code (so every log line of the request carries it) and sent back in the
reply's ``X-Request-ID``. The access line names the path without its query string, which may
hold the status page's ``?key=``.
"""

from __future__ import annotations

import logging
import re

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wbsync import clock
from wbsync.api.problems import Problem, problem_response
from wbsync.context import correlation

__all__ = ["HEADER", "RequestContext"]

log = logging.getLogger("wbsync.api.access")

HEADER = "X-Request-ID"
# Anything else is replaced: a client must not be able to forge log structure through it.
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


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
