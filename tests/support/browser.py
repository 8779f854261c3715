"""Headless Chromium for the page tests, driven by Playwright.

Playwright launches the machine's own Chromium by its path (Debian's ``chromium`` package), so
no browser is downloaded. Without one, the browser tests skip with the command that installs it.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from playwright.async_api import Page, async_playwright

__all__ = ["BROWSER", "browser_page"]

BROWSER = next((b for b in ("chromium", "chromium-browser") if shutil.which(b)), None)
# The network here is closed: Chromium's own background connections would only be refused.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
]


@asynccontextmanager
async def browser_page(*, width: int = 1280, height: int = 1000) -> AsyncIterator[Page]:
    """A headless Chromium with one page in a fresh profile; closed on exit."""
    assert BROWSER is not None
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=shutil.which(BROWSER), args=FLAGS, headless=True
        )
        try:
            page = await browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(30_000)
            yield page
        finally:
            await browser.close()
