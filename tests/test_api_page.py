"""The status page, served by uvicorn on loopback and rendered by headless Chromium.

With UPDATE_SCREENSHOT=1 the browser run also writes the README's docs/status-page.png.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from tests.api_support import API_KEY
from tests.waiting import wait_for
from wbsync.api.server import ApiServer, uvicorn_config
from wbsync.jobs.queue import Outcome
from wbsync.jobs.workers import build_workers
from wbsync.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.wb.endpoints import FINANCE_DETAILED_REPORT, STATISTICS_ORDERS

pytest_plugins = ["tests.conftest_api"]

SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "status-page.png"
BROWSER = next((b for b in ("chromium", "chromium-browser") if shutil.which(b)), None)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]
AddCabinet = Callable[..., Awaitable[Cabinet]]


@pytest.fixture
async def served(api_runtime: Runtime) -> AsyncIterator[str]:
    """The API on a free loopback port, in this event loop; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = ApiServer(uvicorn_config(api_runtime, host="127.0.0.1", port=port))
    task = asyncio.create_task(server.serve(sockets=[sock]))

    async def started() -> bool:
        assert not task.done(), "the API server stopped during startup"
        return bool(server.started)

    await wait_for(started, timeout_s=10)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def _browser(tmp: Path, *args: str) -> str:
    assert BROWSER is not None
    process = await asyncio.create_subprocess_exec(
        BROWSER,
        *FLAGS,
        f"--user-data-dir={tmp}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, f"{BROWSER} exited with {process.returncode}"
    return out.decode()


async def _defer_some_jobs(runtime: Runtime, cabinets: list[Cabinet]) -> None:
    """Close a few windows for long, and let the workers defer the jobs that hit them."""
    north, south, east = cabinets
    closed = [
        (north, FINANCE_DETAILED_REPORT, 50_000),
        (south, FINANCE_DETAILED_REPORT, 35_000),
        (north, STATISTICS_ORDERS, 20_000),
    ]
    for cabinet, ep, ms in closed:
        await runtime.limiter.penalize(runtime.client(cabinet).scope(ep), ms)
    outcomes: list[Outcome] = []
    queues = ["rnp-finance-sync", "rnp-sections-sync"]
    workers = build_workers(runtime, queues, concurrency=2, on_outcome=outcomes.append)
    for worker in workers:
        await worker.start()
    try:
        await runtime.queue("rnp-finance-sync").enqueue_many([str(north.id), str(south.id)])
        await runtime.queue("rnp-sections-sync").enqueue(str(north.id))

        async def deferred() -> bool:
            return sum(o.outcome == "deferred" for o in outcomes) == len(closed)

        await wait_for(deferred)
    finally:
        for worker in workers:
            await worker.close()
    await runtime.queue("booking-slot-monitor").enqueue(str(east.id))  # waiting: no worker


@pytest.mark.skipif(BROWSER is None, reason="no Chromium binary (apt-get install chromium)")
async def test_status_page_in_chromium_shows_a_cabinets_delayed_job(
    served: str, api_runtime: Runtime, add_cabinet: AddCabinet, tmp_path: Path
) -> None:
    cabinets = [
        await add_cabinet(i, name)
        for i, name in enumerate(["north-shop", "south-shop", "east-shop"])
    ]
    await _defer_some_jobs(api_runtime, cabinets)
    url = f"{served}/?key={API_KEY}"  # redirects to / with the key in a cookie
    dom, _ = await asyncio.gather(
        _browser(tmp_path / "dom", "--dump-dom", url),
        _browser(
            tmp_path / "shot",
            f"--screenshot={tmp_path / 'page.png'}",
            "--window-size=1280,1200",
            url,
        ),
    )
    assert "<h1>wbsync status</h1>" in dom
    text = re.sub(r"<[^>]+>", " ", dom)
    waiting = dom[dom.index("Waiting on rate-limit windows") : dom.index("This page")]
    for name, window in [
        ("north-shop", "finance.detailed_report"),
        ("south-shop", "finance.detailed_report"),
        ("north-shop", "statistics.orders"),
    ]:
        assert re.search(
            rf"{name} \(#\d+\)</td><td>[a-z-]+</td><td class=\"delayed\">"
            rf"{re.escape(window)}</td>",
            waiting,
        ), (name, window)
    assert "rnp-finance-sync: delayed on finance.detailed_report until" in text
    assert "booking-slot-monitor: waiting" in text
    assert API_KEY not in dom
    png = (tmp_path / "page.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    if os.environ.get("UPDATE_SCREENSHOT") == "1":  # the README's picture, on demand only
        SCREENSHOT.write_bytes(png)
