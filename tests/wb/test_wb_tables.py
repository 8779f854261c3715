"""The client's table of WB methods, the emulator's own table and WB's documents agree.

``WB_DOCS`` is transcribed from WB's OpenAPI documents (dev.wildberries.ru, fetched 2026-08-19:
each operation's path, verb, server, ``x-category`` and ``x-wb-rate-limits`` rows). The client's
methods (``ENDPOINTS``, each declared with its sync) and the emulator's (``wbsync.emulator.wbdocs``)
are written separately; a wrong number on either side fails here.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import wbsync.emulator
from wbsync.emulator.tokens import Kind
from wbsync.emulator.wbdocs import METHODS, SANDBOX_HOSTS
from wbsync.wb.endpoints import ENDPOINTS, SECTIONS
from wbsync.wb.tokens import TokenType

_MIN, _H = 60.0, 3600.0
Row = tuple[float, int, int]

#: name: (verb, path, host, x-category, Personal/Service/Base-with-secret row, Base row or None)
WB_DOCS: dict[str, tuple[str, str, str, str, Row, Row | None]] = {
    "finance.detailed_report": (
        "POST",
        "/api/finance/v1/sales-reports/detailed",
        "finance-api",
        "finance",
        (_MIN, 1, 1),
        (24 * _H, 2, 1),
    ),
    "statistics.orders": (
        "GET",
        "/api/v1/supplier/orders",
        "statistics-api",
        "statistics",
        (_MIN, 1, 10),
        (3 * _H, 1, 1),
    ),
    "statistics.sales": (
        "GET",
        "/api/v1/supplier/sales",
        "statistics-api",
        "statistics",
        (_MIN, 1, 1),
        (2 * _H, 1, 1),
    ),
    "promotion.adverts": (
        "GET",
        "/api/advert/v2/adverts",
        "advert-api",
        "advert",
        (1.0, 5, 5),
        (_H, 1, 1),
    ),
    "promotion.fullstats": (
        "GET",
        "/adv/v3/fullstats",
        "advert-api",
        "advert",
        (_MIN, 3, 1),
        (_H, 1, 1),
    ),
    "promotion.get_bids": (
        "POST",
        "/adv/v0/normquery/get-bids",
        "advert-api",
        "advert",
        (1.0, 5, 10),
        (_H, 5, 1),
    ),
    "promotion.set_bids": (
        "POST",
        "/adv/v0/normquery/bids",
        "advert-api",
        "advert",
        (1.0, 2, 4),
        (_H, 5, 1),
    ),
    # x-token-types: personal, service (no Base, no Base with secret, no Test).
    "promotion.set_bids_v1": (
        "POST",
        "/api/advert/v1/normquery/bids",
        "advert-api",
        "advert",
        (1.0, 2, 4),
        None,
    ),
    "analytics.sales_funnel_history": (
        "POST",
        "/api/analytics/v3/sales-funnel/products/history",
        "seller-analytics-api",
        "contentanalytics",
        (_MIN, 3, 3),
        (_H, 2, 1),
    ),
    # x-token-types: personal, service, base-with-secret (no Base).
    "analytics.stocks_wb_warehouses": (
        "POST",
        "/api/analytics/v1/stocks-report/wb-warehouses",
        "seller-analytics-api",
        "contentanalytics",
        (_MIN, 3, 1),
        None,
    ),
    # One row without token types: every type.
    "content.cards_list": (
        "POST",
        "/content/v2/get/cards/list",
        "content-api",
        "content",
        (_MIN, 100, 5),
        (_MIN, 100, 5),
    ),
    "prices.goods_list": (
        "GET",
        "/api/v2/list/goods/filter",
        "discounts-prices-api",
        "discountsandprices",
        (6.0, 10, 5),
        (_H, 4, 1),
    ),
    "prices.upload_task": (
        "POST",
        "/api/v2/upload/task",
        "discounts-prices-api",
        "discountsandprices",
        (6.0, 10, 5),
        (_H, 4, 1),
    ),
    "tariffs.acceptance_coefficients": (
        "GET",
        "/api/tariffs/v1/acceptance/coefficients",
        "common-api",
        "commonapi",
        (_MIN, 6, 6),
        (_H, 1, 1),
    ),
    "tariffs.seller_info": (
        "GET",
        "/api/v1/seller-info",
        "common-api",
        "commonapi",
        (_MIN, 1, 10),
        (24 * _H, 1, 1),
    ),
    "tariffs.box": (
        "GET",
        "/api/v1/tariffs/box",
        "common-api",
        "commonapi",
        (_MIN, 60, 5),
        (_H, 1, 1),
    ),
    "tariffs.pallet": (
        "GET",
        "/api/v1/tariffs/pallet",
        "common-api",
        "commonapi",
        (_MIN, 60, 5),
        (_H, 1, 1),
    ),
    "tariffs.return": (
        "GET",
        "/api/v1/tariffs/return",
        "common-api",
        "commonapi",
        (_MIN, 60, 5),
        (_H, 1, 1),
    ),
    "tariffs.commission": (
        "GET",
        "/api/v1/tariffs/commission",
        "common-api",
        "commonapi",
        (_MIN, 1, 2),
        (_H, 5, 1),
    ),
}

#: WB's report tasks (Reports: paid storage, warehouse remains, paid acceptance): create, status,
#: download; each method its own budget.
WB_DOCS.update(
    {
        "analytics.paid_storage": (
            "GET",
            "/api/v1/paid_storage",
            "seller-analytics-api",
            "contentanalytics",
            (_MIN, 1, 5),
            (_H, 1, 1),
        ),
        "analytics.paid_storage_status": (
            "GET",
            "/api/v1/paid_storage/tasks/{task_id}/status",
            "seller-analytics-api",
            "contentanalytics",
            (5.0, 1, 5),
            (_H, 2, 2),
        ),
        "analytics.paid_storage_download": (
            "GET",
            "/api/v1/paid_storage/tasks/{task_id}/download",
            "seller-analytics-api",
            "contentanalytics",
            (_MIN, 1, 1),
            (_H, 2, 1),
        ),
        "analytics.warehouse_remains": (
            "GET",
            "/api/v1/warehouse_remains",
            "seller-analytics-api",
            "contentanalytics",
            (_MIN, 1, 5),
            (_H, 4, 1),
        ),
        "analytics.warehouse_remains_status": (
            "GET",
            "/api/v1/warehouse_remains/tasks/{task_id}/status",
            "seller-analytics-api",
            "contentanalytics",
            (5.0, 1, 5),
            (_H, 4, 1),
        ),
        "analytics.warehouse_remains_download": (
            "GET",
            "/api/v1/warehouse_remains/tasks/{task_id}/download",
            "seller-analytics-api",
            "contentanalytics",
            (_MIN, 1, 1),
            (_H, 4, 1),
        ),
        "analytics.acceptance_report": (
            "GET",
            "/api/v1/acceptance_report",
            "seller-analytics-api",
            "contentanalytics",
            (_MIN, 1, 1),
            (3 * _H, 1, 1),
        ),
        "analytics.acceptance_report_status": (
            "GET",
            "/api/v1/acceptance_report/tasks/{task_id}/status",
            "seller-analytics-api",
            "contentanalytics",
            (5.0, 1, 1),
            (_H, 2, 1),
        ),
        "analytics.acceptance_report_download": (
            "GET",
            "/api/v1/acceptance_report/tasks/{task_id}/download",
            "seller-analytics-api",
            "contentanalytics",
            (_MIN, 1, 1),
            (_H, 2, 1),
        ),
    }
)

#: /ping on every host: "a maximum of 3 requests every 30 seconds", no token types named.
_PING: Row = (30.0, 3, 3)
WB_DOCS.update(
    {
        f"{name}.ping": ("GET", "/ping", host, "all", _PING, _PING)
        for name, host in (
            ("finance", "finance-api"),
            ("statistics", "statistics-api"),
            ("promotion", "advert-api"),
            ("analytics", "seller-analytics-api"),
            ("content", "content-api"),
            ("prices", "discounts-prices-api"),
            ("tariffs", "common-api"),
        )
    }
)


#: Methods whose x-token-types leave out Test tokens: no Test row on either side.
NO_TEST_TOKENS = frozenset({"promotion.set_bids_v1"})


def _client_row(name: str, token_type: TokenType) -> Row | None:
    limit = ENDPOINTS[name].limits.get(token_type)
    return None if limit is None else (limit.period_s, limit.limit, limit.burst)


def _emulator_row(name: str, kind: Kind) -> Row | None:
    rate = METHODS[name].rate(kind)
    return None if rate is None else (rate.period_s, rate.limit, rate.burst)


def test_both_tables_cover_the_same_methods() -> None:
    assert set(ENDPOINTS) == set(METHODS) == set(WB_DOCS)


@pytest.mark.parametrize("name", sorted(WB_DOCS))
def test_paths_hosts_and_limits_match_wb_documents(name: str) -> None:
    verb, path, host, x_category, full, base = WB_DOCS[name]
    client, emulator = ENDPOINTS[name], METHODS[name]
    assert (client.method, client.path, client.host_prefix) == (verb, path, host)
    assert (emulator.verb, emulator.path, emulator.host, emulator.x_category) == (
        verb,
        path,
        host,
        x_category,
    )
    # WB publishes no Test row; both sides give Test tokens the Personal numbers where WB's
    # token types do not leave them out.
    test = None if name in NO_TEST_TOKENS else full
    for token_type, kind, expected in [
        (TokenType.PERSONAL, Kind.PERSONAL, full),
        (TokenType.SERVICE, Kind.SERVICE, full),
        (TokenType.TEST, Kind.TEST, test),
        (TokenType.BASE, Kind.BASE, base),
    ]:
        assert _client_row(name, token_type) == expected, (name, token_type)
        assert _emulator_row(name, kind) == expected, (name, kind)


def test_budget_groups_and_categories_agree() -> None:
    for name, client in ENDPOINTS.items():
        emulator = METHODS[name]
        assert client.group == emulator.group, name
        assert client.writes == emulator.writes, name
        label = None if client.category is None else client.category.label
        assert label == emulator.category, name
    # WB: one budget for all of Prices and Discounts; every other method its own.
    assert {METHODS[n].group for n in ("prices.goods_list", "prices.upload_task")} == {"prices"}


def test_sandbox_hosts_are_those_wb_lists() -> None:
    client = {s.host_prefix for s in SECTIONS.values() if s.sandbox}
    assert client == SANDBOX_HOSTS & {ep.host_prefix for ep in ENDPOINTS.values()}
    assert SANDBOX_HOSTS == {
        "content-api",
        "discounts-prices-api",
        "statistics-api",
        "advert-api",
        "feedbacks-api",
    }


def test_the_emulator_imports_nothing_of_the_client() -> None:
    root = Path(inspect.getfile(wbsync.emulator)).parent
    for source in root.glob("*.py"):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                forbidden = ("wbsync.wb", "wbsync.syncs", "wbsync.ratelimit")
                assert not node.module.startswith(forbidden), (source.name, node.module)
