"""Errors as RFC 9457 problem+json replies, and the mapping of wbsync's error tree to statuses.

=================================  ======  =============================================
error                              status  why
=================================  ======  =============================================
CabinetNotFoundError               404     unknown cabinet id
TokenError                         409     the stored token cannot call the method
RateLimitExceeded                  429     our own limiter: waiting would pass the ceiling
WbRateLimitedError                 429     WB kept answering 429
WbAuthError, WbPermissionError,    502     WB refused the cabinet's token; the reason is
WbPaymentRequiredError                     passed on (the caller's key was fine)
WbServerError, WbBadResponseError  502     WB failed, after the client's retries
WbRequestError                     502     WB rejected the request (another 4xx)
WbTransportError                   504     WB did not answer
StoreError                         503     the database failed (the detail names it, no
                                           more: the log has the driver's words)
QueueError, RedisUnavailableError  503     Redis failed (likewise)
ConfigError                        503     the server lacks a setting (e.g. the secret key)
RateLimitDeferred                  500     a bug: it must never leave a job; logged as one
anything else                      500
=================================  ======  =============================================
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from wbsync.errors import (
    CabinetNotFoundError,
    ConfigError,
    QueueError,
    RateLimitDeferred,
    RateLimitExceeded,
    RedisUnavailableError,
    StoreError,
    TokenError,
    WbApiError,
    WbAuthError,
    WbPaymentRequiredError,
    WbPermissionError,
    WbRateLimitedError,
    WbSyncError,
    WbTransportError,
)

__all__ = [
    "PROBLEM_JSON",
    "Problem",
    "install_handlers",
    "problem_for",
    "problem_response",
    "problems",
]

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
_TYPE = "urn:wbsync:problem:"


# The problem+json body every error reply has (RFC 9457), as /openapi.json documents it.
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "Problem",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "description": "urn:wbsync:problem:<code>"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "errors": {
            "type": "array",
            "description": "For 422: each invalid field and why (the input is not echoed).",
            "items": {
                "type": "object",
                "required": ["field", "message"],
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
            },
        },
    },
    "additionalProperties": True,
}

_WHY = {
    401: "Missing or wrong API key.",
    404: "No such cabinet, queue or route.",
    409: "Conflict: a live job, an inactive cabinet, a taken name, or a token that cannot call "
    "the method.",
    410: "A feed cursor below the dataset's low-water mark: resynchronise (docs/data.md).",
    413: "Request body over the limit (64 KiB).",
    422: "Invalid path, query or body value.",
    429: "Rate limit window too long to wait; see Retry-After.",
    502: "WB refused or failed.",
    503: "Redis or the database failed (the detail names which).",
    504: "WB did not answer.",
}


def problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a router or route: each status as a documented problem+json reply."""
    return {
        status: {"description": _WHY[status], "content": {PROBLEM_JSON: {"schema": PROBLEM_SCHEMA}}}
        for status in statuses
    }


