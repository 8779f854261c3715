"""A TCP relay on loopback in front of a real server (PostgreSQL, Redis), for faults of the link.

``cut()`` takes the server away without touching it (listener closed, every relayed connection
reset) and ``start()`` brings it back on the same port; ``latency_s`` delays every chunk by that
much in each direction (order kept, throughput not limited), like a slow network between hosts.
"""

from __future__ import annotations

import asyncio
import time


class Proxy:
    """A cuttable, optionally slow TCP relay to ``host:port`` on a loopback port of its own."""

    def __init__(self, host: str, port: int, *, latency_s: float = 0.0) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.latency_s = latency_s
        self.port = 0

    async def start(self) -> None:
        """Listen (again, on the same port once it had one)."""
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        """Stop listening and reset every relayed connection."""
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        pipes = [
            asyncio.ensure_future(self._pipe(reader, up_writer)),
            asyncio.ensure_future(self._pipe(up_reader, writer)),
        ]
        self._tasks.update(pipes)
        # Cut pipes end this handler normally: asyncio reports a handler that was cancelled.
        await asyncio.gather(*pipes, return_exceptions=True)
        self._tasks.difference_update(pipes)

    async def _pipe(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        """Copy ``src`` to ``dst``, each chunk sent ``latency_s`` after it arrived."""
        due: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                at, data = await due.get()
                if not data:
                    return
                # The link's delay is the fault this relay exists to make, not a wait for state.
                await asyncio.sleep(max(0.0, at - time.monotonic()))
                dst.write(data)
                await dst.drain()

        sender = asyncio.ensure_future(send())
        try:
            while data := await src.read(65536):
                due.put_nowait((time.monotonic() + self.latency_s, data))
            due.put_nowait((time.monotonic() + self.latency_s, b""))
            await sender
        except OSError:
            pass
        finally:
            sender.cancel()
            dst.transport.abort()
            self._writers.discard(dst)
