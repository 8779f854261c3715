"""404s told apart: WB switching a method off ("method is disabled", "This method is
deprecated") against a URL that does not exist ("path not found"), which is our configuration:
the section stops for the process after one request; and the start-up check that refuses a WB
host given for sections it does not serve."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.wb import SELLER_A
from wbsync.composition.startup import check
from wbsync.config import Settings
from wbsync.emulator import FaultRule
from wbsync.emulator.server import Emulator
from wbsync.errors import WbMethodDisabledError, WbPathNotFoundError
from wbsync.ratelimit import RateLimiter
from wbsync.shared.runtime import client_options
from wbsync.syncs.sections import STATISTICS_ORDERS, STATISTICS_SALES
from wbsync.values.scope import Limit
from wbsync.wb import endpoints as eps
from wbsync.wb.client import WbClient
from wbsync.wb.hosts import base_url_problems, wb_host_prefix
from wbsync.wb.methods import PRICES_GOODS_LIST
from wbsync.wb.options import Hosts
from wbsync.wb.sections import STATISTICS
from wbsync.wb.stops import SectionStops, is_path_not_found
from wbsync.wb.tokens import Category

OLD_FINANCE_PATH = "/api/v5/supplier/reportDetailByPeriod"
# WB's old finance report, as a caller that never moved to the new one declares it.
OLD_FINANCE = eps.Endpoint(
    "statistics.report_detail_by_period",
    STATISTICS,
    "GET",
    OLD_FINANCE_PATH,
    "statistics.report_detail_by_period",
    Category.STATISTICS,
    eps.TypeLimits.same(Limit(period_s=60.0, limit=1, burst=1), base=None),
)
ORDERS = {"params": {"dateFrom": "2026-08-01"}}
GOODS = {"params": {"limit": 1}}
MakeClient = Callable[..., WbClient]


@pytest.fixture
def make_client(emulator: Emulator, limiter_factory: Callable[..., RateLimiter]) -> MakeClient:
    """``make_client(seller, stops=None, **settings)``: a client of the emulator with
    ``settings`` on top of the emulator's base URL and time scale."""
    scale = emulator.config.time_scale
    limiter = limiter_factory(time_scale=scale)

    def make(seller: str = SELLER_A, stops: SectionStops | None = None, **extra: Any) -> WbClient:
        settings = Settings(**{"wb_base_url": emulator.base_url, "time_scale": scale, **extra})
        options = client_options(settings)
        token = emulator.token(seller)
        return WbClient(seller, token, limiter, options=options, rng=random.Random(0), stops=stops)

    return make


def _unserved(emulator: Emulator) -> int:
    return sum(emulator.counters.unserved.values())


async def test_the_old_finance_path_is_deprecated_and_says_so(
    emulator: Emulator, make_client: MakeClient
) -> None:
    async with make_client() as client:
        with pytest.raises(WbMethodDisabledError) as info:
            await client.call(OLD_FINANCE, params={"dateFrom": "2026-07-01"})
    words = info.value.words or ""
    assert info.value.status == 404 and words.startswith("This method is deprecated")
    assert "This method is deprecated" in str(info.value)
    assert emulator.counters.unserved == {OLD_FINANCE_PATH: 1}
    # Switched off, not misrouted: the section goes on.
    async with make_client() as client:
        assert (await client.call(STATISTICS_ORDERS, **ORDERS)).status == 200


async def test_a_method_wb_disabled_is_off_with_wbs_words(
    emulator: Emulator, make_client: MakeClient
) -> None:
    emulator.disable("statistics.orders")
    async with make_client() as client:
        with pytest.raises(WbMethodDisabledError) as info:
            await client.call(STATISTICS_ORDERS, **ORDERS)
    assert (info.value.words or "").startswith("method is disabled: ")
    assert "temporarily disabled" in str(info.value)
    emulator.enable("statistics.orders")
    async with make_client() as client:
        assert (await client.call(STATISTICS_ORDERS, **ORDERS)).status == 200


async def test_path_not_found_stops_the_section_for_the_process_after_one_request(
    emulator: Emulator, make_client: MakeClient
) -> None:
    wrong = f"{emulator.base_url}/statistics-api"
    stops = SectionStops()  # the process's: one for every client
    urls = {"statistics": wrong}
    async with make_client(stops=stops, wb_base_urls=urls) as client:
        with pytest.raises(WbPathNotFoundError) as info:
            await client.call(STATISTICS_ORDERS, **ORDERS)
        first = info.value
        assert not isinstance(first, WbMethodDisabledError)
        assert (first.url, first.section) == (wrong + STATISTICS_ORDERS.path, "statistics")
        line = str(first)
        assert "\n" not in line and first.url in line and "statistics section" in line
        assert 'WBSYNC_WB_BASE_URLS["statistics"]' in line and first.words == (
            "path not found: Please consult the https://dev.wildberries.ru/openapi/api-information"
        )
        # Later calls of the section, any method, fail at once without sending.
        for ep in (STATISTICS_ORDERS, STATISTICS_SALES):
            with pytest.raises(WbPathNotFoundError, match="nothing sent"):
                await client.call(ep, **ORDERS)
        # Another section goes on.
        assert (await client.call(PRICES_GOODS_LIST, **GOODS)).status == 200
    async with make_client(
        "0000000a-0000-4000-8000-00000000000b", stops, wb_base_urls=urls
    ) as other:
        with pytest.raises(WbPathNotFoundError, match="nothing sent") as again:
            await other.call(STATISTICS_ORDERS, **ORDERS)
    assert again.value.setting == first.setting and again.value.url == first.url
    assert _unserved(emulator) == 1
    assert stops.stopped() == [f"statistics at {wrong}"]