class Problem(Exception):
    """An HTTP error reply: ``status``, a short ``code``, a human ``detail`` and extra members."""

    def __init__(
        self,
        status: int,
        code: str,
        title: str,
        detail: str,
        *,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra


def problem_response(problem: Problem) -> JSONResponse:
    """The problem+json reply for ``problem``."""
    body = {
        "type": _TYPE + problem.code,
        "title": problem.title,
        "status": problem.status,
        "detail": problem.detail,
        **problem.extra,
    }
    return JSONResponse(
        body, status_code=problem.status, headers=problem.headers, media_type=PROBLEM_JSON
    )


def retry_after(seconds: float | None) -> str:
    """A ``Retry-After`` value: whole seconds, rounded up, at least 1."""
    return str(max(1, math.ceil(seconds or 0.0)))


def _wb_problem(exc: WbApiError) -> Problem:
    extra: dict[str, Any] = {
        "wb_method": exc.method,
        "wb_status": exc.status,
        "wb_request_id": exc.request_id,
        "wb_words": exc.words,
    }
    if isinstance(exc, WbRateLimitedError):
        return Problem(
            429,
            "wb-rate-limited",
            "WB rate limit",
            str(exc),
            headers={"Retry-After": retry_after(exc.retry_after)},
            retry_after_s=exc.retry_after,
            **extra,
        )
    if isinstance(exc, WbAuthError | WbPermissionError | WbPaymentRequiredError):
        return Problem(502, "wb-refused-token", "WB refused the cabinet's token", str(exc), **extra)
    if isinstance(exc, WbTransportError):
        return Problem(504, "wb-no-answer", "WB did not answer", str(exc), **extra)
    return Problem(502, "wb-failed", "WB failed to answer", str(exc), **extra)


def dependency_of(exc: WbSyncError) -> str:
    """The dependency a ``StoreError``, ``QueueError`` or ``RedisUnavailableError`` names."""
    return "database" if isinstance(exc, StoreError) else "redis"


def problem_for(exc: WbSyncError) -> Problem:
    """The reply for one of our errors (see the module's table)."""
    if isinstance(exc, RateLimitExceeded):
        return Problem(
            429,
            "rate-limited",
            "Rate limit window",
            str(exc),
            headers={"Retry-After": retry_after(exc.retry_after)},
            retry_after_s=exc.retry_after,
            scope=exc.scope.group,
        )
    if isinstance(exc, WbApiError):
        return _wb_problem(exc)
    if isinstance(exc, CabinetNotFoundError):
        return Problem(404, "not-found", "Not found", str(exc))
    if isinstance(exc, TokenError):
        return Problem(409, "token-unusable", "The cabinet's token cannot do this", str(exc))
    if isinstance(exc, StoreError | QueueError | RedisUnavailableError):
        # The error's own text may hold a host, a driver message or a query: log it, send none.
        dependency = dependency_of(exc)
        # One WARNING per outage comes from wbsync.observability.health.
        log.debug("%s failed: %s", dependency, exc)
        return Problem(
            503,
            "unavailable",
            "A backing service failed",
            f"the {dependency} failed; the server's log has the details",
            dependency=dependency,
        )
    if isinstance(exc, ConfigError):
        # The server's fault, not the caller's: the log names the setting and what to do.
        log.error("misconfigured: %s", exc)
        return Problem(
            503,
            "misconfigured",
            "The server is misconfigured",
            "the server is missing a setting this request needs; its log says which",
        )
    if isinstance(exc, RateLimitDeferred):
        # A deferral is a job-layer signal; reaching a request means a context leaked into it.
        log.error("bug: RateLimitDeferred reached the HTTP layer: %s", exc)
    else:
        log.error("request failed: %s", exc, exc_info=exc)
    return Problem(500, "internal", "Internal error", "the server failed; see its log")


async def _on_problem(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Problem)
    return problem_response(exc)


async def _on_ours(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, WbSyncError)
    problem = problem_for(exc)
    dependency = problem.extra.get("dependency")
    if dependency is not None:  # a backing service failed, not the request (a missing cabinet)
        request.app.state.runtime.health.down(dependency, exc)
    return problem_response(problem)


async def _on_validation(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # The offending input is left out on purpose: it may be a WB token.
    errors = [
        {"field": ".".join(str(part) for part in err["loc"]), "message": err["msg"]}
        for err in exc.errors()
    ]
    fields = ", ".join(e["field"] for e in errors)
    return problem_response(
        Problem(422, "invalid-request", "Invalid request", f"invalid: {fields}", errors=errors)
    )


async def _on_http(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = {404: "not-found", 405: "method-not-allowed"}.get(exc.status_code, "http-error")
    title = str(exc.detail) if exc.detail else "HTTP error"
    return problem_response(
        Problem(exc.status_code, code, title, title, headers=dict(exc.headers or {}))
    )


def install_handlers(app: FastAPI) -> None:
    """Make every error of ``app`` a problem+json reply."""
    app.add_exception_handler(Problem, _on_problem)
    app.add_exception_handler(WbSyncError, _on_ours)
    app.add_exception_handler(RequestValidationError, _on_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http)
