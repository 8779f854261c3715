"""One HTTP exchange with WB, on a shared aiohttp connection pool: the only module of wbsync
that knows aiohttp, so its exceptions are translated here and nowhere else.

An exchange is bounded as a whole: it must end, last body byte included, within the caller's
deadline (aiohttp's own timeouts are per read: a reply trickling a byte at a time never trips
them), and its body (decoded) is read as a stream no further than the caller's maximum, refused
unread when its ``Content-Length`` is already larger. Redirects are not followed: a 3xx comes
back as it is (the client makes it an unusable reply). Lost answers (refused, reset, cut short,
a malformed reply, the deadline) raise ``WbTransportError``; answers that cannot be used (a body
whose Content-Encoding does not decode, a URL aiohttp refuses) ``WbBadResponseError``; a body
past the maximum ``WbBodyTooLargeError``. Messages name the exception's type only: aiohttp's
texts may carry the request's headers, and with them the token.

A pool holds at most ``max_connections`` connections (``MAX_CONNECTIONS`` by default, for every
host together, idle ones kept alive); a request past that waits for a free one inside its own
deadline. ``wbsync.shared.runtime`` keeps one pool per process for every client of the process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp.http_exceptions import ContentEncodingError

from wbsync.errors import WbBadResponseError, WbBodyTooLargeError, WbTransportError

__all__ = ["MAX_CONNECTIONS", "HttpPool", "HttpReply"]

#: The most connections one pool (one process, by default) holds open to WB at once.
MAX_CONNECTIONS = 100
#: Bytes asked of the stream at a time when a body is read in pieces.
_CHUNK = 64 * 1024
#: Lost answers, retried by the client within its budget: refused, reset, a read or connect
#: timeout, a body cut short, a reply aiohttp could not parse (``ClientResponseError``: status
#: line, headers), as a malformed reply was a protocol error before.
_LOST = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError)


@dataclass(frozen=True, slots=True)
class HttpReply:
    """A reply read whole: status, reason, headers (case-insensitive) and the decoded body."""

    status: int
    reason: str
    headers: Mapping[str, str]
    content: bytes


def query(params: Mapping[str, Any] | None) -> list[tuple[str, str]] | None:
    """``params`` as URL query pairs: booleans as ``true``/``false``, None as empty, a list or
    tuple as the key repeated, anything else as ``str``."""
    if not params:
        return None
    pairs: list[tuple[str, str]] = []
    for key, value in params.items():
        for one in value if isinstance(value, list | tuple) else (value,):
            if isinstance(one, bool):
                pairs.append((key, "true" if one else "false"))
            else:
                pairs.append((key, "" if one is None else str(one)))
    return pairs


class HttpPool:
    """A pool of keep-alive connections to WB, made on first use (inside the event loop).

    ``aclose`` closes it; a closed pool refuses exchanges (``RuntimeError``).
    """

    def __init__(
        self,
        *,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    async def __aenter__(self) -> HttpPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every connection of the pool."""
        self._closed = True
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _open(self) -> aiohttp.ClientSession:
        if self._closed:
            raise RuntimeError("the HTTP pool is closed")
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections),
                timeout=aiohttp.ClientTimeout(total=None),
                # No cookies: WB's methods are stateless, and a cookie jar costs per request.
                cookie_jar=aiohttp.DummyCookieJar(),
            )
        return self._session

    async def exchange(
        self,
        method: str,
        url: str,
        *,
        name: str,
        params: Mapping[str, Any] | None,
        body: Any,
        headers: dict[str, str],
        deadline_s: float,
        read_timeout_s: float,
        max_body_bytes: int,
    ) -> HttpReply:
        """One request and its whole reply; ``name`` (WB's method) goes into every error."""
        session = self._open()
        data: bytes | None = None
        if body is not None:
            data = orjson.dumps(body)
            headers = headers | {"Content-Type": "application/json"}
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=read_timeout_s, sock_read=read_timeout_s
        )
        try:
            async with (
                asyncio.timeout(deadline_s),
                session.request(
                    method,
                    url,
                    params=query(params),
                    data=data,
                    headers=headers,
                    allow_redirects=False,
                    timeout=timeout,
                ) as response,
            ):
                content = await _body(name, response, max_body_bytes)
                return HttpReply(response.status, response.reason or "", response.headers, content)
        except _LOST as exc:  # before TimeoutError: a read timeout is one too, not the deadline
            if isinstance(exc.__cause__, ContentEncodingError):
                # A body whose Content-Encoding does not decode: the same bytes would come again.
                raise _unusable(exc, name) from None
            raise _lost(exc, name) from None
        except TimeoutError:
            raise WbTransportError(
                f"no whole answer from WB within {deadline_s:g} s (WBSYNC_WB_REQUEST_DEADLINE_S)",
                method=name,
            ) from None
        except OSError as exc:
            raise _lost(exc, name) from None
        except aiohttp.ClientError as exc:
            raise _unusable(exc, name) from None


def _lost(exc: BaseException, name: str) -> WbTransportError:
    return WbTransportError(f"no answer from WB: {type(exc).__name__}", method=name)


def _unusable(exc: BaseException, name: str) -> WbBadResponseError:
    return WbBadResponseError(f"unusable answer from WB: {type(exc).__name__}", method=name)


async def _body(name: str, response: aiohttp.ClientResponse, most: int) -> bytes:
    """The reply's body (decoded), read no further than ``most`` bytes."""
    declared = response.headers.get("Content-Length", "")
    size = 0
    if declared.isdigit() and int(declared) > most:
        pass  # refused unread
    elif declared.isdigit() and "Content-Encoding" not in response.headers:
        return await response.read()  # exactly the declared bytes, within the maximum
    else:
        chunks: list[bytes] = []
        async for chunk in response.content.iter_chunked(_CHUNK):
            size += len(chunk)
            if size > most:
                break
            chunks.append(chunk)
        else:
            return b"".join(chunks)
    raise WbBodyTooLargeError(
        f"WB's reply is larger than WBSYNC_WB_MAX_BODY_BYTES ({most} bytes; "
        f"{declared or 'no'} declared, stopped after reading {size}): ask for smaller "
        "pages or raise the maximum",
        read_bytes=size,
        max_bytes=most,
        method=name,
        status=response.status,
        request_id=response.headers.get("X-Request-Id") or None,
    )
