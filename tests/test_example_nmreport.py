"""The report-task example plugin (examples/wbsync-nmreport) end to end, in processes that load
it: the emulator serving WB's seller-analytics CSV reports (a POST create carrying the seller's
own id, the status read from a list, a ZIP archive of a CSV file), and ``wbsync run`` syncing
its queue through the real job stack (BullMQ, the reschedule service, the limiter, SQLite).

Every row of two reports stored, typed as the dataset declares; the job deferred with reason
``report`` while WB builds, with one attempt allowed and none spent; a CSV past
``WBSYNC_WB_MAX_CSV_ROWS`` refused with that reason and nothing stored; a report WB does not
know (a saved id the emulator never made) made again. Like tests/test_example_plugin.py, every
process that loads the plugin is a subprocess: this one stays stock.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.api import API_KEY, AUTH
from tests.support.examples import example, example_sites, run_wbsync, serving, stored
from tests.support.plugins import plugin_env
from wbsync.emulator import Emulator, EmulatorConfig
from wbsync.system import clock
from wbsync.system.procs import free_port

NMREPORT = example("nmreport")
QUEUE = "wb-nm-report-sync"
TABLE = "wb_nm_report_history"
CREATE, LIST, FILE = (f"analytics.nm_report_{m}" for m in ("create", "list", "file"))
SELLER = "5b1f0c2e-8d4a-4c7e-9f31-2a6d0e9c4b18"
SCALE = 0.01  # WB's minute is 0.6 s; a report is built 0.2 s after its creation
SEED = 11
PRODUCTS = 25  # the emulator's default listings a seller
HORIZON_DAYS = 40  # two reports: 31 days, then 9
SECRET = "example-plugin-secret-key"


@pytest.fixture(scope="module")
def sites(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The plugin on PYTHONPATH: this tree's sources first (an installed one may be another
    checkout's), and its entry points when it is not installed."""
    return [NMREPORT / "src", *example_sites(tmp_path_factory.mktemp("site"), "nmreport")]


def _history(anchor: date) -> list[dict[str, Any]]:
    """What the emulator's reports hold over the horizon, computed with the example's own
    generator (typed as WB documents the CSV's columns)."""
    sys.path.insert(0, str(NMREPORT / "src"))
    try:
        from wbsync_nmreport.emulated import history_rows
    finally:
        sys.path.remove(str(NMREPORT / "src"))
    from wbsync.emulator.extend import seller_data

    data = seller_data(EmulatorConfig(seed=SEED, anchor_date=anchor), SELLER)
    rows: list[dict[str, Any]] = history_rows(
        data, anchor - timedelta(days=HORIZON_DAYS - 1), anchor
    )
    return sorted(rows, key=_key)


def _key(row: dict[str, Any]) -> tuple[int, str]:
    return (row["nmID"], row["dt"])


@dataclass
class Deployment:
    """A database, the emulator and ``wbsync run --with-api`` with the plugin loaded."""

    db: Path
    anchor: date
    api: str
    emulator: str

    def status_run(self) -> dict[str, Any]:
        """The queue's run record in the one cabinet's status."""
        status = httpx.get(f"{self.api}/api/v1/status", headers=AUTH).json()
        runs = status["cabinets"][0]["runs"] if status["cabinets"] else []
        found: list[dict[str, Any]] = [r for r in runs if r["queue"] == QUEUE]
        return found[0] if found else {}

    def requests(self, method: str) -> int:
        """Requests of ``method`` the emulator served the seller."""
        counted = httpx.get(f"{self.emulator}/__emulator/counters").json()["sellers"]
        return int(counted.get(SELLER, {}).get(method, {}).get("requests", 0))


@contextmanager
def _deployment(
    tmp_path: Path,
    sites: list[Path],
    redis_url: str,
    prefix: str,
    *,
    before: Callable[[Path, date], None] = lambda db, anchor: None,
    **settings: str,
) -> Iterator[Deployment]:
    """Migrate, add the cabinet, ``before(db, anchor)``, then serve the emulator and a worker
    of the plugin's queue with one attempt a job (a spent attempt would fail it)."""
    anchor = clock.wb_today()  # the worker's today, so its windows end on the emulator's day
    (tmp_path / "emulator.json").write_text(
        json.dumps({"seed": SEED, "anchor_date": anchor.isoformat(), "time_scale": SCALE})
    )
    db = tmp_path / "wbsync.db"
    emulator_port, run_port = free_port(), free_port()
    env = plugin_env(
        *sites,
        WBSYNC_DATABASE_URL=f"sqlite+aiosqlite:///{db}",
        WBSYNC_REDIS_URL=redis_url,
        WBSYNC_REDIS_PREFIX=prefix,
        WBSYNC_SECRET_KEY=SECRET,
        WBSYNC_API_KEYS=f'["{API_KEY}"]',
        WBSYNC_TIME_SCALE=str(SCALE),
        WBSYNC_WB_BASE_URL=f"http://127.0.0.1:{emulator_port}",
        WBSYNC_PLUGINS='["nmreport"]',
        WBSYNC_SYNC_REPORT_HORIZON_DAYS=str(HORIZON_DAYS),
        WBSYNC_JOB_ATTEMPTS="1",
        **settings,
    )
    assert TABLE in run_wbsync(env, "migrate")
    token = Emulator(EmulatorConfig(seed=SEED)).token(SELLER)
    run_wbsync(env, "cabinets", "add", "shop", "--token", token)
    before(db, anchor)
    emulator = ["emulator", "--port", str(emulator_port), "-c", str(tmp_path / "emulator.json")]
    emulator += ["--sandbox-port", str(free_port())]
    run = ["run", "--with-api", "--queues", QUEUE, "--port", str(run_port)]
    emulator_url, api = f"http://127.0.0.1:{emulator_port}", f"http://127.0.0.1:{run_port}"
    with serving(emulator, env, f"{emulator_url}/"), serving(run, env, f"{api}/healthz"):
        yield Deployment(db, anchor, api, emulator_url)


