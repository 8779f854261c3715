"""The public surface for plugins (``wbsync.extend``) and the registry behind it."""

from __future__ import annotations

import inspect
import sys

import pytest

import wbsync.extend
from wbsync.errors import ConfigError, StoreError
from wbsync.extend import (
    DATASETS,
    ENDPOINTS,
    GROUPS,
    SECTIONS,
    SYNCS,
    TOMBSTONE_GRACE_DAYS,
    CursorShape,
    Dataset,
    Endpoint,
    KeyField,
    Limit,
    Registrar,
    Section,
    Sync,
    SyncInput,
    SyncPage,
    TypeLimits,
)
from wbsync.wb.methods import PRICES_GOODS_LIST, PROMOTION_ADVERTS


def test_exported_members() -> None:
    """Every name in ``__all__`` exists and is documented; nothing public is left out."""
    exported = set(wbsync.extend.__all__)
    # A dataset's lifecycle is declared with it: snapshot or stream, retention, tombstone grace.
    assert {"Dataset", "DatasetKind", "KeyField", "KeyKind", "TOMBSTONE_GRACE_DAYS"} <= exported
    public = {name for name in dir(wbsync.extend) if not name.startswith("_")}
    assert public - {"annotations"} == exported
    for name in exported:
        member = getattr(wbsync.extend, name)
        if inspect.isclass(member) or inspect.isfunction(member):
            assert member.__doc__, name


def test_the_built_ins_are_registered_through_the_registrar() -> None:
    """Every built-in sync is declared in its own module with the public types, and brings
    every built-in method (but the token check's probes) and every built-in dataset."""
    assert SYNCS and {SYNCS.owner(q) for q in SYNCS} == {"wbsync"}
    # Seller info and one /ping a section (the token check's), the rest the syncs' methods.
    probes = {name for name, ep in ENDPOINTS.items() if ep.probe}
    assert len(probes) == 1 + len(SECTIONS)
    assert {"paid-storage-sync", "warehouse-remains-sync", "acceptance-report-sync"} <= set(SYNCS)
    assert {m for sync in SYNCS.values() for m in sync.methods} == set(ENDPOINTS) - probes
    assert {ds.name for sync in SYNCS.values() for ds in sync.stores} == set(DATASETS)
    assert {ep.section.name for ep in ENDPOINTS.values()} == set(SECTIONS)
    assert GROUPS["prices"] == PRICES_GOODS_LIST.limits
    # Each in its own module (a report task's pages are its ReportTask's: found by its SYNC).
    modules = [m for n, m in list(sys.modules.items()) if n.startswith("wbsync.syncs.")]
    for sync in SYNCS.values():
        [module] = [m for m in modules if getattr(m, "SYNC", None) is sync]
        # Its datasets are declared beside it (a method may be shared: wb/methods.py).
        assert all(ds in vars(module).values() for ds in sync.stores), sync.name


def test_a_plugin_dataset_declares_its_lifecycle_and_bad_values_are_refused() -> None:
    day = KeyField("day", "day", "date")
    ds = Dataset("test_days", "GET /d", (KeyField("id", "id"), day), "snapshot", 90)
    assert (ds.kind, ds.retention_days, ds.date_column) == ("snapshot", 90, "day")
    assert ds.tombstone_grace_days == TOMBSTONE_GRACE_DAYS
    assert Dataset("test_rows", "GET /r", (KeyField("id", "id"),)).kind == "stream"
    with pytest.raises(StoreError, match=r"test_days: kind must be one of snapshot, stream"):
        Dataset("test_days", "GET /d", (day,), kind="full")  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="test_rows: retention_days needs a key field"):
        Dataset("test_rows", "GET /r", (KeyField("id", "id"),), retention_days=30)


async def _no_pages(inp: SyncInput) -> object:  # pragma: no cover - never run
    yield SyncPage.checkpoint({})


_LIMITS = TypeLimits.same(Limit(period_s=60.0, limit=1, burst=1), base=None)
_SECTION = Section("test-reports", "test-reports-api")
_EP = Endpoint("test.reports", _SECTION, "GET", "/r", "test.reports", None, _LIMITS)
_DS = Dataset("test_reports", "GET /r", (KeyField("id", "id"),))


def _sync(name: str, *, calls: tuple[Endpoint, ...] = (_EP,), ds: Dataset = _DS) -> Sync:
    return Sync(
        name=name,
        long=True,
        interval_s=60.0,
        calls=calls,
        stores=(ds,),
        pages=_no_pages,  # type: ignore[arg-type]
        cursor=CursorShape,
    )


def _drop(registrar: Registrar) -> None:
    """Undo a test's registration (the registry is process-wide)."""
    for claim in registrar._claims:
        if claim.table.owner(claim.key) == registrar.owner:
            claim.table._drop(claim.key)


