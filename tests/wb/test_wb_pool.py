"""The WB client's HTTP pool over real loopback sockets: its connection bound, the translation of
aiohttp's failures into wbsync's errors, and the query and options it is given."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from wbsync.config import Settings
from wbsync.errors import WbBadResponseError, WbTransportError
from wbsync.shared.runtime import client_options
from wbsync.wb.http import HttpPool, HttpReply, query
from wbsync.wb.options import Hosts

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
SECRET = "Bearer not-a-real-token-but-secret"


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """A loopback server running ``handler`` per connection; yields its base URL."""
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


async def _get(pool: HttpPool, url: str) -> HttpReply:
    return await pool.exchange(
        "GET",
        url,
        name="test.method",
        params=None,
        body=None,
        headers={"Authorization": SECRET},
        deadline_s=20.0,
        read_timeout_s=20.0,
        max_body_bytes=1 << 20,
    )


async def test_a_pool_never_holds_more_connections_than_its_bound() -> None:
    bound, requests = 2, 8
    open_now = peak = 0
    full = asyncio.Event()

    async def keep_alive(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal open_now, peak
        open_now += 1
        peak = max(peak, open_now)
        if open_now >= bound:
            full.set()
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                # Hold the first replies until the pool has opened all it may: a pool past its
                # bound would have opened more connections by then.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(full.wait(), timeout=10.0)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            open_now -= 1
            writer.close()

    async with serving(keep_alive) as url, HttpPool(max_connections=bound) as pool:
        replies = await asyncio.gather(*(_get(pool, url) for _ in range(requests)))
    assert [r.status for r in replies] == [200] * requests
    assert peak == bound  # used up to the bound, never past it


async def _answer(raw: bytes) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(raw)
            await writer.drain()
        writer.close()

    return handler


@pytest.mark.parametrize(
    "raw",
    [
        b"",  # closed without a word
        b"NOT HTTP AT ALL\r\n\r\n",  # a status line aiohttp cannot parse
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}",  # cut short
    ],
    ids=["closed", "malformed", "cut-short"],
)
async def test_a_lost_answer_is_a_transport_error_without_the_token(raw: bytes) -> None:
    async with serving(await _answer(raw)) as url, HttpPool() as pool:
        with pytest.raises(WbTransportError, match="no answer from WB") as caught:
            await _get(pool, url)
    assert caught.value.method == "test.method"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert "secret" not in str(caught.value) and "secret" not in repr(caught.value)


async def test_a_read_past_the_read_timeout_is_a_lost_answer_within_the_deadline() -> None:
    # A server that takes the request and never answers: the read timeout (0.2 s) ends the
    # exchange long before the deadline (20 s), as a lost answer, not as the deadline.
    answered = asyncio.Event()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            await answered.wait()
        writer.close()

    async with serving(silent) as url, HttpPool() as pool:
        try:
            with pytest.raises(WbTransportError, match="no answer from WB") as caught:
                await pool.exchange(
                    "GET",
                    url,
                    name="test.method",
                    params=None,
                    body=None,
                    headers={"Authorization": SECRET},
                    deadline_s=20.0,
                    read_timeout_s=0.2,
                    max_body_bytes=1 << 20,
                )
        finally:
            answered.set()
    assert "Timeout" in str(caught.value) and "DEADLINE" not in str(caught.value)


async def test_a_body_that_cannot_be_decoded_is_an_unusable_reply() -> None:
    # Not a lost answer (the same bytes would come again): not retried by the client.
    raw = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\nnot-g"
    async with serving(await _answer(raw)) as url, HttpPool() as pool:
        with pytest.raises(WbBadResponseError, match="unusable answer") as caught:
            await _get(pool, url)
    assert caught.value.method == "test.method" and "secret" not in str(caught.value)


async def test_a_closed_pool_refuses_exchanges() -> None:
    pool = HttpPool()
    await pool.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await _get(pool, "http://127.0.0.1:9")
    with pytest.raises(ValueError, match="at least 1"):
        HttpPool(max_connections=0)


def test_query_values_are_written_as_wb_reads_them() -> None:
    assert query(None) is None and query({}) is None
    assert query({"a": True, "b": False, "c": None, "n": 5, "ids": [1, 2], "s": "x"}) == [
        ("a", "true"),
        ("b", "false"),
        ("c", ""),
        ("n", "5"),
        ("ids", "1"),
        ("ids", "2"),
        ("s", "x"),
    ]


def test_client_options_are_the_settings_client_part_and_frozen() -> None:
    settings = Settings.model_validate(
        {
            "wb_base_url": "http://a",
            "wb_base_urls": {"finance": "http://f"},
            "wb_sandbox_base_url": "http://s",
            "time_scale": 0.5,
            "wb_request_deadline_s": 7,
            "wb_max_body_bytes": 4096,
            "wb_rate_wait_max_s": 30,
            "wb_finance_page_rows": 50,
            "wb_disabled_methods": ["prices.goods_list"],
            "limit_overrides": {"prices": {"period_s": 9, "burst": 1}},
        }
    )
    options = client_options(settings)
    assert options.hosts == Hosts("http://a", {"finance": "http://f"}, "http://s")
    assert (options.time_scale, options.request_deadline_s, options.max_body_bytes) == (
        0.5,
        7,
        4096,
    )
    assert (options.rate_wait_max_s, options.finance_page_rows) == (30, 50)
    assert options.disabled_methods == frozenset({"prices.goods_list"})
    assert options.limit_overrides["prices"]["*"].period_s == 9
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.time_scale = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        options.hosts.base_urls["x"] = "y"  # type: ignore[index]
    # A later change of the settings does not reach options already built.
    settings.wb_base_urls["finance"] = "http://changed"
    assert options.hosts.base_urls["finance"] == "http://f"
