"""A real TCP proxy on loopback, in the test's event loop, that can fail the link on demand.

``refuse()`` closes every connection and each new one at once (a Redis that went away);
``hold()`` stops forwarding in both directions while connections stay open (a half-open
partition: bytes sent meanwhile arrive when ``heal()`` is called, as TCP retransmits them).
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """``async with TcpProxy(target_port) as proxy: proxy.url`` forwards to the target."""

    def __init__(self, target_port: int) -> None:
        self._target_port = target_port
        self._server: asyncio.Server | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._refusing = False
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.accepted = 0
        """Connections accepted (refused ones too)."""
        self.port = 0

    @property
    def url(self) -> str:
        """A redis:// URL of the proxy."""
        return f"redis://127.0.0.1:{self.port}/0"

    async def __aenter__(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        self._flowing.set()
        self._drop_all()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def refuse(self) -> None:
        """Close every connection now, and each new one as soon as it is accepted."""
        self._refusing = True
        self._drop_all()

    def hold(self) -> None:
        """Stop forwarding (both ways); connections stay open."""
        self._flowing.clear()

    def heal(self) -> None:
        """Forward again: what was held is delivered first, in order; new connections pass."""
        self._refusing = False
        self._flowing.set()

    def _drop_all(self) -> None:
        for writer in list(self._writers):
            writer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self._refusing:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target_port)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        down = asyncio.ensure_future(self._pump(up_reader, writer))
        self._tasks.add(down)
        try:
            await self._pump(reader, up_writer)
            await down
        finally:
            self._tasks.discard(down)
            self._writers.difference_update((writer, up_writer))
            writer.close()
            up_writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while True:
                chunk = await reader.read(65536)
                await self._flowing.wait()
                if not chunk:
                    break
                writer.write(chunk)
                await writer.drain()
        writer.close()
