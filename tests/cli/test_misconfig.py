"""Start-up misconfigurations: exit status 2 and one ``error:`` line on stderr that says what to
do; never a traceback.

Every case runs through the command line in this process, in a clean environment (no other
``WBSYNC_*`` variable, a working directory of its own), on the code path the real command takes.
What only a process shows (a thread or a task that holds its exit, or writes to stderr as it
ends) comes from what a command opened before it failed: one case of each connection opened so
(Redis from ``run`` and from the demo, a SQLite file, PostgreSQL) also runs as the real command
in a process of its own.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.api import API_KEY
from tests.support.commands import invoke_clean
from wbsync.store import Database, Store
from wbsync.system.procs import free_port

KEY = "the-secret-key-of-the-stored-cabinet"
QUEUES_LISTED = "queues: rnp-finance-sync, rnp-sections-sync"
REDIS = "{redis}"  # the suite's Redis, filled in at run time
CLOSED = "{closed}"  # a loopback port nothing listens on
KEYED_DB = "{keyed_db}"  # a SQLite file holding one cabinet stored under KEY
FIX_REDIS = "start Redis there or fix the URL"
WRITE_REDIS = "write redis://host:6379/0"


@dataclass(frozen=True)
class Case:
    """One misconfigured start: the command line, its only settings, what the line must say;
    ``process``: it runs as the real command too (the module's docstring says which)."""

    name: str
    argv: tuple[str, ...]
    says: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    process: bool = False


RUN = ("run",)
CASES = [
    Case("run without a Redis URL", RUN, ("WBSYNC_REDIS_URL is not set", "--embedded-redis")),
    Case(
        "api without a Redis URL",
        ("api",),
        ("WBSYNC_REDIS_URL is not set", "--embedded-redis"),
        {"WBSYNC_API_KEYS": f'["{API_KEY}"]'},
    ),
    Case(
        "--embedded-redis beside a Redis URL",
        ("run", "--embedded-redis"),
        ("drop the option or unset the variable",),
        {"WBSYNC_REDIS_URL": REDIS},
    ),
    Case(
        "Redis URL without a scheme (run)",
        RUN,
        ("WBSYNC_REDIS_URL: not a Redis URL", WRITE_REDIS),
        {"WBSYNC_REDIS_URL": "localhost:6379"},
    ),
    Case(
        "Redis URL with a foreign scheme (demo)",
        ("demo", "--json"),
        ("WBSYNC_REDIS_URL: not a Redis URL", WRITE_REDIS),
        {"WBSYNC_REDIS_URL": "http://127.0.0.1:6379/0"},
    ),
    Case(
        "Redis URL with a bad port",
        RUN,
        ("WBSYNC_REDIS_URL: the port is not a number", WRITE_REDIS),
        {"WBSYNC_REDIS_URL": "redis://127.0.0.1:63790000/0"},
    ),
    Case(
        "Redis database that is not a number",
        RUN,
        ("WBSYNC_REDIS_URL: the database number 'db1' is not a number", "end the URL with /0"),
        {"WBSYNC_REDIS_URL": "redis://127.0.0.1:6379/db1"},
    ),
    Case(
        "Redis database out of range",
        RUN,
        ("DB index is out of range", "a database number the server has"),
        {"WBSYNC_REDIS_URL": f"{REDIS}/999"},
    ),
    Case(
        "unreachable Redis (run)",
        RUN,
        (f"Redis at redis://127.0.0.1:{CLOSED}/0 did not answer", FIX_REDIS),
        {"WBSYNC_REDIS_URL": f"redis://127.0.0.1:{CLOSED}/0"},
        process=True,
    ),
    Case(
        "unreachable Redis (demo)",
        ("demo", "--json"),
        ("did not answer", FIX_REDIS),
        {"WBSYNC_REDIS_URL": f"redis://127.0.0.1:{CLOSED}/0"},
        process=True,
    ),
    Case(
        "a fan-out interval of no seconds",
        RUN,
        ("WBSYNC_FANOUT_INTERVALS_S: rnp-finance-sync: give each queue above 0 s",),
        {"WBSYNC_REDIS_URL": REDIS, "WBSYNC_FANOUT_INTERVALS_S": '{"rnp-finance-sync": 0}'},
    ),
    Case(
        "unknown queue in --queues",
        ("run", "--queues", "finance"),
        ("unknown queues ['finance']", QUEUES_LISTED),
        {"WBSYNC_REDIS_URL": REDIS},
    ),
    Case(
        "a bad number in a setting",
        RUN,
        ("WBSYNC_TIME_SCALE: Input should be a valid number", "see docs/settings.md"),
        {"WBSYNC_REDIS_URL": REDIS, "WBSYNC_TIME_SCALE": "fast"},
    ),
    Case(
        "zero jobs at once in WBSYNC_QUEUE_CONCURRENCY",
        RUN,
        ("WBSYNC_QUEUE_CONCURRENCY: pricing-bulk: give each queue at least 1 job at once",),
        {"WBSYNC_REDIS_URL": REDIS, "WBSYNC_QUEUE_CONCURRENCY": '{"pricing-bulk": 0}'},
    ),
    Case(
        "WBSYNC_QUEUE_CONCURRENCY that is not JSON",
        RUN,
        ("WBSYNC_QUEUE_CONCURRENCY: not valid JSON; write it as JSON",),
        {"WBSYNC_REDIS_URL": REDIS, "WBSYNC_QUEUE_CONCURRENCY": "pricing-bulk=3"},
    ),
    Case(
        "a misspelt setting",
        RUN,
        ("WBSYNC_REDIS_ULR is not a setting (did you mean WBSYNC_REDIS_URL?)",),
        {"WBSYNC_REDIS_ULR": REDIS},
    ),
    Case(
        "one section's WB host as the base URL of every section",
        RUN,
        (
            "WBSYNC_WB_BASE_URL: https://finance-api.wildberries.ru is WB's host of the finance "
            "section only; it cannot serve statistics, promotion",
            "WBSYNC_WB_BASE_URLS",
            "leave WBSYNC_WB_BASE_URL unset",
        ),
        {"WBSYNC_REDIS_URL": REDIS, "WBSYNC_WB_BASE_URL": "https://finance-api.wildberries.ru"},
    ),
    Case(
        "a WB host given for another section",
        ("demo", "--json"),
        ('WBSYNC_WB_BASE_URLS["statistics"]: https://advert-api.wildberries.ru',),
        {"WBSYNC_WB_BASE_URLS": '{"statistics": "https://advert-api.wildberries.ru"}'},
    ),
    Case(
        "no secret key with cabinets stored",
        RUN,
        ("WBSYNC_SECRET_KEY: not set", "1 cabinet"),
        {"WBSYNC_REDIS_URL": REDIS, "WBSYNC_DATABASE_URL": KEYED_DB},
    ),
    Case(
        "a wrong secret key",
        RUN,
        ("WBSYNC_SECRET_KEY: not the key",),
        {
            "WBSYNC_REDIS_URL": REDIS,
            "WBSYNC_DATABASE_URL": KEYED_DB,
            "WBSYNC_SECRET_KEY": "not-the-secret-key",
        },
        process=True,
    ),
    Case(
        "a database URL that is not a URL",
        RUN,
        ("WBSYNC_DATABASE_URL is not a database URL", "use sqlite+aiosqlite:///./wbsync.db"),
        {"WBSYNC_REDIS_URL": REDIS, "WBSYNC_DATABASE_URL": "wbsync.db"},
    ),
    Case(
        "a synchronous database driver",
        RUN,
        ("WBSYNC_DATABASE_URL driver 'sqlite' is not supported", "use 'sqlite+aiosqlite'"),
        {"WBSYNC_REDIS_URL": REDIS, "WBSYNC_DATABASE_URL": "sqlite:///./wbsync.db"},
    ),
    Case(
        "unreachable PostgreSQL",
        RUN,
        ("WBSYNC_DATABASE_URL: database postgresql+asyncpg://wbsync:***@", "start the database"),
        {
            "WBSYNC_REDIS_URL": REDIS,
            "WBSYNC_DATABASE_URL": f"postgresql+asyncpg://wbsync:pw@127.0.0.1:{CLOSED}/wbsync",
        },
        process=True,
    ),
    Case(
        "a SQLite file in a missing directory (cabinets list)",
        ("cabinets", "list"),
        ("unable to open database file", "a directory that exists"),
        {"WBSYNC_DATABASE_URL": "sqlite+aiosqlite:///./no/such/dir/wbsync.db"},
        process=True,
    ),
    Case(
        "a missing emulator config file",
        ("emulator", "--config", "missing.json"),
        ("cannot read emulator config missing.json", "give --config a readable JSON file"),
    ),
    Case(
        "an emulator config with an unknown field",
        ("emulator", "--config", "bad.json"),
        ("invalid emulator config bad.json: sizez: Extra inputs", "fix the file"),
    ),
]


@dataclass(frozen=True)
class Outcome:
    """What the command did, and what its line must say (with the run's real values)."""

    returncode: int
    stderr: str
    says: tuple[str, ...]


def _fill(value: str, places: dict[str, str]) -> str:
    for mark, real in places.items():
        value = value.replace(mark, real)
    return value


def _setup(case: Case, cwd: Path, places: dict[str, str]) -> dict[str, str]:
    """The case's working directory made, and its settings with the real values."""
    cwd.mkdir()
    (cwd / "bad.json").write_text('{"sizez": {}}')
    # Stock wbsync: no installed plugin (the example, under `make test`) is loaded; plugins'
    # own refusals are tests/test_plugins.py's.
    return {"WBSYNC_PLUGINS": "[]"} | {k: _fill(v, places) for k, v in case.env.items()}


def _in_process(
    case: Case, cwd: Path, places: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Outcome:
    done = invoke_clean(case.argv, _setup(case, cwd, places), cwd, monkeypatch)
    return Outcome(done.exit_code, done.stderr, tuple(_fill(w, places) for w in case.says))


def _as_process(case: Case, cwd: Path, places: dict[str, str]) -> Outcome:
    env = {"PATH": os.environ["PATH"]} | _setup(case, cwd, places)
    if "PYTHONPATH" in os.environ:  # the wbsync under test, when it is not the installed one
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    done = subprocess.run(
        [sys.executable, "-m", "wbsync", *case.argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return Outcome(done.returncode, done.stderr, tuple(_fill(w, places) for w in case.says))


def _assert_one_line(outcome: Outcome) -> None:
    assert outcome.returncode == 2, outcome.stderr
    assert "Traceback" not in outcome.stderr
    assert outcome.stderr.startswith("error: ") and outcome.stderr.count("\n") == 1, outcome.stderr
    for words in outcome.says:
        assert words in outcome.stderr


async def _store_a_cabinet(url: str) -> None:
    async with Database(url) as db:
        await db.migrate()
        await Store(db, secret_key=KEY).cabinets.add("shop", "a-stored-token", "a-seller")


@pytest.fixture(scope="module")
def places(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The real values of the cases' marks: once a worker."""
    keyed_db = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('misconfig') / 'keyed.db'}"
    asyncio.run(_store_a_cabinet(keyed_db))
    server = urlsplit(redis_url)
    return {
        REDIS: f"{server.scheme}://{server.netloc}",
        CLOSED: str(free_port()),
        KEYED_DB: keyed_db,
    }


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_misconfigured_start_is_one_line_saying_what_to_do(
    case: Case, places: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _assert_one_line(_in_process(case, tmp_path / "case", places, monkeypatch))


PROCESS_CASES = [case for case in CASES if case.process]


@pytest.mark.parametrize("case", PROCESS_CASES, ids=[case.name for case in PROCESS_CASES])
def test_a_process_that_opened_a_connection_ends_with_the_one_line(
    case: Case, places: dict[str, str], tmp_path: Path
) -> None:
    _assert_one_line(_as_process(case, tmp_path / "case", places))
