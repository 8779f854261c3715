"""WB's replies read: a 2xx as a ``WbReply``, anything else as the error it is, with WB's words.

Only a 2xx is an answer: a 3xx is an unusable reply (redirects are not followed, and a
redirected write was not applied), and so is a body that is not JSON (or, for a method that
declares it, not a ZIP archive of one CSV file within its bounds: ``zipcsv.py``). A 4xx is a
refusal of the error type its status says (``_ERRORS``); a 5xx a server error. Every error
carries WB's request id (the header, else the body's) and WB's words (``words.py``), and an
unusable reply counts against the running job's failure budget. What the client does about each
(retries, penalties, a section stopped) is ``client.py``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from wbsync.errors import (
    WbApiError,
    WbAuthError,
    WbBadResponseError,
    WbMethodDisabledError,
    WbPaymentRequiredError,
    WbPermissionError,
    WbRequestError,
    WbServerError,
)
from wbsync.observability.context import report_upstream_failure
from wbsync.wb.endpoints import Endpoint
from wbsync.wb.http import HttpReply
from wbsync.wb.words import body_text, wb_words
from wbsync.wb.zipcsv import ZipCsvError, read_zip_csv

__all__ = [
    "WbReply",
    "json_or_none",
    "no_data_reply",
    "refusal",
    "request_id",
    "server_error",
    "success",
]

_ERRORS: dict[int, type[WbApiError]] = {
    401: WbAuthError,
    402: WbPaymentRequiredError,
    403: WbPermissionError,
    # Every path we call is a WB method: a 404 there means WB has switched the method off,
    # unless its words say the path does not exist (``stops.py``).
    404: WbMethodDisabledError,
}


@dataclass(frozen=True, slots=True)
class WbReply:
    """A successful reply: status, parsed JSON body (None when empty), WB's request id.

    ``no_data``: WB refused with words its method declares as "nothing to return"
    (``Endpoint.no_data``); the body is None and the status WB's (a 4xx).
    """

    status: int
    data: Any
    request_id: str | None
    remaining: int | None
    no_data: bool = False


def request_id(headers: Mapping[str, str], body: Any = None) -> str | None:
    """WB's request id: the ``X-Request-Id`` header, else the body's ``requestId``."""
    rid = headers.get("X-Request-Id")
    if rid:
        return rid
    if isinstance(body, dict):
        found = body.get("requestId") or body.get("request_id")
        return str(found) if found else None
    return None


def json_or_none(content: bytes) -> Any:
    """The body as JSON, or None when it is not JSON."""
    try:
        return orjson.loads(content)
    except ValueError:
        return None


def success(ep: Endpoint, reply: HttpReply, *, csv_bounds: tuple[int, int]) -> WbReply:
    """A reply below 400 as an answer; ``WbBadResponseError`` (counted against the job's
    failure budget) when it is not a 2xx or its body is not what ``ep.reply`` declares: JSON,
    or a ZIP archive of one CSV file within ``csv_bounds`` (its most bytes uncompressed and
    rows; ``zipcsv.py``), whose rows are the answer's ``data``."""
    status, content = reply.status, reply.content
    if not 200 <= status < 300:
        # A redirect is no answer: WB documents none, and a write sent there was not applied.
        what = f"WB answered {status} {reply.reason} instead of a result"
        raise _unusable(ep, reply, what, wb_words(status, reply.headers, content))
    data: Any = None
    if status != 204 and content and ep.reply == "zip-csv":
        most_bytes, most_rows = csv_bounds
        try:
            data = read_zip_csv(content, max_bytes=most_bytes, max_rows=most_rows)
        except ZipCsvError as exc:
            # WB's words when it sent an error object in place of the archive.
            raise _unusable(ep, reply, str(exc), wb_words(status, reply.headers, content)) from None
    elif status != 204 and content:
        try:
            data = orjson.loads(content)
        except ValueError:
            # A page in place of JSON (a proxy's, a portal's): its text says whose.
            words = body_text(reply.headers, content)
            raise _unusable(ep, reply, "WB answered a body that is not JSON", words) from None
    return WbReply(
        status=status,
        data=data,
        request_id=request_id(reply.headers, data),
        remaining=_remaining(reply.headers),
    )


def no_data_reply(reply: HttpReply, said: WbApiError) -> WbReply:
    """A refusal its method declares as "nothing to return", as the answer it is."""
    return WbReply(
        status=reply.status,
        data=None,
        request_id=said.request_id,
        remaining=_remaining(reply.headers),
        no_data=True,
    )


def refusal(ep: Endpoint, reply: HttpReply, rid: str | None, words: str | None) -> WbApiError:
    """The error of a 4xx (its type by status), naming the section it refused."""
    error_type = _ERRORS.get(reply.status, WbRequestError)
    message = "WB refused the request" + ("" if words else f": {reply.reason}")
    error = error_type(message, method=ep.name, status=reply.status, request_id=rid, words=words)
    error.section = ep.section.name  # what a refusal for good suspends (``refusals.py``)
    return error


def server_error(ep: Endpoint, reply: HttpReply) -> WbServerError:
    """The error of a 5xx, with WB's words."""
    rid = request_id(reply.headers, json_or_none(reply.content))
    words = wb_words(reply.status, reply.headers, reply.content)
    return WbServerError(
        "WB failed to answer", method=ep.name, status=reply.status, request_id=rid, words=words
    )


def _remaining(headers: Mapping[str, str]) -> int | None:
    remaining = headers.get("X-Ratelimit-Remaining")
    return int(remaining) if remaining and remaining.isdigit() else None


def _unusable(ep: Endpoint, reply: HttpReply, what: str, words: str | None) -> WbApiError:
    """An unusable reply, counted against the running job's failure budget."""
    bad = WbBadResponseError(
        what,
        method=ep.name,
        status=reply.status,
        request_id=request_id(reply.headers, json_or_none(reply.content)),
        words=words,
    )
    report_upstream_failure(bad)
    return bad