def _until(check: Callable[[], bool], what: Callable[[], str], timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, what()
        time.sleep(0.05)


@pytest.mark.long
def test_every_row_of_the_reports_is_stored_with_the_slot_given_back_while_wb_builds(
    tmp_path: Path, sites: list[Path], redis_url: str, prefix: str
) -> None:
    with _deployment(tmp_path, sites, redis_url, prefix) as d:
        want = _history(d.anchor)
        assert len(want) == PRODUCTS * HORIZON_DAYS
        waits: set[str] = set()
        attempts: set[int] = set()

        def done() -> bool:
            jobs = httpx.get(f"{d.api}/api/v1/cabinets/1/jobs", headers=AUTH).json()
            for job in jobs:
                if job["queue"] == QUEUE and job["state"] == "delayed":
                    waits.add(str(job["deferred_by"]))
                    attempts.add(job["attempts_made"])
            return len(stored(d.db, TABLE)) >= len(want)

        _until(done, lambda: f"{len(stored(d.db, TABLE))} of {len(want)} rows")
        # Every row, its cells typed as the dataset declares (integers, the conversion a number).
        assert sorted(stored(d.db, TABLE), key=_key) == want
        assert isinstance(want[0]["ordersCount"], int)
        assert isinstance(want[0]["addToCartConversion"], float)
        # While WB built each report the job waited delayed, labelled, spending no attempt
        # (it has one: a spent one would have failed it).
        label = "waiting on WB's report sales funnel by item (task "
        assert any(w.startswith(label) for w in waits), waits
        assert attempts == {0}
        metrics = httpx.get(f"{d.api}/metrics", headers=AUTH).text
        deferred = f'wbsync_deferrals_total{{queue="{QUEUE}",reason="report"}}'
        [line] = [m for m in metrics.splitlines() if m.startswith(deferred)]
        assert float(line.split()[-1]) >= 2  # each of the two reports at least once
        _until(lambda: d.status_run().get("success_rows") == len(want), lambda: str(d.status_run()))
        assert d.status_run()["failure_at"] is None
        assert (d.requests(CREATE), d.requests(FILE)) == (2, 2)


@pytest.mark.long
def test_a_csv_past_its_row_bound_fails_the_job_with_the_bound_and_stores_nothing(
    tmp_path: Path, sites: list[Path], redis_url: str, prefix: str
) -> None:
    # The first report is 25 items x 31 days: 775 rows. An unusable reply spends the job's
    # failure budget, as a 5xx does: two units, two downloads at most.
    with _deployment(
        tmp_path,
        sites,
        redis_url,
        prefix,
        WBSYNC_WB_MAX_CSV_ROWS="100",
        WBSYNC_JOB_FAILURE_BUDGET="2",
    ) as d:
        _until(lambda: bool(d.status_run().get("failure_reason")), lambda: str(d.status_run()))
        reason = d.status_run()["failure_reason"]
        assert "holds more than WBSYNC_WB_MAX_CSV_ROWS (100) rows" in reason, reason
        assert f"method={FILE}" in reason, reason
        assert stored(d.db, TABLE) == []
        assert d.requests(FILE) == 2


@pytest.mark.long
def test_a_report_wb_does_not_know_is_made_again(
    tmp_path: Path, sites: list[Path], redis_url: str, prefix: str
) -> None:
    stale = str(uuid.uuid4())

    def saved_before(db: Path, anchor: date) -> None:
        """A cursor saved by an earlier run, at the download of the first window's report, an
        id WB does not know (past its 48 hours, or another WB's)."""
        first = anchor - timedelta(days=HORIZON_DAYS - 1)
        cursor = {
            "end": anchor.isoformat(),
            "date_from": first.isoformat(),
            "date_to": (first + timedelta(days=30)).isoformat(),
            "task_id": stale,
            "created_ms": int(time.time() * 1000),
            "built": True,
        }
        with sqlite3.connect(db) as conn:
            [(cabinet,)] = conn.execute("SELECT id FROM cabinets").fetchall()
            conn.execute(
                "INSERT INTO wb_sync_cursors (cabinet_id, sync, cursor, updated_at) "
                "VALUES (?, ?, ?, ?)",
                (cabinet, QUEUE, json.dumps(cursor), "2026-01-01 00:00:00.000000"),
            )

    with _deployment(tmp_path, sites, redis_url, prefix, before=saved_before) as d:
        want = _history(d.anchor)
        _until(
            lambda: len(stored(d.db, TABLE)) >= len(want),
            lambda: f"{len(stored(d.db, TABLE))} of {len(want)} rows",
        )
        assert sorted(stored(d.db, TABLE), key=_key) == want
        # The stale id's file first (WB: not found), then each window's new report's.
        assert (d.requests(CREATE), d.requests(FILE)) == (2, 3)
        _until(lambda: d.status_run().get("success_rows") == len(want), lambda: str(d.status_run()))
        # WB's words for it, and its list without it.
        token = Emulator(EmulatorConfig(seed=SEED)).token(SELLER)
        headers = {"Authorization": token}
        base = f"{d.emulator}/api/v2/nm-report/downloads"
        reply = httpx.get(f"{base}/file/{stale}", headers=headers)
        assert reply.status_code == 400 and reply.json()["detail"] == "report not found"
        listed = httpx.get(base, params={"filter[downloadIds]": stale}, headers=headers)
        assert listed.status_code == 200 and listed.json() == {"data": []}
        assert httpx.get(f"{base}/file/not-an-id", headers=headers).status_code == 400
