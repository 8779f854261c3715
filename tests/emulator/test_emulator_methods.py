"""The built-in emulated methods are declared as a plugin's are: one EmulatedMethod each, in its
WB section's module, registered by wbsync through the one table the gateway and
``/__emulator/expected`` read; the demo finds every dataset's method from the registry."""

from __future__ import annotations

import importlib
import pkgutil

from wbsync.catalog.registry import BUILTIN
from wbsync.demo.expected import expected_methods
from wbsync.emulator import methods
from wbsync.emulator.extend import EMULATED, EXPECTED, HANDLERS, METHODS, Kind, Method, Rate
from wbsync.emulator.wbdocs import ping_hosts
from wbsync.store.datasets import DATASETS

#: The read methods a sync pulls rows from: each computes what a full pull returns.
READS = {
    "finance.detailed_report",
    "statistics.orders",
    "statistics.sales",
    "promotion.adverts",
    "promotion.fullstats",
    "promotion.get_bids",
    "analytics.sales_funnel_history",
    "analytics.stocks_wb_warehouses",
    "content.cards_list",
    "prices.goods_list",
    "prices.upload_task",
    "tariffs.acceptance_coefficients",
    "tariffs.box",
    "tariffs.pallet",
    "tariffs.return",
    "tariffs.commission",
    "analytics.paid_storage",
    "analytics.warehouse_remains",
    "analytics.acceptance_report",
}


def test_every_builtin_method_is_one_emulated_method_of_its_sections_module() -> None:
    declared = {}
    for info in pkgutil.iter_modules(methods.__path__):
        module = importlib.import_module(f"{methods.__name__}.{info.name}")
        for emulated in module.EMULATED:
            assert emulated.name.split(".")[0] == info.name  # a section's module
            declared[emulated.name] = emulated
    builtins = {name for name in EMULATED if EMULATED.owner(name) == BUILTIN}
    assert set(declared) == builtins == {n for n in METHODS if METHODS.owner(n) == BUILTIN}
    for name, emulated in declared.items():
        assert EMULATED[name] is emulated and METHODS[name] is emulated.method
        assert HANDLERS[name] is emulated.handler
    assert {n for n in EXPECTED if n in builtins} == READS
    assert len(ping_hosts()) >= 7 and all(f"{n.split('.')[0]}.ping" in METHODS for n in READS)


def test_a_method_without_a_group_is_its_own_group() -> None:
    alone = Method("test.alone", "GET", "/alone", "test-api", None, {Kind.PERSONAL: Rate(1, 1, 1)})
    assert alone.group == "test.alone"


def test_the_demo_finds_every_builtin_datasets_method_in_the_registry() -> None:
    found = expected_methods()
    builtin = {name for name in DATASETS if DATASETS.owner(name) == BUILTIN}
    assert builtin <= set(found)
    assert found["advert_stats"] == "promotion.fullstats"
    assert found["bids"] == "promotion.get_bids"
    assert all(method in EXPECTED for method in found.values())