async def test_path_not_found_names_the_shared_base_url_setting(
    emulator: Emulator, make_client: MakeClient
) -> None:
    async with make_client(wb_base_url=f"{emulator.base_url}/gateway") as client:
        with pytest.raises(WbPathNotFoundError, match="fix WBSYNC_WB_BASE_URL ") as info:
            await client.call(PRICES_GOODS_LIST, **GOODS)
    assert info.value.section == "prices" and _unserved(emulator) == 1


@pytest.mark.parametrize(
    ("words", "shape", "misrouted"),
    [
        ("404 page not found", "text", True),  # a server that is not WB's gateway
        ("Not Found", "html", True),
        ("method is disabled", "problem", False),
        ("campaign not found", "error", False),  # words we do not know: as today, switched off
    ],
)
async def test_a_404_is_misrouted_only_when_its_words_say_the_path_is_not_there(
    emulator: Emulator, make_client: MakeClient, words: str, shape: str, misrouted: bool
) -> None:
    fault = FaultRule(kind="refuse", status=404, shape=shape, words=words, count=1)  # type: ignore[arg-type]
    emulator.set_faults([fault])
    async with make_client() as client:
        with pytest.raises(WbPathNotFoundError if misrouted else WbMethodDisabledError):
            await client.call(PRICES_GOODS_LIST, **GOODS)
    assert is_path_not_found("path not found: see the docs") and not is_path_not_found(None)


async def test_the_emulator_answers_the_old_path_and_counts_what_it_does_not_serve(
    emulator: Emulator,
) -> None:
    headers = {"Authorization": emulator.token(SELLER_A)}
    async with httpx.AsyncClient(base_url=emulator.base_url) as http:
        old = await http.get(OLD_FINANCE_PATH, headers=headers)
        assert old.status_code == 404 and old.json()["title"] == "This method is deprecated"
        missing = await http.get("/api/v9/nothing", headers=headers)
        assert missing.status_code == 404 and missing.json()["title"] == "path not found"
        counted = (await http.get("/__emulator/counters")).json()
    assert counted["unserved"] == {OLD_FINANCE_PATH: 1, "/api/v9/nothing": 1}
    assert counted["total"]["requests"] == 0  # no method of WB's was asked


def test_a_wb_host_may_serve_only_its_own_section() -> None:
    finance = "https://finance-api.wildberries.ru"
    assert wb_host_prefix(finance) == "finance-api"
    assert wb_host_prefix("https://statistics-api-sandbox.wildberries.ru/") == "statistics-api"
    assert wb_host_prefix("http://127.0.0.1:8080") is None
    assert wb_host_prefix("https://seller.wildberries.ru") is None
    [problem] = base_url_problems(Hosts(base_url=finance))
    assert problem.startswith(f"WBSYNC_WB_BASE_URL: {finance} is WB's host of the finance")
    assert "cannot serve statistics, promotion, analytics, content, prices, tariffs" in problem
    assert "WBSYNC_WB_BASE_URLS" in problem and "unset" in problem
    # Per section, each at its own host, or a host that is not WB's: fine.
    assert base_url_problems(Hosts(base_urls={"finance": finance})) == []
    assert base_url_problems(Hosts(base_url="http://127.0.0.1:1")) == []
    # The shared URL serves only the sections not given their own: here, finance alone.
    others = {s.name: "http://127.0.0.1:2" for s in eps.SECTIONS.values() if s.name != "finance"}
    assert base_url_problems(Hosts(base_url=finance, base_urls=others)) == []
    [wrong] = base_url_problems(Hosts(base_urls={"statistics": finance}))
    assert wrong.startswith('WBSYNC_WB_BASE_URLS["statistics"]: ')
    assert "https://statistics-api.wildberries.ru" in wrong
    [sandbox] = base_url_problems(
        Hosts(sandbox_base_url="https://statistics-api-sandbox.wildberries.ru")
    )
    assert sandbox.startswith("WBSYNC_WB_SANDBOX_BASE_URL: ") and "promotion" in sandbox
    assert check(Settings(wb_base_url=finance)) == [problem]
    [typo] = base_url_problems(Hosts(base_urls={"finanse": finance}))
    assert typo.startswith("WBSYNC_WB_BASE_URLS: no WB section ['finanse']; sections: finance")
