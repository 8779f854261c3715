"""Bodies: read only from a caller with a key, and only up to MAX_BODY_BYTES (else 401 / 413)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from tests.support.api import API_KEY, AUTH
from wbsync.api import create_app
from wbsync.api.middleware import MAX_BODY_BYTES
from wbsync.shared.runtime import Runtime
from wbsync.system.procs import free_port

CABINETS = "/api/v1/cabinets"


class CountingApp:
    """The app, with every body byte the server hands to it counted."""

    def __init__(self, runtime: Runtime) -> None:
        self.app = create_app(runtime)
        self.read = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def counting() -> Message:
            message = await receive()
            self.read += len(message.get("body", b""))
            return message

        await self.app(scope, counting, send)


@pytest.fixture
async def counted(api_runtime: Runtime) -> AsyncIterator[tuple[CountingApp, httpx.AsyncClient]]:
    app = CountingApp(api_runtime)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://wbsync.test") as client:
        yield app, client


def _problem(reply: httpx.Response, status: int) -> dict[str, object]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"] == "application/problem+json"
    body: dict[str, object] = reply.json()
    return body


@pytest.mark.parametrize("db_backend", ["sqlite"], indirect=True)
async def test_without_a_key_no_body_is_read(
    counted: tuple[CountingApp, httpx.AsyncClient],
) -> None:
    app, client = counted
    for size in (10, MAX_BODY_BYTES * 4):
        reply = await client.post(CABINETS, content=b"{" * size)
        assert _problem(reply, 401)["type"] == "urn:wbsync:problem:unauthorized"
    wrong = {"Authorization": "Bearer " + "x" * 40}
    _problem(await client.post(CABINETS, content=b"{}", headers=wrong), 401)
    assert app.read == 0


@pytest.mark.parametrize("db_backend", ["sqlite"], indirect=True)
async def test_a_body_past_the_limit_is_413_with_a_key(
    counted: tuple[CountingApp, httpx.AsyncClient],
) -> None:
    app, client = counted
    declared = await client.post(CABINETS, content=b" " * (MAX_BODY_BYTES + 1), headers=AUTH)
    problem = _problem(declared, 413)
    assert problem["max_bytes"] == MAX_BODY_BYTES and declared.headers["connection"] == "close"
    assert app.read == 0  # refused from Content-Length alone

    def chunks() -> AsyncIterator[bytes]:
        async def gen() -> AsyncIterator[bytes]:
            for _ in range(1000):  # 16 MB announced by no header
                yield b" " * 16384

        return gen()

    streamed = await client.post(CABINETS, content=chunks(), headers=AUTH)
    _problem(streamed, 413)
    assert MAX_BODY_BYTES < app.read <= MAX_BODY_BYTES + 16384  # stopped at the first chunk past it


@pytest.mark.parametrize("db_backend", ["sqlite"], indirect=True)
async def test_a_body_at_the_limit_reaches_the_route(
    counted: tuple[CountingApp, httpx.AsyncClient],
) -> None:
    _, client = counted
    body = json.dumps({"name": "shop", "token": "x"}).encode()
    padded = body + b" " * (MAX_BODY_BYTES - len(body))
    headers = {**AUTH, "Content-Type": "application/json"}
    reply = await client.post(CABINETS, content=padded, headers=headers)
    errors = _problem(reply, 422)["errors"]
    assert isinstance(errors, list) and [e["field"] for e in errors] == ["body.token"]


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _upload(port: int, *, headers: str, size: int) -> tuple[bytes, int]:
    """Announce ``size`` bytes, send the first MiB, read the reply, then try to send the rest:
    the status line and how many bytes the server let through in all."""
    first = 1 << 20
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            (
                f"POST {CABINETS} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"{headers}Content-Length: {size}\r\n\r\n"
            ).encode()
            + b"[" * first
        )
        reply = sock.recv(65536)
        sent = first
        try:
            while sent < size:
                sock.sendall(b"[" * (1 << 20))
                sent += 1 << 20
        except OSError:  # the server closed the connection: the rest was never read
            pass
    return reply.split(b"\r\n", 1)[0], sent


@pytest.mark.long
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to read RSS")
def test_a_40_mb_upload_costs_the_server_no_memory(
    tmp_path: Path, redis_url: str, prefix: str
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "WBSYNC_REDIS_URL": redis_url,
        "WBSYNC_REDIS_PREFIX": prefix,
        "WBSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'api.db'}",
        "WBSYNC_API_KEYS": f'["{API_KEY}"]',
    }
    command = [sys.executable, "-m", "wbsync", "api", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60  # a start on a loaded machine
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the API did not come up"
                time.sleep(0.05)
        before = _rss_kib(process.pid)
        size = 40 << 20
        unauthenticated = _upload(port, headers="", size=size)
        oversized = _upload(port, headers=f"Authorization: Bearer {API_KEY}\r\n", size=size)
        grown_mib = (_rss_kib(process.pid) - before) / 1024
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)
    assert unauthenticated[0] == b"HTTP/1.1 401 Unauthorized"
    assert oversized[0] == b"HTTP/1.1 413 Request Entity Too Large"
    print(f"RSS growth after two 40 MiB uploads: {grown_mib:.1f} MiB")
    assert unauthenticated[1] < size and oversized[1] < size  # the server stopped reading
    assert grown_mib < 16  # the body would be 40 MiB; parsed as JSON, far more
