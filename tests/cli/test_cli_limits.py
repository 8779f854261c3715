"""``wbsync limits``: WB's penalties listed from the shared Redis, one lifted by hand.

The commands run in process on the suite's Redis (under the test's prefix) and a database of
their own; the penalty is given through the limiter, as a 429 from WB would give it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from redis.asyncio import Redis
from typer.testing import CliRunner

from wbsync.cli import app
from wbsync.config import get_settings
from wbsync.ratelimit import GLOBAL_GROUP, BucketScope, Limit, LimiterOptions, RateLimiter
from wbsync.syncs.finance import FINANCE_DETAILED_REPORT as FINANCE_EP
from wbsync.wb.tokens import Category, mint_token

SELLER = "5b0e2c1d-7a3f-4e6b-9d8c-0f1e2d3c4b5a"
WORDS = "Too many requests: limited by 5e0c1a2b"
WAIT_MS = 600_000  # ten minutes: far longer than the test, under the limiter's cap
FINANCE = BucketScope(SELLER, FINANCE_EP.group, Limit(period_s=60.0, limit=1, burst=1))
GLOBAL = BucketScope(SELLER, GLOBAL_GROUP, Limit(period_s=1.0, limit=1, burst=1))


@pytest.fixture
def env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_url: str, prefix: str
) -> Iterator[None]:
    monkeypatch.setenv("WBSYNC_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}")
    monkeypatch.setenv("WBSYNC_SECRET_KEY", "cli-limits-test-secret")
    monkeypatch.setenv("WBSYNC_REDIS_URL", redis_url)
    monkeypatch.setenv("WBSYNC_REDIS_PREFIX", prefix)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def invoke(*args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(app, list(args), input=input)


def _on_limiter(redis_url: str, prefix: str, work: Any) -> Any:
    """Run ``work(limiter)`` on a limiter of the test's prefix, then drop the prefix's keys."""

    async def go() -> Any:
        redis = Redis.from_url(redis_url)
        try:
            return await work(RateLimiter(redis, LimiterOptions(prefix=prefix)))
        finally:
            await redis.aclose()

    return asyncio.run(go())


def _cleanup(redis_url: str, prefix: str) -> None:
    async def go() -> None:
        redis = Redis.from_url(redis_url)
        try:
            async for key in redis.scan_iter(match=f"{prefix}:*", count=1000):
                await redis.delete(key)
        finally:
            await redis.aclose()

    asyncio.run(go())


def test_penalties_are_listed_and_one_is_lifted_with_an_audit_line(
    env: None, redis_url: str, prefix: str
) -> None:
    token = mint_token(key="k" * 32, seller_id=SELLER, categories=[Category.FINANCE])
    assert invoke("cabinets", "add", "shop", "--token", token).exit_code == 0

    async def penalise(limiter: RateLimiter) -> None:
        await limiter.penalize(FINANCE, WAIT_MS, words=WORDS)
        await limiter.penalize(GLOBAL, WAIT_MS / 2)

    try:
        _on_limiter(redis_url, prefix, penalise)
        _list_then_lift(redis_url, prefix)
    finally:
        _cleanup(redis_url, prefix)


def _list_then_lift(redis_url: str, prefix: str) -> None:
    listed = invoke("limits", "penalties", "--json")
    assert listed.exit_code == 0, listed.output
    finance, seller = json.loads(listed.stdout)
    assert finance["group"] == FINANCE_EP.group and finance["words"] == WORDS
    assert [c["name"] for c in finance["cabinets"]] == ["shop"]
    assert seller["global_limiter"] and seller["words"] is None
    table = invoke("limits", "penalties")
    assert table.exit_code == 0 and "shop (#1)" in table.stdout and WORDS in table.stdout
    assert f"{GLOBAL_GROUP} (global limiter)" in table.stdout

    lifted = invoke("limits", "lift", "shop", FINANCE_EP.group)
    assert lifted.exit_code == 0, lifted.output
    assert f"lifted the penalty of cabinet 1 'shop' on {FINANCE_EP.group}" in lifted.stdout
    [audit] = [json.loads(line) for line in lifted.stderr.splitlines() if "lifted" in line]
    assert audit["level"] == "WARNING" and audit["cabinet"] == "1"
    assert (
        "by the command line (user " in audit["msg"] and f"group {FINANCE_EP.group}" in audit["msg"]
    )
    assert "remained" in audit["msg"] and WORDS in audit["msg"]

    async def admits(limiter: RateLimiter) -> bool:
        return (await limiter.try_acquire(FINANCE)).acquired

    assert _on_limiter(redis_url, prefix, admits)  # at once: no wait is left
    left = json.loads(invoke("limits", "penalties", "--json").stdout)
    assert [p["group"] for p in left] == [GLOBAL_GROUP]


def test_lifting_what_is_not_there_says_which(env: None) -> None:
    token = mint_token(key="k" * 32, seller_id=SELLER, categories=[Category.FINANCE])
    assert invoke("cabinets", "add", "shop", "--token", token).exit_code == 0
    none = invoke("limits", "lift", "shop", FINANCE_EP.group)
    assert none.exit_code == 1
    assert f"cabinet 1 'shop' (seller {SELLER}) has no penalty in force on" in none.output
    missing = invoke("limits", "lift", "nope", GLOBAL_GROUP)
    assert missing.exit_code == 1 and "no cabinet 'nope'" in missing.output
    bad = invoke("limits", "lift", "shop", "no-such-group")
    assert bad.exit_code == 1 and "no limit group 'no-such-group'" in bad.output
    lift = typer.main.get_command(app).commands["limits"].commands["lift"]  # type: ignore[attr-defined]
    [group] = [p for p in lift.params if p.name == "group"]
    assert f"`{GLOBAL_GROUP}` for the seller's global limiter" in group.help
    empty = invoke("limits", "penalties")
    assert empty.exit_code == 0 and "no penalty from WB is in force" in empty.stdout
