"""WB's own words in a reply, whichever shape WB wrote them in, made safe to show anywhere.

WB answers errors in several shapes (``docs/failures.md``): ``application/problem+json``
(``title``, ``detail``), ``{"error": "..."}``, ``{"errors": ["..."]}``, ``{"error": true,
"errorText": "..."}`` (sometimes with a 200), ``{"message": "..."}``, plain text, or an HTML page
on some 5xx. :func:`wb_words` reads them all into one line: HTML reduced to its text, whitespace
collapsed, control characters removed, anything that looks like a token masked, and at most
``WORDS_MAX_CHARS`` characters (:func:`wbsync.ratelimit.words.clean_words`, the one cleaning
of WB's text, which the limiter's penalty records share). The line goes into exception
messages, failure reasons, the run record, the status page and logs, so it must never carry a
secret nor a whole page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

import orjson

from wbsync.ratelimit.words import clean_words

__all__ = ["body_text", "wb_words", "words_in_json"]

_HIDDEN = re.compile(r"(?is)<(script|style|head)\b.*?</\1\s*>|<!--.*?-->")
_TAG = re.compile(r"(?s)<[^>]*>")
_BODY = re.compile(r"(?is)<body\b[^>]*>(.*?)(?:</body\s*>|$)")
_TITLE = re.compile(r"(?is)<title\b[^>]*>(.*?)</title\s*>")
# Keys of a JSON error object that hold WB's words, in the order they are read.
_TEXT_KEYS = ("errorText", "message", "error_description", "errorMessage")


def wb_words(status: int, headers: Mapping[str, str], content: bytes) -> str | None:
    """WB's words in a reply (status, headers, body bytes), cleaned; None when it said nothing.

    A 2xx only has words when its body is an error object (``{"error": true, "errorText":
    ...}``, ``{"error": "..."}``, a problem); any other reply's body is WB's words whatever its
    shape: a JSON error object's message, an HTML page's text, plain text.
    """
    text = content.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    success = 200 <= status < 300
    data = _json(content)
    if data is not _NOT_JSON:
        words = words_in_json(data, error_only=success)
        if words is not None or success:
            return words
        return clean_words(text)  # an object of no shape we know: as it is, bounded
    return None if success else body_text(headers, content)


def body_text(headers: Mapping[str, str], content: bytes) -> str | None:
    """A body that is not JSON as words: an HTML page's text, or the text as it is; cleaned."""
    text = content.decode("utf-8", errors="replace")
    return clean_words(_html_text(text) if _is_html(headers, text) else text)


def words_in_json(data: Any, *, error_only: bool = False) -> str | None:
    """WB's words in a parsed JSON body, cleaned; None when it holds none.

    With ``error_only`` (a 2xx body) only an error object speaks: ``error`` true or a string,
    ``errors``, or a problem (``title`` with ``detail`` or ``status``); data never does.
    """
    if isinstance(data, str):
        return None if error_only else clean_words(data)
    if isinstance(data, list):
        return None if error_only else clean_words(_joined(data))
    if not isinstance(data, dict):
        return None
    if error_only and not _is_error_object(data):
        return None
    return clean_words(_object_words(data))


_NOT_JSON = object()


def _json(content: bytes) -> Any:
    try:
        return orjson.loads(content)
    except ValueError:
        return _NOT_JSON


def _is_error_object(data: Mapping[str, Any]) -> bool:
    error = data.get("error")
    if error is True or (isinstance(error, str) and error):
        return True
    if data.get("errors"):
        return True
    return "title" in data and ("detail" in data or "status" in data)


def _object_words(data: Mapping[str, Any]) -> str | None:
    """The message of one JSON error object, in any of WB's shapes."""
    title, detail = data.get("title"), data.get("detail")
    if isinstance(title, str) and title and isinstance(detail, str) and detail:
        return title if detail == title else f"{title}: {detail}"
    error = data.get("error")
    if isinstance(error, str) and error:
        return error
    if isinstance(error, dict):
        return _object_words(error)
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        return _joined(errors)
    if isinstance(errors, str) and errors:
        return errors
    for key in _TEXT_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    for value in (detail, title):
        if isinstance(value, str) and value:
            return value
    return None


def _joined(items: list[Any]) -> str:
    parts = []
    for item in items:
        if isinstance(item, dict):
            part = _object_words(item)
        else:
            part = item if isinstance(item, str) else orjson.dumps(item).decode()
        if part:
            parts.append(part)
    return "; ".join(parts)


def _is_html(headers: Mapping[str, str], text: str) -> bool:
    if "html" in headers.get("Content-Type", "").lower():
        return True
    start = text[:200].lower()
    return start.startswith("<!doctype html") or "<html" in start


def _html_text(page: str) -> str:
    """A page's visible text: its body's (its title's when the body has none)."""
    title = _TITLE.search(page)
    body = _BODY.search(page)
    text = body.group(1) if body else _HIDDEN.sub(" ", page)
    text = html.unescape(_TAG.sub(" ", _HIDDEN.sub(" ", text)))
    if not text.strip() and title:
        text = html.unescape(_TAG.sub(" ", title.group(1)))
    return text
