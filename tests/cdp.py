"""Headless Chromium driven over the DevTools protocol on a pipe (no driver, no library).

Chromium's ``--remote-debugging-pipe`` reads protocol messages on file descriptor 3 and
writes them on 4, each a JSON object ended by a NUL byte. A shell puts the child's stdin and
stdout there. Enough of the protocol for the page tests: open a tab, go to a URL, run a script
in the page, take a screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.waiting import wait_for

BROWSER = next((b for b in ("chromium", "chromium-browser") if shutil.which(b)), None)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


class Tab:
    """One page of a browser over the protocol pipe."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self._next_id = 0
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader = asyncio.create_task(self._read())
        self._session: str | None = None

    async def _read(self) -> None:
        assert self._process.stdout is not None
        while True:
            try:
                raw = await self._process.stdout.readuntil(b"\0")
            except asyncio.IncompleteReadError:
                return
            message = json.loads(raw[:-1])
            waiter = self._replies.pop(message.get("id", -1), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command (to the open tab, once there is one) and return its result."""
        assert self._process.stdin is not None
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self._session is not None:
            message["sessionId"] = self._session
        waiter = asyncio.get_running_loop().create_future()
        self._replies[self._next_id] = waiter
        self._process.stdin.write(json.dumps(message).encode() + b"\0")
        await self._process.stdin.drain()
        reply = await asyncio.wait_for(waiter, timeout=60)
        assert "error" not in reply, reply["error"]
        result: dict[str, Any] = reply.get("result", {})
        return result

    async def open(self, width: int, height: int) -> None:
        """Open a blank tab of that size and attach to it."""
        target = await self.send("Target.createTarget", {"url": "about:blank"})
        attached = await self.send(
            "Target.attachToTarget", {"targetId": target["targetId"], "flatten": True}
        )
        self._session = attached["sessionId"]
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    async def run(self, script: str) -> Any:
        """The value of a script run in the page (awaited when it is a promise)."""
        result = await self.send(
            "Runtime.evaluate",
            {"expression": script, "awaitPromise": True, "returnByValue": True},
        )
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    async def goto(self, url: str) -> None:
        """Load ``url`` and wait until its document has loaded."""
        await self.send("Page.navigate", {"url": url})
        await self.loaded(lambda href: True)

    async def loaded(self, where: Any) -> None:
        """Wait until the document at a location accepted by ``where(href)`` has loaded."""

        async def ready() -> bool:
            state = await self.run("[document.readyState, location.href]")
            return bool(state[0] == "complete" and where(state[1]))

        await wait_for(ready, timeout_s=30)

    async def screenshot(self, path: Path) -> bytes:
        """A PNG of the whole page, written to ``path``."""
        size = await self.run("[document.documentElement.scrollWidth, document.body.scrollHeight]")
        shot = await self.send(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1},
            },
        )
        png = base64.b64decode(shot["data"])
        await asyncio.to_thread(path.write_bytes, png)
        return png

    async def close(self) -> None:
        """Close the browser."""
        self._session = None
        try:
            await asyncio.wait_for(self.send("Browser.close"), timeout=10)
        except (TimeoutError, AssertionError, ConnectionError):
            self._process.kill()
        await self._process.wait()
        self._reader.cancel()


@asynccontextmanager
async def browser_tab(
    profile: Path, *, width: int = 1280, height: int = 1000
) -> AsyncIterator[Tab]:
    """A headless Chromium with one open tab; closed on exit."""
    assert BROWSER is not None
    command = " ".join([BROWSER, *FLAGS, f"--user-data-dir={profile}"])
    process = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        f"exec {command} 3<&0 4>&1 0</dev/null 1>/dev/null",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        limit=64 * 1024 * 1024,  # a full-page screenshot is one long message
    )
    tab = Tab(process)
    try:
        await tab.open(width, height)
        yield tab
    finally:
        await tab.close()
