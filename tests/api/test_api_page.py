"""The status page, served by uvicorn on loopback and driven in headless Chromium.

The browser is driven by Playwright (``tests/support/browser.py``): it types a search, picks a
filter, clicks Retry, answers the questions before Lift and Resume, and reads the page as a
person would see it. With UPDATE_SCREENSHOT=1
the run also writes docs/status-page.png.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from playwright.async_api import Dialog, Page, expect

from tests.support.api import API_KEY, SELLERS
from tests.support.browser import BROWSER, browser_page
from tests.support.paths import ROOT
from tests.support.waiting import wait_for
from wbsync.api.server import ApiServer, uvicorn_config
from wbsync.composition.workers import build_workers
from wbsync.emulator import Emulator
from wbsync.emulator.server import ALL_CATEGORIES
from wbsync.jobs.model import Outcome
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet, NewCabinet
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT
from wbsync.syncs.sections import STATISTICS_ORDERS

SCREENSHOT = ROOT / "docs" / "status-page.png"
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


async def _text(page: Page, selector: str) -> str:
    return await page.inner_text(selector)


async def _names(page: Page) -> list[str]:
    return await page.locator("table.cabinets td.name").all_inner_texts()


async def _submit(page: Page, fields: dict[str, str]) -> None:
    """Fill the search form as a person would and click Search; wait for the new page."""
    for name, value in fields.items():
        field = page.locator(f"form.search [name={name}]")
        if await field.evaluate("element => element.tagName") == "SELECT":
            await field.select_option(value)
        else:
            await field.fill(value)
    wanted = [f"{k}={v}" for k, v in fields.items() if v]
    async with page.expect_navigation(url=lambda url: all(w in url for w in wanted)):
        await page.click("form.search button")


@pytest.mark.long
@pytest.mark.skipif(BROWSER is None, reason="no Chromium binary (apt-get install chromium)")
@pytest.mark.parametrize("db_backend", ["sqlite"])  # about the page: one backend is enough
async def test_the_page_in_chromium_searches_filters_and_retries(
    served: str,
    api_runtime: Runtime,
    api_emulator: Emulator,
    add_cabinet: AddCabinet,
) -> None:
    *_, broke = await _scene(api_runtime, api_emulator, add_cabinet)
    total = FILLERS + 4
    async with browser_page() as page:
        await page.goto(f"{served}/?key={API_KEY}")  # a cookie, then / without the key
        assert await page.evaluate("location.pathname + location.search") == "/"
        # Reloads paused (the page's checkbox), so a reload never races the clicks below.
        await page.evaluate("sessionStorage.setItem('wbsync-pause', '1')")
        await page.goto(f"{served}/")
        assert await page.is_checked("#pause")
        assert f"{total} of {total} cabinets match · page 1 of 21" in await _text(page, "#paging")
        # Stuck first: the four cabinets with pending or failed jobs lead the list.
        first = (await _names(page))[:4]
        assert sorted(first) == ["east", "north", "south", "west-no-finance"]
        waiting = await _text(page, "table.waiting-jobs")
        for line in ("north (#", "south (#", "finance.detailed_report", "statistics.orders"):
            assert line in waiting
        failed = await _text(page, "table.failed-jobs")
        assert "west-no-finance" in failed and "lacks category 'finance'" in failed
        # Times are the viewer's local ones; the UTC time stays on hover.
        title = await page.locator("table.waiting-jobs time").first.get_attribute("title")
        assert title is not None and title.endswith("UTC")
        await page.wait_for_selector("#throughput svg")
        assert "catalog-sync: 2 pages" in await _text(page, "#throughput")
        if os.environ.get("UPDATE_SCREENSHOT") == "1":  # docs/api.md's picture, on demand only
            await page.goto(f"{served}/?per_page=8")
            await page.wait_for_selector("#throughput svg")
            await page.screenshot(path=SCREENSHOT, full_page=True)

        await _submit(page, {"q": "north"})
        assert await _names(page) == ["north"]
        assert "1 of 1004 cabinets match" in await _text(page, "#paging")
        assert "rnp-finance-sync: delayed on finance.detailed_report" in await _text(
            page, "table.cabinets"
        )

        await _submit(page, {"q": "", "state": "failed"})
        assert "1 of 1004 cabinets match" in await _text(page, "#paging")
        assert await page.locator("button.retry").count() == 1
        await page.click("button.retry")

        async def retried() -> bool:
            view = await api_runtime.queue(FINANCE).job(str(broke.id))
            return view is not None and view.state == "waiting"

        await wait_for(retried)
        # The page reloads the same view once the retry is taken.
        await expect(page.locator("#paging")).to_contain_text("0 of 1004 cabinets match")
        assert "state=failed" in page.url
        assert API_KEY not in await page.content()


@pytest.mark.skipif(BROWSER is None, reason="no Chromium binary (apt-get install chromium)")
@pytest.mark.parametrize("db_backend", ["sqlite"])
async def test_the_page_in_chromium_asks_then_lifts_a_penalty_and_resumes_a_suspension(
    served: str, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    north, south = await add_cabinet(0, "north"), await add_cabinet(1, "south")
    scope = api_runtime.client(north).scope(FINANCE_DETAILED_REPORT)
    await api_runtime.limiter.penalize(scope, 600_000)
    await api_runtime.store.suspended.suspend(
        south.id, "finance", kind="payment", words="402: no money", probe_at=None
    )
    asked: list[str] = []
    async with browser_page() as page:
        await page.goto(f"{served}/?key={API_KEY}")
        await page.evaluate("sessionStorage.setItem('wbsync-pause', '1')")
        await page.goto(f"{served}/?state=needs-attention")
        page.on("dialog", lambda dialog: _answer(dialog, asked, accept=len(asked) > 0))

        # The first question is declined: nothing is posted, the penalty stays.
        await page.click("form.lift button")
        await wait_for(lambda: len(asked) == 1)
        assert "Lift WB's penalty on finance" in asked[0]
        assert await api_runtime.limiter.penalties()
        async with page.expect_navigation():
            await page.click("form.lift button")
        assert "state=needs-attention" in page.url
        assert not await api_runtime.limiter.penalties()
        await expect(page.locator("body")).to_contain_text("no penalty from WB is in force")

        async with page.expect_navigation():
            await page.click("table.suspensions form.resume button")
        assert "Resume south (#" in asked[2] and "in section finance" in asked[2]
        assert "state=needs-attention" in page.url
        assert await api_runtime.store.suspensions() == []
        await expect(page.locator("table.suspensions")).to_have_count(0)
        assert "no cabinet needs attention" in await _text(page, "body")
        assert API_KEY not in await page.content()


def _answer(dialog: Dialog, asked: list[str], *, accept: bool) -> Awaitable[None]:
    asked.append(dialog.message)
    return dialog.accept() if accept else dialog.dismiss()
