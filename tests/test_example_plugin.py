"""The example plugins (examples/wbsync-deductions and examples/wbsync-supplies) end to end, as
installed packages side by side: migrate, the emulator serving their methods, a worker syncing
both (rows exact: deductions deferred on its own bucket, supplies paged to the end of WB's list),
the status page and metrics showing them, and a stock process sharing the database and Redis
that shows them as not loaded here, with 200s.

`make test` installs the examples into the suite's environment (pip); elsewhere the test gives
its processes the examples' sources and distributions with their entry points on PYTHONPATH, so
it runs either way. Every process that loads a plugin is a subprocess: this one stays stock.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.api import API_KEY, AUTH
from tests.support.examples import example, example_sites, run_wbsync, serving, stored
from tests.support.plugins import plugin_env
from wbsync.emulator import Emulator, EmulatorConfig
from wbsync.system.procs import free_port

EXAMPLE = example("deductions")
QUEUE = "wb-deductions-sync"
DEDUCTIONS_GROUP = "analytics.deductions"
SUPPLIES_QUEUE = "wb-supplies-sync"
SUPPLIES_PAGE = 7  # the emulator's page of the supplies list: a seller's 50 supplies in 8 pages
SELLER = "7d2b4a1e-0c9f-4e51-9a30-5c1d8f2e6b47"
SCALE = 0.01  # WB's minute is 0.6 s; the deferral threshold 50 ms
SEED = 11
SECRET = "example-plugin-secret-key"


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """What the processes need on PYTHONPATH to find the plugins (nothing when pip-installed)."""
    return example_sites(tmp_path_factory.mktemp("site"), "deductions", "supplies")


def _expected_rows(anchor: date) -> list[dict[str, Any]]:
    """The emulator's deductions of SELLER, computed here from the example's own generator."""
    sys.path.insert(0, str(EXAMPLE / "src"))
    try:
        from wbsync_deductions.emulated import deduction_rows
    finally:
        sys.path.remove(str(EXAMPLE / "src"))
    from wbsync.emulator.extend import seller_data

    rows: list[dict[str, Any]] = deduction_rows(
        seller_data(EmulatorConfig(seed=SEED, anchor_date=anchor), SELLER)
    )
    return rows


def _stored(db: Path, table: str = "wb_deductions") -> list[dict[str, Any]]:
    return stored(db, table)


def _key(row: dict[str, Any]) -> tuple[int, str, int]:
    return (row["nmId"], row["dtBonus"], row["newShkId"])


def _supply(row: dict[str, Any]) -> tuple[int, int]:
    return (row["preorderID"], row["supplyID"] or 0)


def run_of(status: dict[str, Any], queue: str = QUEUE) -> dict[str, Any]:
    """A plugin queue's last runs in a one-cabinet status."""
    [cabinet] = status["cabinets"]
    found: list[dict[str, Any]] = [r for r in cabinet["runs"] if r["queue"] == queue]
    assert len(found) == 1
    return found[0]


