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
    ],
    ids=["cannot be imported", "clashes with a built-in", "clashes with another plugin"],
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
