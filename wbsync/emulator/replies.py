"""Replies in WB's shapes: JSON bodies and application/problem+json errors."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.responses import Response

__all__ = ["BadRequest", "json_reply", "problem"]

_STATUS_TEXT = {
    400: "Bad Request",
    401: "Unauthorized",
    402: "Payment Required",
    403: "Forbidden",
    404: "Not Found",
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