@pytest.mark.long
def test_the_example_plugins_end_to_end_and_a_stock_process_beside_them(
    tmp_path: Path, sites: list[Path], redis_url: str, prefix: str
) -> None:
    anchor = date.today()
    (tmp_path / "emulator.json").write_text(
        json.dumps(
            {
                "seed": SEED,
                "anchor_date": anchor.isoformat(),
                "time_scale": SCALE,
                "page_size": {"supplies.list": SUPPLIES_PAGE},
            }
        )
    )
    db = tmp_path / "wbsync.db"
    emulator_port, run_port, stock_port = free_port(), free_port(), free_port()
    common = {
        "WBSYNC_DATABASE_URL": f"sqlite+aiosqlite:///{db}",
        "WBSYNC_REDIS_URL": redis_url,
        "WBSYNC_REDIS_PREFIX": prefix,
        "WBSYNC_SECRET_KEY": SECRET,
        "WBSYNC_API_KEYS": f'["{API_KEY}"]',
        "WBSYNC_TIME_SCALE": str(SCALE),
        "WBSYNC_WB_BASE_URL": f"http://127.0.0.1:{emulator_port}",
    }
    with_plugin = plugin_env(
        *sites,
        **common,
        WBSYNC_PLUGINS='["deductions", "supplies"]',
        # A page of deductions every 3 WB minutes (1.8 s), not WB's one a minute (0.6 s):
        # storing a page of 1000 rows on a busy machine can take longer than 0.6 s, and then
        # page 2 finds its token back and never defers.
        WBSYNC_LIMIT_OVERRIDES=json.dumps(
            {DEDUCTIONS_GROUP: {"period_s": 180, "limit": 1, "burst": 1}}
        ),
    )
    stock = plugin_env(*sites, **common, WBSYNC_PLUGINS="[]")

    migrated = run_wbsync(with_plugin, "migrate")
    assert "tables created for declared datasets: " in migrated
    made = migrated.rsplit(": ", 1)[1]  # wbsync's report tasks' tables come first
    assert made.strip().endswith("wb_deductions, wb_supplies"), made
    token = Emulator(EmulatorConfig(seed=SEED)).token(SELLER)
    run_wbsync(with_plugin, "cabinets", "add", "shop", "--token", token)

    emulator = ["emulator", "--port", str(emulator_port), "-c", str(tmp_path / "emulator.json")]
    emulator += ["--sandbox-port", str(free_port())]
    run = ["run", "--with-api", "--queues", f"{QUEUE},{SUPPLIES_QUEUE}", "--port", str(run_port)]
    expected = sorted(_expected_rows(anchor), key=_key)
    assert len(expected) > 2000  # three pages of 1000: waits on the plugin's bucket
    with (
        serving(emulator, with_plugin, f"http://127.0.0.1:{emulator_port}/"),
        serving(run, with_plugin, f"http://127.0.0.1:{run_port}/healthz"),
    ):
        deadline = time.monotonic() + 90
        while len(_stored(db)) < len(expected):
            assert time.monotonic() < deadline, f"{len(_stored(db))} of {len(expected)} rows"
            time.sleep(0.1)
        assert sorted(_stored(db), key=_key) == expected
        # The emulator answers the plugin method's expectation as the plugin declares it.
        served = httpx.get(
            f"http://127.0.0.1:{emulator_port}/__emulator/expected/analytics.deductions",
            params={"seller": SELLER},
        )
        assert sorted(served.json(), key=_key) == expected
        # The supplies, paged to the end of the list, are what the emulator says it serves.
        supplies = httpx.get(
            f"http://127.0.0.1:{emulator_port}/__emulator/expected/supplies.list",
            params={"seller": SELLER},
        ).json()
        assert len(supplies) > 3 * SUPPLIES_PAGE
        while len(_stored(db, "wb_supplies")) < len(supplies):
            assert time.monotonic() < deadline, f"{len(_stored(db, 'wb_supplies'))} supplies"
            time.sleep(0.1)
        assert sorted(_stored(db, "wb_supplies"), key=_supply) == sorted(supplies, key=_supply)

        base = f"http://127.0.0.1:{run_port}"
        metrics = httpx.get(f"{base}/metrics", headers=AUTH).text
        deferred = (
            f'wbsync_rate_limit_reschedules_total{{queue="{QUEUE}",scope="{DEDUCTIONS_GROUP}"}}'
        )
        found = [line for line in metrics.splitlines() if line.startswith(deferred)]
        assert len(found) == 1, [line for line in metrics.splitlines() if "reschedules" in line]
        [line] = found
        assert float(line.split()[-1]) >= 1  # page 2 waits 3 minutes after page 1: deferred
        assert f'wbsync_sync_rows_total{{queue="{QUEUE}"}}' in metrics

        deadline = time.monotonic() + 30
        while True:  # the status index is rebuilt within its TTL
            status = httpx.get(f"{base}/api/v1/status", headers=AUTH).json()
            runs = status["cabinets"][0]["runs"] if status["cabinets"] else []
            if {QUEUE, SUPPLIES_QUEUE} <= {r["queue"] for r in runs}:
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert run_of(status)["loaded"] is True
        assert run_of(status)["success_rows"] == len(expected)
        assert run_of(status, SUPPLIES_QUEUE)["loaded"] is True
        assert run_of(status, SUPPLIES_QUEUE)["success_rows"] == len(supplies)
        assert QUEUE in status["queues"] and SUPPLIES_QUEUE in status["queues"]
        assert status["unloaded_queues"] == []
        page = httpx.get(f"{base}/", headers=AUTH)
        assert page.status_code == 200 and f"<td>{QUEUE}</td><td>long</td>" in page.text
        # The plugin's rows are in the change feed like wbsync's own: keyset pages by seq.
        feed = httpx.get(f"{base}/api/v1/datasets/deductions/changes?limit=5", headers=AUTH)
        assert feed.status_code == 200, feed.text
        seqs = [c["seq"] for c in feed.json()["changes"]]
        assert len(seqs) == 5 and seqs == sorted(set(seqs)) and feed.json()["more"] is True

    # ``wbsync export`` loads the plugin before it looks the dataset up.
    exported = run_wbsync(with_plugin, "export", "deductions").splitlines()
    assert sorted((json.loads(line)["data"] for line in exported), key=_key) == expected

    # A stock process on the same database and Redis: not loaded here, never a failure.
    # (tests/cli/test_mixed_fleet.py: a stock worker with settings naming both plugins' queues.)
    assert "is current" in run_wbsync(stock, "migrate")
    with serving(
        ["api", "--port", str(stock_port)], stock, f"http://127.0.0.1:{stock_port}/healthz"
    ):
        base = f"http://127.0.0.1:{stock_port}"
        reply = httpx.get(f"{base}/api/v1/status", headers=AUTH)
        assert reply.status_code == 200, reply.text
        for queue in (QUEUE, SUPPLIES_QUEUE):
            assert run_of(reply.json(), queue)["loaded"] is False
            assert queue not in reply.json()["queues"]
        assert sorted(reply.json()["unloaded_queues"]) == [QUEUE, SUPPLIES_QUEUE]
        page = httpx.get(f"{base}/", headers=AUTH)
        assert page.status_code == 200, page.text
        for queue in (QUEUE, SUPPLIES_QUEUE):
            assert f"{queue} (not loaded here):" in page.text
            assert f'<tr class="unloaded"><td>{queue}</td>' in page.text


