"""The status page, served by uvicorn on loopback and driven in headless Chromium.

The browser is driven over the DevTools protocol (``tests/cdp.py``): it types a search, picks a
filter, clicks Retry, and reads the page as a person would see it. With UPDATE_SCREENSHOT=1
the run also writes the README's docs/status-page.png.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.api_support import API_KEY, SELLERS
from tests.cdp import BROWSER, Tab, browser_tab
from tests.waiting import wait_for
from wbsync.api.server import ApiServer, uvicorn_config
from wbsync.emulator import Emulator
from wbsync.emulator.server import ALL_CATEGORIES
from wbsync.jobs.queue import Outcome
from wbsync.jobs.workers import build_workers
from wbsync.runtime import Runtime
from wbsync.store import Cabinet, NewCabinet
from wbsync.wb.endpoints import FINANCE_DETAILED_REPORT, STATISTICS_ORDERS

pytest_plugins = ["tests.conftest_api"]

SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "status-page.png"
AddCabinet = Callable[..., Awaitable[Cabinet]]
FINANCE = "rnp-finance-sync"
FILLERS = 1_000


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


async def _run_jobs(runtime: Runtime, jobs: dict[str, list[Cabinet]], until: str, n: int) -> None:
    """Run the queues' jobs of these cabinets until ``n`` runs ended with ``until``."""
    outcomes: list[Outcome] = []
    workers = build_workers(runtime, list(jobs), concurrency=2, on_outcome=outcomes.append)
    for worker in workers:
        await worker.start()
    try:
        for queue, cabinets in jobs.items():
            await runtime.queue(queue).enqueue_many([str(c.id) for c in cabinets])

        async def reached() -> bool:
            return sum(o.outcome == until for o in outcomes) >= n

        await wait_for(reached)
    finally:
        for worker in workers:
            await worker.close()


async def _scene(runtime: Runtime, emulator: Emulator, add_cabinet: AddCabinet) -> list[Cabinet]:
    """1,000 quiet cabinets and four with a story: deferred, waiting, failed, synced."""
    tokens = [emulator.token(s) for s in SELLERS]
    await runtime.store.cabinets.add_many(
        [NewCabinet(f"shop-{i:04d}", tokens[i % 4], SELLERS[i % 4]) for i in range(FILLERS)]
    )
    north, south, east = [await add_cabinet(i, n) for i, n in enumerate(["north", "south", "east"])]
    no_finance = [c for c in ALL_CATEGORIES if c != "finance"]
    broke = await runtime.store.cabinets.add(
        "west-no-finance", emulator.token(SELLERS[3], categories=no_finance), SELLERS[3]
    )
    await _run_jobs(runtime, {"catalog-sync": [east, broke]}, "completed", 2)  # pages synced
    closed = [
        (north, FINANCE_DETAILED_REPORT, 50_000),
        (south, FINANCE_DETAILED_REPORT, 35_000),
        (north, STATISTICS_ORDERS, 20_000),
    ]
    for cabinet, ep, ms in closed:
        await runtime.limiter.penalize(runtime.client(cabinet).scope(ep), ms)
    await _run_jobs(
        runtime, {FINANCE: [north, south], "rnp-sections-sync": [north]}, "deferred", len(closed)
    )
    await _run_jobs(runtime, {FINANCE: [broke]}, "failed", runtime.settings.job_attempts)
    await runtime.queue("booking-slot-monitor").enqueue(str(east.id))  # waiting: no worker
    return [north, south, east, broke]


async def _text(tab: Tab, selector: str) -> str:
    return str(await tab.run(f"document.querySelector({json.dumps(selector)})?.innerText ?? ''"))


async def _submit(tab: Tab, fields: dict[str, str]) -> None:
    """Fill the search form as a person would and click Search; wait for the new page."""
    script = "".join(
        f"document.querySelector('form.search [name={name}]').value = {json.dumps(value)};"
        for name, value in fields.items()
    )
    await tab.run(script + "document.querySelector('form.search button').click(); true")
    wanted = [f"{k}={v}" for k, v in fields.items() if v]
    await tab.loaded(lambda href: all(w in href for w in wanted))


@pytest.mark.skipif(BROWSER is None, reason="no Chromium binary (apt-get install chromium)")
@pytest.mark.parametrize("db_backend", ["sqlite"])  # about the page: one backend is enough
async def test_the_page_in_chromium_searches_filters_and_retries(
    served: str,
    api_runtime: Runtime,
    api_emulator: Emulator,
    add_cabinet: AddCabinet,
    tmp_path: Path,
) -> None:
    *_, broke = await _scene(api_runtime, api_emulator, add_cabinet)
    total = FILLERS + 4
    async with browser_tab(tmp_path / "profile") as tab:
        await tab.goto(f"{served}/?key={API_KEY}")  # a cookie, then / without the key
        assert await tab.run("location.pathname + location.search") == "/"
        # Reloads paused (the page's checkbox), so a reload never races the clicks below.
        await tab.run("sessionStorage.setItem('wbsync-pause', '1'); true")
        await tab.goto(f"{served}/")
        assert await tab.run("document.getElementById('pause').checked")
        assert f"{total} of {total} cabinets match · page 1 of 21" in await _text(tab, "#paging")
        # Stuck first: the four cabinets with pending or failed jobs lead the list.
        first = await tab.run(
            "[...document.querySelectorAll('table.cabinets td.name')].slice(0, 4)"
            ".map(td => td.innerText)"
        )
        assert sorted(first) == ["east", "north", "south", "west-no-finance"]
        waiting = await _text(tab, "table.waiting-jobs")
        for line in ("north (#", "south (#", "finance.detailed_report", "statistics.orders"):
            assert line in waiting
        failed = await _text(tab, "table.failed-jobs")
        assert "west-no-finance" in failed and "lacks category 'finance'" in failed
        # Times are the viewer's local ones; the UTC time stays on hover.
        assert await tab.run(
            "document.querySelector('table.waiting-jobs time').title.endsWith('UTC')"
        )
        await wait_for(lambda: tab.run("!!document.querySelector('#throughput svg')"))
        assert "catalog-sync: 2 pages" in await _text(tab, "#throughput")
        if os.environ.get("UPDATE_SCREENSHOT") == "1":  # the README's picture, on demand only
            await tab.goto(f"{served}/?per_page=8")
            await wait_for(lambda: tab.run("!!document.querySelector('#throughput svg')"))
            await tab.screenshot(SCREENSHOT)

        await _submit(tab, {"q": "north"})
        names = await tab.run(
            "[...document.querySelectorAll('table.cabinets td.name')].map(td => td.innerText)"
        )
        assert names == ["north"]
        assert "1 of 1004 cabinets match" in await _text(tab, "#paging")
        assert "rnp-finance-sync: delayed on finance.detailed_report" in await _text(
            tab, "table.cabinets"
        )

        await _submit(tab, {"q": "", "state": "failed"})
        assert "1 of 1004 cabinets match" in await _text(tab, "#paging")
        assert await tab.run("document.querySelectorAll('button.retry').length") == 1
        await tab.run("document.querySelector('button.retry').click(); true")

        async def retried() -> bool:
            view = await api_runtime.queue(FINANCE).job(str(broke.id))
            return view is not None and view.state == "waiting"

        await wait_for(retried)
        await tab.loaded(lambda href: "state=failed" in href)  # back to the same view
        assert "0 of 1004 cabinets match" in await _text(tab, "#paging")
        dom: Any = await tab.run("document.documentElement.outerHTML")
        assert API_KEY not in dom
