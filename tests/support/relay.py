"""A TCP relay on loopback in front of a real server (PostgreSQL, Redis), for faults of the link.

One relay, four faults:

- ``latency_s`` delays every chunk by that much in each direction (order kept, throughput not
  limited), like a slow network between hosts;
- ``cut()`` takes the server away without touching it (listener closed, every relayed connection
  reset) and ``start()`` brings it back on the same port;
- ``refuse()`` keeps listening but closes every connection and each new one at once (a server
  that went away behind a live address);
- ``hold()`` stops forwarding in both directions while connections stay open (a half-open
  partition: bytes sent meanwhile arrive when ``heal()`` is called, as TCP retransmits them).

``heal()`` ends ``refuse()`` and ``hold()``. ``async with Relay(host, port) as relay`` starts it
and closes everything at the end; ``accepted`` counts connections accepted (refused ones too).
"""

from __future__ import annotations

import asyncio
import time


class Relay:
    """A TCP relay to ``host:port`` on a loopback port of its own, with faults on demand."""

    def __init__(self, host: str, port: int, *, latency_s: float = 0.0) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._refusing = False
        self.latency_s = latency_s
        self.accepted = 0
        """Connections accepted (refused ones too)."""
        self.port = 0

    @property
    def redis_url(self) -> str:
        """A redis:// URL of the relay (database 0), for a relay in front of Redis."""
        return f"redis://127.0.0.1:{self.port}/0"

    async def __aenter__(self) -> Relay:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        self.heal()
        await self.cut()

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

    def refuse(self) -> None:
        """Close every connection now, and each new one as soon as it is accepted."""
        self._refusing = True
        for writer in list(self._writers):
            writer.close()

    def hold(self) -> None:
        """Stop forwarding (both ways); connections stay open."""
        self._flowing.clear()

    def heal(self) -> None:
        """Forward again: what was held is delivered first, in order; new connections pass."""
        self._refusing = False
        self._flowing.set()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self._refusing:
            writer.close()
            return
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
        """Copy ``src`` to ``dst``, each chunk sent ``latency_s`` after it arrived and only
        while the relay is not held."""
        due: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                at, data = await due.get()
                # The link's delay is the fault this relay exists to make, not a wait for state.
                await asyncio.sleep(max(0.0, at - time.monotonic()))
                await self._flowing.wait()
                if not data:
                    return
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
            dst.close()  # after a cut or a reset, already aborted: a no-op
            self._writers.discard(dst)
