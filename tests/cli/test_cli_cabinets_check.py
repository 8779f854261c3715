"""``cabinets check``, ``add --check`` and ``import --check`` against the emulator on loopback.

The command runs in a thread (it has its own event loop) while the emulator serves in the test's
loop; Redis and the database are real.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from wbsync.cabinets.cabinet_check import used_sections
from wbsync.cli import app
from wbsync.config import get_settings
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.store import Database, Store
from wbsync.system import clock

SECRET = "cli-check-test-secret-0123456789"
SCALE = 0.1  # WB's /ping: 3 every 3 s, then one a second
SELLERS = [f"0000000{i}-0000-4000-8000-0000000000c0" for i in range(1, 5)]
SECTIONS = [s.name for s in used_sections()]


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        time_scale=SCALE, anchor_date=clock.wb_today(), sizes=SellerSizes(products=3)
    )
    async with running_emulator(config) as emulator:
        yield emulator


@pytest.fixture
def db_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str, emu: Emulator
) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'check.db'}"
    env = {
        "WBSYNC_DATABASE_URL": url,
        "WBSYNC_SECRET_KEY": SECRET,
        "WBSYNC_REDIS_URL": redis_url,
        "WBSYNC_REDIS_PREFIX": prefix,
        "WBSYNC_WB_BASE_URL": emu.base_url,
        "WBSYNC_WB_SANDBOX_BASE_URL": emu.sandbox_url,
        "WBSYNC_TIME_SCALE": str(SCALE),
        # Two event loops in one loaded process (the command's, the emulator's): a request may
        # reach the emulator up to this late relative to the next, and WB's bucket must not see
        # it early (the setting's own purpose, widened for a test machine's jitter).
        "WBSYNC_LIMITER_REFILL_MARGIN_RATIO": "0.25",
        "WBSYNC_LIMITER_REFILL_MARGIN_CAP_MS": "250",
        "WBSYNC_LOG_LEVEL": "WARNING",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    return url


async def cli(*args: str, input: str | None = None) -> Any:
    """The command's result, run in a thread: it starts its own event loop."""
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args), input=input)
    get_settings.cache_clear()
    return result


async def store_cabinet(url: str, name: str, token: str, seller: str) -> None:
    async with Database(url) as db:
        await db.migrate()
        await Store(db, secret_key=SECRET).cabinets.add(name, token, seller)


async def count_cabinets(url: str) -> int:
    async with Database(url) as db:
        await db.migrate()
        return len(await Store(db, secret_key=SECRET).cabinets.list())


def as_json(result: Any) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def sections(report: dict[str, Any], i: int = 0) -> dict[str, dict[str, Any]]:
    return {s["section"]: s for s in report["cabinets"][i]["sections"]}


async def test_a_good_token_passes_every_section_and_its_seller_is_confirmed(
    emu: Emulator, db_url: str
) -> None:
    token = emu.token(SELLERS[0])
    await store_cabinet(db_url, "shop", token, SELLERS[0])
    result = await cli("cabinets", "check", "shop")
    assert result.exit_code == 0, result.output
    assert token not in result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("cabinet 1 'shop': personal token, expires ")
    assert "(in 179 days)" in lines[0] or "(in 180 days)" in lines[0]
    assert lines[1].split()[:2] == ["seller", "confirmed"] and SELLERS[0] in lines[1]
    assert [line.split()[:2] for line in lines[2:]] == [[s, "ok"] for s in SECTIONS]
    assert "finance.detailed_report 1 per 60 s, burst 1" in result.stdout
    # One /ping a host and one seller-info, no more.
    pings = {f"{s}.ping": 1 for s in SECTIONS}
    served = emu.counters.snapshot()["sellers"][SELLERS[0]]
    assert {m: c["requests"] for m, c in served.items()} == {**pings, "tariffs.seller_info": 1}


async def test_json_shape_and_a_token_of_another_seller_is_flagged(
    emu: Emulator, db_url: str
) -> None:
    await store_cabinet(db_url, "claims-one", emu.token(SELLERS[1]), SELLERS[0])
    result = await cli("cabinets", "check", "claims-one", "--json")
    assert result.exit_code == 1, result.output
    report = as_json(result)
    assert set(report) == {"ok", "cabinets"} and report["ok"] is False
    cabinet = report["cabinets"][0]
    assert set(cabinet) == {"cabinet", "ok", "token", "seller", "sections"}
    assert cabinet["cabinet"] == {"id": 1, "name": "claims-one"}
    assert set(cabinet["token"]) == {
        "type",
        "expires_at",
        "expires_in_days",
        "expired",
        "expiring_soon",
    }
    assert cabinet["seller"]["status"] == "mismatch"
    assert cabinet["seller"]["claimed_seller_id"] == SELLERS[0]
    assert cabinet["seller"]["seller_id"] == SELLERS[1]
    finance = sections(report)["finance"]
    assert set(finance) == {
        "section",
        "host",
        "status",
        "reachable",
        "accepted",
        "category",
        "category_granted",
        "http_status",
        "words",
        "limits",
    }
    assert (finance["host"], finance["status"], finance["http_status"]) == (
        "finance-api",
        "ok",
        200,
    )
    assert finance["limits"] == {
        "finance.detailed_report": {"period_s": 60.0, "limit": 1, "burst": 1}
    }