@pytest.mark.long
def test_the_example_plugins_dataset_is_discovered_with_its_declared_schema(
    tmp_path: Path, sites: list[Path], redis_url: str, prefix: str
) -> None:
    # This tree's example first on the path: the installed one may be another checkout's.
    env = plugin_env(
        *sites,
        EXAMPLE / "src",
        WBSYNC_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'wbsync.db'}",
        WBSYNC_REDIS_URL=redis_url,
        WBSYNC_REDIS_PREFIX=prefix,
        WBSYNC_SECRET_KEY=SECRET,
        WBSYNC_API_KEYS=f'["{API_KEY}"]',
        WBSYNC_PLUGINS='["deductions"]',
    )
    port = free_port()  # `wbsync api` migrates the new database as it starts
    with serving(["api", "--port", str(port)], env, f"http://127.0.0.1:{port}/healthz"):
        base = f"http://127.0.0.1:{port}/api/v1/datasets"
        listed = httpx.get(base, headers=AUTH).json()["datasets"]
        one = httpx.get(f"{base}/deductions", headers=AUTH).json()
    [found] = [d for d in listed if d["name"] == "deductions"]
    assert found == one
    assert (one["owner"], one["table"], one["kind"], one["scope"]) == (
        "deductions",
        "wb_deductions",
        "stream",
        "cabinet",
    )
    assert [k["column"] for k in one["key"]] == ["nm_id", "dt_bonus", "new_shk_id"]
    schema = one["data_schema"]
    # The declared properties as declared; the key fields required.
    assert schema["properties"]["dtBonus"] == {"type": "string", "format": "date-time"}
    assert schema["properties"]["bonusSumm"] == {"type": "integer"}
    assert schema["required"] == ["nmId", "dtBonus", "newShkId"]
    assert (one["high_water_mark"], one["low_water_mark"]) == (0, None)
