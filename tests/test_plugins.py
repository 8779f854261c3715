"""Plugins found through entry points by the real command: loaded, listed, allow-listed, and
refused at start in one line (exit 2) when broken or clashing, with nothing half-loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.plugins import GROUP, install, plugin_env

GOOD = """
from wbsync.extend import (
    CursorShape, Dataset, Endpoint, KeyField, Limit, Registrar, Section, Sync, SyncInput,
    SyncPage, TypeLimits
)

SECTION = Section("goodreports", "good-reports-api")
ENDPOINT = Endpoint(
    "goodreports.list", SECTION, "GET", "/api/v1/list", "goodreports.list", None,
    TypeLimits.same(Limit(period_s=60.0, limit=1, burst=1), base=None),
)
DATASET = Dataset("good_rows", "GET /api/v1/list", (KeyField("id", "id"),))


async def pages(inp: SyncInput):
    yield SyncPage.checkpoint({})


def register(registrar: Registrar) -> None:
    registrar.declare(
        Sync(name="good-sync", long=True, interval_s=600.0, calls=(ENDPOINT,),
             stores=(DATASET,), pages=pages, cursor=CursorShape)
    )
"""

CLASH = """
from wbsync.extend import DATASETS, Registrar, Sync, SYNCS
import dataclasses


def register(registrar: Registrar) -> None:
    finance = SYNCS["rnp-finance-sync"]
    registrar.declare(dataclasses.replace(finance, interval_s=1.0))
"""

TWIN = """
from good_plugin import DATASET, ENDPOINT, pages
from wbsync.extend import CursorShape, Registrar, Sync


def register(registrar: Registrar) -> None:
    registrar.declare(
        Sync(name="good-sync", long=False, interval_s=60.0, calls=(ENDPOINT,),
             stores=(DATASET,), pages=pages, cursor=CursorShape)
    )
"""


UUID_KEY = """
from wbsync.extend import Dataset, KeyField, Registrar

DATASET = Dataset("uuid_rows", "GET /api/v1/list", (KeyField("id", "id", "uuid"),))


def register(registrar: Registrar) -> None:
    pass
"""


def _wbsync(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wbsync", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install(
        tmp_path_factory.mktemp("good"),
        "good-plugin",
        {GROUP: {"good": "good_plugin:register"}},
        {"good_plugin.py": GOOD},
    )


def _listing(env: dict[str, str]) -> list[dict[str, Any]]:
    """``wbsync plugins --json``, the test's plugin only (the example may be installed too)."""
    done = _wbsync(env, "plugins", "--json")
    assert done.returncode == 0, done.stderr
    listing: list[dict[str, Any]] = json.loads(done.stdout)
    return [entry for entry in listing if entry["name"] == "good"]


def test_an_installed_plugin_is_loaded_and_listed_with_what_it_declares(good: Path) -> None:
    env = plugin_env(good, WBSYNC_FANOUT_INTERVALS_S='{"good-sync": 60}')
    env.pop("WBSYNC_PLUGINS", None)
    [entry] = _listing(env)
    assert entry["name"] == "good" and entry["loaded"] is True
    assert entry["declared"]["queue"] == ["good-sync"]
    assert entry["declared"]["dataset"] == ["good_rows"]
    assert entry["declared"]["WB method"] == ["goodreports.list"]
    assert entry["declared"]["limit group"] == ["goodreports.list"]


