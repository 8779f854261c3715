"""Replies in WB's shapes: JSON bodies, application/problem+json errors, and the other shapes
WB's errors come in (``shaped``)."""

from __future__ import annotations

import html
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.responses import Response

__all__ = ["BadRequest", "json_reply", "problem", "shaped"]

_STATUS_TEXT = {
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
    409: "Conflict",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

ORIGIN = "s2s-api-auth-catalog"


class BadRequest(Exception):
    """A handler refuses the request's parameters (400, WB-style body)."""

    def __init__(self, detail: str, title: str = "invalid payload") -> None:
        super().__init__(detail)
        self.detail = detail
        self.title = title


def json_reply(body: Any, status: int = 200) -> Response:
    """A JSON reply with WB's field names kept as they are (and Cyrillic unescaped).

    Written by orjson: WB's side of a benchmark runs on the same cores as wbsync, and the
    standard json took ten times as long over a finance page (82 KB). An integer past 64 bits,
    which orjson refuses, goes through the standard json."""
    try:
        data = orjson.dumps(body)
    except orjson.JSONEncodeError:
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    return Response(data, status_code=status, media_type="application/json")


def problem(
    status: int, title: str, detail: str, request_id: str, *, origin: str = ORIGIN
) -> Response:
    """An ``application/problem+json`` reply like WB's gateway sends (401, 403, 429, 5xx)."""
    body = {
        "title": title,
        "detail": detail,
        "code": f"{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:12]}-[UK-{uuid.uuid4().hex[:11]}]",
        "requestId": request_id,
        "origin": origin,
        "status": status,
        "statusText": _STATUS_TEXT.get(status, "Error"),
        "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    data = json.dumps(body, ensure_ascii=False).encode()
    return Response(data, status_code=status, media_type="application/problem+json")


def shaped(
    status: int, shape: str, words: str, request_id: str, *, title: str | None = None
) -> Response:
    """An error reply of ``status`` in one of WB's shapes (``config.BodyShape``) saying
    ``words``: problem+json (``title``, else the status's text, and ``words`` as detail),
    ``{"error": words}`` (promotion), ``{"errors": [words]}`` (statistics), ``{"error": true,
    "errorText": words}`` (content, prices), ``{"message": words}``, plain text, or an HTML page
    (a gateway's 5xx)."""
    reason = _STATUS_TEXT.get(status, "Error")
    if shape == "problem":
        return problem(status, title or reason.lower(), words, request_id)
    if shape == "text":
        return Response(words, status_code=status, media_type="text/plain")
    if shape == "html":
        head = f"{status} {reason}"
        page = (
            f"<html><head><title>{head}</title><style>body {{ margin: 0 }}</style></head>"
            f"<body>\r\n<center><h1>{head}</h1></center>\r\n<p>{html.escape(words)}</p>"
            "\r\n<hr><center>nginx</center>\r\n</body></html>\r\n"
        )
        return Response(page, status_code=status, media_type="text/html")
    bodies: dict[str, dict[str, Any]] = {
        "error": {"error": words},
        "errors": {"errors": [words]},
        "error_text": {
            "data": None,
            "error": True,
            "errorText": words,
            "additionalErrors": None,
            "requestId": request_id,
        },
        "message": {"message": words},
    }
    return json_reply(bodies[shape], status=status)
