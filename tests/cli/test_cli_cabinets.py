"""The cabinet lifecycle on the command line: token, activate, rename, import, list --json."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from wbsync.cabinets import cabinet_import
from wbsync.cli import app
from wbsync.config import Settings, get_settings
from wbsync.store import Database, Store
from wbsync.wb.tokens import Category, mint_token

SELLER = "5b0e2c1d-7a3f-4e6b-9d8c-0f1e2d3c4b5a"
OTHER = "6c1f3d2e-8b4a-4f7c-8e9d-1a2b3c4d5e6f"
SECRET = "cli-cabinets-test-secret-0123456789"
IMPORTED = 1_000


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("WBSYNC_DATABASE_URL", url)
    monkeypatch.setenv("WBSYNC_SECRET_KEY", SECRET)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


EVERY = tuple(c for c in Category if c is not Category.READ_ONLY)


def token(seller: str = SELLER, categories: tuple[Category, ...] = EVERY) -> str:
    return mint_token(key="k" * 32, seller_id=seller, categories=categories)


def invoke(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(app, list(args), input=input)


async def _with_store(url: str, work: Any) -> Any:
    async with Database(url) as db:
        return await work(Store(db, secret_key=SECRET))


def test_replacing_a_token_keeps_rows_and_cursors(db_url: str) -> None:
    first = token(categories=(Category.FINANCE,))
    assert invoke("cabinets", "add", "shop", input=first + "\n").exit_code == 0

    async def fill(store: Store) -> None:
        await store.upsert("finance_report", 1, [{"rrdId": 7, "x": 1}, {"rrdId": 8, "x": 2}])
        await store.cursors.save(1, "rnp-finance-sync", {"rrdId": 8})

    asyncio.run(_with_store(db_url, fill))
    second = token()
    replaced = invoke("cabinets", "token", "shop", input=second + "\n")
    assert replaced.exit_code == 0, replaced.output
    assert "replaced the token of cabinet 1 'shop'" in replaced.output
    assert first not in replaced.output and second not in replaced.output

    async def check(store: Store) -> tuple[int, Any, str]:
        cabinet = await store.cabinets.get("shop")
        return (
            await store.count("finance_report", 1),
            await store.cursors.get(1, "rnp-finance-sync"),
            cabinet.token(),
        )

    assert asyncio.run(_with_store(db_url, check)) == (2, {"rrdId": 8}, second)
    foreign = invoke("cabinets", "token", "1", "--token", token(OTHER))
    assert foreign.exit_code == 1 and f"seller {OTHER}" in foreign.output
    assert "add it as a new cabinet" in foreign.output
    missing = invoke("cabinets", "token", "nope", "--token", second)
    assert missing.exit_code == 1 and "no cabinet 'nope'" in missing.output


def test_add_and_token_say_which_queues_the_token_cannot_serve(db_url: str) -> None:
    reply = invoke("cabinets", "add", "shop", "--token", token(categories=(Category.FINANCE,)))
    assert reply.exit_code == 0
    assert "warning: rnp-sections-sync: token lacks category 'statistics'" in reply.output
    assert "warning: rnp-finance-sync" not in reply.output
    assert "warning: booking-slot-monitor" not in reply.output  # needs no category
    reply = invoke("cabinets", "token", "shop", "--token", token())
    assert reply.exit_code == 0 and "warning" not in reply.output


def test_import_summarises_the_queues_tokens_cannot_serve_one_line_each(db_url: str) -> None:
    finance_only = token(categories=(Category.FINANCE,))
    lines = ["name,token"] + [f"shop-{i},{finance_only}" for i in range(10)]
    reply = invoke("cabinets", "import", "-", input="\n".join(lines) + "\n")
    assert reply.exit_code == 0, reply.output
    warnings = [line for line in reply.output.splitlines() if line.startswith("warning:")]
    # One line per queue the token cannot serve, not one per cabinet and queue.
    assert warnings and len(warnings) == len({line.split(":")[1] for line in warnings})
    assert (
        "warning: rnp-sections-sync: token lacks category 'statistics' needed by "
        "statistics.orders: 10 cabinets ('shop-0', 'shop-1', 'shop-2' and 7 more; "
        "--json lists them)"
    ) in warnings
    assert not any("rnp-finance-sync" in line for line in warnings)


def test_deactivate_activate_rename_and_list_json(db_url: str) -> None:
    assert invoke("cabinets", "add", "shop", "--token", token()).exit_code == 0
    assert invoke("cabinets", "add", "other", "--token", token(OTHER)).exit_code == 0
    assert invoke("cabinets", "deactivate", "shop").exit_code == 0
    listed = json.loads(invoke("cabinets", "list", "--json").output)
    assert [(c["name"], c["active"]) for c in listed] == [("shop", False), ("other", True)]
    assert invoke("cabinets", "activate", "shop").exit_code == 0
    renamed = invoke("cabinets", "rename", "shop", "north-shop")
    assert renamed.exit_code == 0 and "renamed cabinet 1 to 'north-shop'" in renamed.output
    taken = invoke("cabinets", "rename", "north-shop", "other")
    assert taken.exit_code == 1 and "'other' already exists" in taken.output
    listed = json.loads(invoke("cabinets", "list", "--json").output)
    assert listed[0] | {"created_at": None} == {
        "id": 1,
        "name": "north-shop",
        "seller_id": SELLER,
        "active": True,
        "created_at": None,
    }
    table = invoke("cabinets", "list").output  # piped: nothing cut to fit 80 columns
    assert SELLER in table and OTHER in table


def test_import_adds_the_good_lines_and_reports_every_other(db_url: str, tmp_path: Path) -> None:
    assert invoke("cabinets", "add", "shop-0003", "--token", token()).exit_code == 0
    good = token()
    lines = ["name,token"] + [f"shop-{i:04d},{good}" for i in range(IMPORTED)]
    lines[5] = "shop-0004,not-a-token"  # line 6: refused
    lines[8] = ",<no name>"  # line 9: refused
    lines[11] = "shop-0010,"  # line 12: refused
    lines.append(f"shop-0020,{good}")  # a repeat: skipped
    source = tmp_path / "cabinets.csv"
    source.write_text("\n".join(lines) + "\n")
    reply = invoke("cabinets", "import", str(source), "--json")
    assert reply.exit_code == 1  # some lines were refused
    report = json.loads(reply.output)
    assert [(r["line"], r["name"]) for r in report["refused"]] == [
        (6, "shop-0004"),
        (9, None),
        (12, "shop-0010"),
    ]
    assert "token" in report["refused"][0]["reason"]
    assert report["refused"][2]["reason"] == "no token"
    skipped = {(r["line"], r["name"]): r["reason"] for r in report["skipped"]}
    assert skipped == {
        (IMPORTED + 2, "shop-0020"): "the name appears earlier in the input (line 22)",
        (5, "shop-0003"): "a cabinet of this name already exists",
    }
    assert len(report["added"]) == IMPORTED - 4
    assert good not in reply.output
    listed = json.loads(invoke("cabinets", "list", "--json").output)
    assert len(listed) == IMPORTED - 3

    # JSON lines from stdin, the same report as text.
    jsonl = "\n".join(
        [json.dumps({"name": "fresh", "token": good}), "not json", json.dumps({"name": "x"})]
    )
    reply = invoke("cabinets", "import", "-", input=jsonl)
    assert reply.exit_code == 1
    assert "added 1, skipped 0, refused 2" in reply.output
    assert "refused: line 2: not a JSON object" in reply.output
    assert "refused: line 3 'x': no token" in reply.output
    unreadable = invoke("cabinets", "import", str(tmp_path / "missing.csv"))
    assert unreadable.exit_code == 2 and "cannot read" in unreadable.output


def test_settings_lists_every_setting_with_secrets_masked(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    api_key = "k" * 40
    monkeypatch.setenv("WBSYNC_API_KEYS", json.dumps([api_key]))
    monkeypatch.setenv("WBSYNC_REDIS_URL", "redis://user:redis-password@127.0.0.1:6379/0")
    get_settings.cache_clear()
    reply = invoke("settings", "--json")
    assert reply.exit_code == 0, reply.output
    shown = json.loads(reply.output)
    assert set(shown) == {f"WBSYNC_{name.upper()}" for name in Settings.model_fields}
    assert shown["WBSYNC_SECRET_KEY"] == "**********"
    assert shown["WBSYNC_API_KEYS"] == "[1 set]"
    assert shown["WBSYNC_REDIS_URL"] == "redis://user:**********@127.0.0.1:6379/0"
    assert shown["WBSYNC_DATABASE_URL"] == db_url
    table = invoke("settings").output
    for secret in (SECRET, api_key, "redis-password"):
        assert secret not in reply.output and secret not in table
    assert "WBSYNC_TIME_SCALE" in table and "Multiplies every WB period" in table


def test_an_import_past_the_line_bound_adds_nothing_and_says_so(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cabinet_import, "IMPORT_MAX_LINES", 5)
    good = token()
    source = tmp_path / "six.csv"
    source.write_text("name,token\n" + "".join(f"s{i},{good}\n" for i in range(6)))
    reply = invoke("cabinets", "import", str(source))
    assert reply.exit_code == 2 and "at most 5: split the file" in reply.output
    assert json.loads(invoke("cabinets", "list", "--json").output) == []