@pytest.mark.long
def test_the_allow_list_leaves_an_installed_plugin_unloaded(good: Path) -> None:
    [entry] = _listing(plugin_env(good, WBSYNC_PLUGINS="[]"))
    assert entry["loaded"] is False
    # Its queue is then not loaded here: named in one warning line, never an exit.
    done = _wbsync(
        plugin_env(good, WBSYNC_PLUGINS="[]", WBSYNC_FANOUT_INTERVALS_S='{"good-sync": 60}'),
        "settings",
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(
        "warning: WBSYNC_FANOUT_INTERVALS_S: queue(s) ['good-sync'] not loaded here"
    )


@pytest.mark.parametrize(
    ("entries", "modules", "says"),
    [
        (
            {"broken": "broken_plugin:register"},
            {"broken_plugin.py": "import not_a_module_anywhere\n"},
            "error: plugin 'broken' (broken_plugin:register) cannot be imported: "
            "ModuleNotFoundError: No module named 'not_a_module_anywhere'",
        ),
        (
            {"clash": "clash_plugin:register"},
            {"clash_plugin.py": CLASH},
            "error: plugin 'clash': queue 'rnp-finance-sync' is already declared by 'wbsync'",
        ),
        (
            {"twin": "twin_plugin:register"},
            {"twin_plugin.py": TWIN},
            "error: plugin 'twin': queue 'good-sync' is already declared by 'good'",
        ),
        (
            {"uuidkey": "uuid_plugin:register"},
            {"uuid_plugin.py": UUID_KEY},
            "error: plugin 'uuidkey' (uuid_plugin:register) cannot be imported: StoreError: "
            "key field 'id': kind must be one of int, str, date, got 'uuid'",
        ),
    ],
    ids=[
        "cannot be imported",
        "clashes with a built-in",
        "clashes with another plugin",
        "declares a key of an unknown kind",
    ],
)
def test_a_broken_or_clashing_plugin_is_refused_at_start_in_one_line(
    tmp_path: Path,
    good: Path,
    entries: dict[str, str],
    modules: dict[str, str],
    says: str,
) -> None:
    site = install(tmp_path, "bad-plugin", {GROUP: entries}, modules)
    env = plugin_env(site, good)
    env.pop("WBSYNC_PLUGINS", None)
    # Refused before anything starts: migrate creates no database.
    done = _wbsync(env | {"WBSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/x.db"}, "migrate")
    assert (done.returncode, done.stderr) == (2, says + "\n")
    assert not (tmp_path / "x.db").exists()


FEEDBACKS = """
from wbsync.emulator.extend import EmulatedMethod, Kind, Method, Rate, Registrar, json_reply


async def handle(call):
    return json_reply({"feedbacks": []})


METHOD = Method("test.feedbacks", "GET", "/api/v1/test-feedbacks", "feedbacks-api", "feedbacks",
                {kind: Rate(1.0, 10, 10) for kind in Kind})


def register(registrar: Registrar) -> None:
    registrar.declare(EmulatedMethod(METHOD, handle))
"""


def test_an_emulator_token_grants_what_plugins_methods_need_and_refuses_unknown_categories(
    tmp_path: Path,
) -> None:
    from tests.support.plugins import EMULATOR_GROUP
    from wbsync.emulator import EmulatorConfig
    from wbsync.emulator.tokens import CATEGORY_BITS, verify

    site = install(
        tmp_path,
        "feedbacks-plugin",
        {EMULATOR_GROUP: {"feedbacks": "feedbacks_plugin:register"}},
        {"feedbacks_plugin.py": FEEDBACKS},
    )
    env = plugin_env(site, WBSYNC_PLUGINS='["feedbacks"]')
    done = _wbsync(env, "emulator", "token")
    assert done.returncode == 0, done.stderr
    granted = verify(done.stdout.strip(), EmulatorConfig().signing_key)
    for name in ("content", "analytics", "prices", "statistics", "promotion", "finance"):
        assert granted.has(CATEGORY_BITS[name]), name
    assert granted.has(CATEGORY_BITS["feedbacks"])

    refused = _wbsync(env, "emulator", "token", "--categories", "content,nope")
    assert refused.returncode == 2
    assert refused.stderr.startswith("error: unknown token category 'nope'; known: content, ")
    assert refused.stderr.count("\n") == 1


@pytest.mark.long
def test_plugins_lists_every_plugin_with_the_broken_one_and_why_then_exits_2(
    tmp_path: Path, good: Path
) -> None:
    site = install(
        tmp_path,
        "bad-plugin",
        {GROUP: {"broken": "broken_plugin:register"}},
        {"broken_plugin.py": "import not_a_module_anywhere\n"},
    )
    env = plugin_env(site, good)
    env.pop("WBSYNC_PLUGINS", None)
    done = _wbsync(env, "plugins", "--json")
    assert done.returncode == 2
    listing = {entry["name"]: entry for entry in json.loads(done.stdout)}
    assert listing["broken"]["state"] == "refused"
    assert listing["broken"]["error"] == (
        "plugin 'broken' (broken_plugin:register) cannot be imported: "
        "ModuleNotFoundError: No module named 'not_a_module_anywhere'"
    )
    # The good one is shown too: nothing is loaded when one is refused, and it says why.
    assert listing["good"]["state"] == "not loaded (the start was refused)"
    assert listing["good"]["error"] is None and listing["good"]["loaded"] is False
    assert done.stderr == "error: " + listing["broken"]["error"] + "\n"

    table = _wbsync(env, "plugins")
    assert table.returncode == 2
    assert "refused: plugin 'broken'" in table.stdout and "good" in table.stdout


def test_plugins_names_the_plugin_refused_for_clashing_with_another(
    tmp_path: Path, good: Path
) -> None:
    site = install(
        tmp_path, "twin-plugin", {GROUP: {"twin": "twin_plugin:register"}}, {"twin_plugin.py": TWIN}
    )
    env = plugin_env(site, good)
    env.pop("WBSYNC_PLUGINS", None)
    done = _wbsync(env, "plugins", "--json")
    assert done.returncode == 2
    listing = {entry["name"]: entry for entry in json.loads(done.stdout)}
    assert listing["twin"]["state"] == "refused"
    assert (
        listing["twin"]["error"] == "plugin 'twin': queue 'good-sync' is already declared by 'good'"
    )
    assert listing["good"]["state"] == "not loaded (the start was refused)"