async def test_a_token_missing_a_category_is_refused_there_only(emu: Emulator, db_url: str) -> None:
    categories = [c for c in ("content", "analytics", "prices", "statistics", "promotion")]
    await store_cabinet(
        db_url, "no-finance", emu.token(SELLERS[0], categories=categories), SELLERS[0]
    )
    result = await cli("cabinets", "check", "no-finance", "--json")
    assert result.exit_code == 1, result.output
    found = sections(as_json(result))
    finance = found.pop("finance")
    assert (finance["status"], finance["http_status"], finance["accepted"]) == (
        "refused",
        401,
        False,
    )
    assert finance["category_granted"] is False and "token scope not allowed" in finance["words"]
    assert {s["status"] for s in found.values()} == {"ok"}
    assert as_json(result)["cabinets"][0]["seller"]["status"] == "confirmed"


async def test_an_expired_token_is_refused_in_wbs_words(emu: Emulator, db_url: str) -> None:
    old = emu.token(SELLERS[0], lifetime=timedelta(days=-2))
    await store_cabinet(db_url, "old", old, SELLERS[0])
    result = await cli("cabinets", "check", "old")
    assert result.exit_code == 1, result.output
    assert "2 days ago" in result.stdout.splitlines()[0]
    assert "WB said: unauthorized: token problem; token is expired" in result.stdout
    assert "warning: cabinet 'old': the token has expired" in result.stderr


async def test_a_base_token_shows_its_type_and_limits(emu: Emulator, db_url: str) -> None:
    await store_cabinet(db_url, "base", emu.token(SELLERS[0], token_type="base"), SELLERS[0])
    result = await cli("cabinets", "check", "base", "--json")
    cabinet = as_json(result)["cabinets"][0]
    assert cabinet["token"]["type"] == "base"
    found = sections(as_json(result))
    assert found["finance"]["limits"] == {
        "finance.detailed_report": {"period_s": 86400.0, "limit": 2, "burst": 1}
    }
    # WB gives Base tokens no stocks report.
    assert found["analytics"]["limits"]["analytics.stocks_wb_warehouses"] is None
    assert result.exit_code == 0, result.output


async def test_all_paces_many_cabinets_of_few_sellers_without_a_429(
    emu: Emulator, db_url: str
) -> None:
    # Four cabinets a seller: four /pings a host a seller, past WB's burst of 3.
    for i in range(8):
        seller = SELLERS[i % 2]
        await store_cabinet(db_url, f"shop-{i}", emu.token(seller), seller)
    result = await cli("cabinets", "check", "--all", "--json")
    assert result.exit_code == 0, result.output
    report = as_json(result)
    assert report["ok"] is True and len(report["cabinets"]) == 8
    assert emu.counters.total("rate_limited") == 0
    assert emu.counters.total("requests") == 8 * (len(SECTIONS) + 1)


async def test_add_check_refuses_a_token_wb_refuses_and_stores_nothing(
    emu: Emulator, db_url: str
) -> None:
    bad = emu.token(SELLERS[0], categories=["content"])
    result = await cli("cabinets", "add", "shop", "--check", input=bad + "\n")
    assert result.exit_code == 2, result.output
    assert "token scope not allowed for this path" in result.stderr
    assert "nothing stored" in result.stderr and bad not in result.output
    assert await count_cabinets(db_url) == 0
    good = emu.token(SELLERS[0])
    added = await cli("cabinets", "add", "shop", "--check", input=good + "\n")
    assert added.exit_code == 0, added.output
    assert "added cabinet 1 'shop'" in added.stdout
    assert await count_cabinets(db_url) == 1


async def test_import_check_stores_nothing_when_wb_refuses_a_line(
    emu: Emulator, db_url: str, tmp_path: Path
) -> None:
    good, bad = emu.token(SELLERS[0]), emu.token(SELLERS[1], categories=["finance"])
    source = tmp_path / "cabinets.csv"
    source.write_text(f"name,token\na,{good}\nb,{bad}\n", "utf-8")
    result = await cli("cabinets", "import", str(source), "--check")
    assert result.exit_code == 2, result.output
    assert "refused: 'b'" in result.stderr and good not in result.output
    assert await count_cabinets(db_url) == 0
    # Without --check nothing is asked of WB.
    before = emu.counters.total("requests")
    plain = await cli("cabinets", "import", str(source))
    assert plain.exit_code == 0 and emu.counters.total("requests") == before
    assert await count_cabinets(db_url) == 2


async def test_check_needs_one_cabinet_or_all(db_url: str) -> None:
    assert (await cli("cabinets", "check")).exit_code == 2
    assert (await cli("cabinets", "check", "x", "--all")).exit_code == 2


async def test_a_ping_wb_does_not_answer_is_unreachable_not_refused(
    emu: Emulator, db_url: str
) -> None:
    await store_cabinet(db_url, "shop", emu.token(SELLERS[0]), SELLERS[0])
    emu.disable("content.ping")
    result = await cli("cabinets", "check", "shop", "--json")
    assert result.exit_code == 1, result.output
    content = sections(as_json(result))["content"]
    assert (content["status"], content["reachable"], content["accepted"]) == (
        "unreachable",
        False,
        None,
    )
    assert "temporarily disabled" in content["words"]