def test_a_plugin_sync_brings_its_method_section_group_and_dataset() -> None:
    registrar = Registrar("test-plugin")
    registrar.declare(_sync("test-reports-sync", calls=(_EP, PROMOTION_ADVERTS)))
    registrar.commit()
    try:
        assert SYNCS["test-reports-sync"].methods == ("test.reports", "promotion.adverts")
        assert ENDPOINTS.owner("test.reports") == "test-plugin"
        assert SECTIONS["test-reports"] is _SECTION
        assert GROUPS["test.reports"] == _LIMITS
        assert DATASETS.owner("test_reports") == "test-plugin"
        # A built-in method it calls stays wbsync's.
        assert ENDPOINTS.owner("promotion.adverts") == "wbsync"
    finally:
        _drop(registrar)
    assert "test-reports-sync" not in SYNCS


@pytest.mark.parametrize(
    ("sync", "message"),
    [
        (_sync("rnp-finance-sync"), "queue 'rnp-finance-sync' is already declared by 'wbsync'"),
        (
            _sync("q", ds=Dataset("orders", "x", (KeyField("id", "id"),))),
            "dataset 'orders' is already declared by 'wbsync'",
        ),
        (
            _sync("q", calls=(Endpoint("x.y", _SECTION, "GET", "/y", "prices", None, _LIMITS),)),
            "limit group 'prices' is already declared by 'wbsync'",
        ),
        (
            _sync(
                "q",
                calls=(Endpoint("x.y", Section("finance", "f"), "GET", "/", "x", None, _LIMITS),),
            ),
            "WB section 'finance' is already declared by 'wbsync'",
        ),
    ],
)
def test_a_clash_is_refused_with_one_line_and_registers_nothing(sync: Sync, message: str) -> None:
    before = {t.kind: dict(t) for t in (SYNCS, ENDPOINTS, DATASETS, SECTIONS, GROUPS)}
    registrar = Registrar("clashing")
    registrar.declare(sync)
    with pytest.raises(ConfigError) as caught:
        registrar.commit()
    assert str(caught.value) == f"plugin 'clashing': {message}"
    assert {t.kind: dict(t) for t in (SYNCS, ENDPOINTS, DATASETS, SECTIONS, GROUPS)} == before


def test_two_plugins_clashing_with_each_other_register_neither() -> None:
    from wbsync.catalog.registry import commit_all

    first, second = Registrar("first"), Registrar("second")
    first.declare(_sync("shared-queue"))
    second.declare(_sync("shared-queue", ds=Dataset("other", "x", (KeyField("id", "id"),))))
    with pytest.raises(ConfigError, match="plugin 'second': queue 'shared-queue' is already"):
        commit_all([first, second])
    assert "shared-queue" not in SYNCS
    assert "test_reports" not in DATASETS


def test_exported_members_of_the_emulator_surface() -> None:
    """The emulator's surface for plugins: every name exists and is documented."""
    import wbsync.emulator.extend as emulated

    public = {name for name in dir(emulated) if not name.startswith("_")}
    assert public - {"annotations"} == set(emulated.__all__)
    for name in emulated.__all__:
        member = getattr(emulated, name)
        if inspect.isclass(member) or inspect.isfunction(member):
            assert member.__doc__, name


def test_the_example_plugin_imports_only_the_public_surface() -> None:
    """The example is what authors copy: it reaches wbsync through the two public modules."""
    import ast
    from pathlib import Path

    public = {"wbsync", "wbsync.extend", "wbsync.emulator.extend"}
    src = Path(__file__).parents[1] / "examples" / "wbsync-deductions" / "src"
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("wbsync."):
                assert node.module in public, f"{path.name} imports {node.module}"


def test_a_key_field_of_an_unknown_kind_is_refused_when_declared() -> None:
    with pytest.raises(StoreError) as caught:
        KeyField("id", "id", "uuid")  # type: ignore[arg-type]
    assert str(caught.value) == "key field 'id': kind must be one of int, str, date, got 'uuid'"


def test_a_str_key_longer_than_its_column_is_refused() -> None:
    from wbsync.extend import KEY_STR_MAX

    key = KeyField("code", "code", "str")
    assert key.extract({"code": "x" * KEY_STR_MAX}) == "x" * KEY_STR_MAX
    with pytest.raises(StoreError, match=r"key field 'code' is 256 characters, past the 255"):
        key.extract({"code": "x" * (KEY_STR_MAX + 1)})


def test_every_name_of_the_plugin_api_is_in_the_authors_guide() -> None:
    from pathlib import Path

    import wbsync.extend as extend

    guide = (Path(__file__).parents[1] / "docs" / "extending.md").read_text()
    assert [name for name in extend.__all__ if f"`{name}" not in guide] == []


def test_the_emulated_method_api_is_documented_with_its_types() -> None:
    """Every name of the emulator's surface, and ``Call``'s members, are in the author's guide."""
    from pathlib import Path

    import wbsync.emulator.extend as emulated

    guide = (Path(__file__).parents[1] / "docs" / "extending.md").read_text()
    for name in emulated.__all__:
        assert f"`{name}" in guide, name
    for member in ("call.data", "call.seller", "await call.body()", "call.query(name)"):
        assert member in guide, member
    for member in ("anchor", "rng(kind: str)", "x_category", "seller.plugins"):
        assert f"`{member}" in guide or f"call.{member}" in guide, member
    # A coroutine whose annotation says what it returns.
    assert inspect.iscoroutinefunction(emulated.Call.body)
    assert inspect.signature(emulated.Call.body).return_annotation == "dict[str, Any]"
