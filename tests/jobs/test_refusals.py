"""Refusals no retry fixes, on the emulator over HTTP: each costs one request, spends no attempt,
fails no job, suspends what it applies to with WB's words, and the fan-out feeds nothing
suspended; a new token, an operator (CLI, API) or a probe WB accepts lifts it; an expired token
is never sent; the cursor is kept across a suspension."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from typer.testing import CliRunner

from tests.support.api import API_KEY, AUTH
from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_maker
from tests.support.waiting import wait_for
from wbsync.api import create_app
from wbsync.composition.service import TokenGaps
from wbsync.composition.workers import build_workers
from wbsync.config import get_settings
from wbsync.emulator import Emulator, EmulatorConfig, SellerSizes, running_emulator
from wbsync.emulator.config import FaultRule
from wbsync.jobs.fanout import FanOut
from wbsync.jobs.model import Outcome
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet
from wbsync.store.schema import utcnow
from wbsync.system import clock

SCALE = 0.005  # WB's hour is 18 s
PROBE_S = 21600.0  # the default: scaled, a probe every 108 s (none within a test)
SHORT_PROBE_S = 800.0  # scaled: a probe every 4 s (a loaded machine runs a job well within it)
SELLER = "0000000e-0000-4000-8000-0000000000bb"
FINANCE = "rnp-finance-sync"
METHOD = "finance.detailed_report"


@pytest.fixture
async def emulator() -> AsyncIterator[Emulator]:
    config = EmulatorConfig(
        time_scale=SCALE, anchor_date=clock.wb_today(), sizes=SellerSizes(report_rows=4)
    )
    async with running_emulator(config) as emu:
        yield emu


@pytest.fixture
async def database_url(database_factory: DatabaseFactory, db_backend: str) -> str:
    """SQLite, and PostgreSQL too when WBSYNC_TEST_POSTGRES_URL is set."""
    return await database_factory.new_migrated_url(db_backend)


@pytest.fixture
def probe_s() -> float:
    return PROBE_S


@pytest.fixture
async def runtime(
    redis_url: str, prefix: str, database_url: str, emulator: Emulator, probe_s: float
) -> AsyncIterator[Runtime]:
    async with runtime_maker(
        redis_url,
        prefix,
        database_url,
        emulator.base_url,
        time_scale=SCALE,
        api_keys=[SecretStr(API_KEY)],
        suspension_probe_s=probe_s,
    ) as make:
        yield await make()


async def _cabinet(runtime: Runtime, emulator: Emulator, **token: Any) -> Cabinet:
    raw = emulator.token(SELLER, **token)
    from wbsync.wb.tokens import token_expiry

    return await runtime.store.cabinets.add(
        f"cab-{uuid.uuid4().hex[:8]}", raw, SELLER, token_expires_at=token_expiry(raw)
    )


async def _run(runtime: Runtime, cabinet_id: int) -> list[Outcome]:
    """Enqueue the cabinet's finance job and run it until it is gone (completed) or failed."""
    outcomes: list[Outcome] = []
    [worker] = build_workers(runtime, [FINANCE], concurrency=1, on_outcome=outcomes.append)
    queue = runtime.queue(FINANCE)

    async def gone() -> bool:
        job = await queue.job(str(cabinet_id))
        return job is None or job.state == "failed"

    await worker.start()
    try:
        await queue.enqueue(str(cabinet_id))
        await wait_for(gone)
    finally:
        await worker.close()
    return outcomes


def _fanout(runtime: Runtime) -> tuple[FanOut, TokenGaps]:
    gaps = TokenGaps(runtime)
    fanout = FanOut(
        {FINANCE: runtime.queue(FINANCE)}, gaps.active_ids, {FINANCE: 60.0}, serves=gaps.serves
    )
    return fanout, gaps


async def _fed(runtime: Runtime) -> int:
    fanout, _ = _fanout(runtime)
    reports = await fanout.run_once([FINANCE])
    added = reports[FINANCE].added
    if added:  # take it back: the caller only asked whether it would be fed
        await runtime.queue(FINANCE).obliterate()
    return added


REVOKED = "revoked"
KINDS: dict[str, tuple[int, str, str | None, str]] = {
    # case: (status, kind, section, WB's words in the suspension)
    REVOKED: (401, "token", None, "token problem; token is revoked"),
    "expired_at_wb": (401, "token", None, "token problem; token is expired"),
    "category": (401, "category", "finance", "token scope not allowed for this path"),
    "token_type": (
        403,
        "token_type",
        "finance",
        "Access denied: token does not satisfy the method's requirements",
    ),
    "payment": (402, "payment", "finance", "not enough balance for the paid service"),
    "refused_400": (400, "refused", "finance", "token type not allowed for this seller"),
}


def _refuse(emulator: Emulator, cabinet: Cabinet, case: str) -> None:
    status, _, _, words = KINDS[case]
    if case == REVOKED:
        emulator.revoke(cabinet.token())
    elif case == "payment":
        emulator.set_balance(SELLER, empty=True, method=METHOD)
    else:
        title = {401: "unauthorized", 403: "forbidden", 400: "bad request"}[status]
        emulator.set_faults(
            [
                FaultRule(
                    kind="refuse",
                    method=METHOD,
                    status=status,
                    share=1.0,
                    title=title,
                    words=words if status != 401 else f"token problem; {words.split('; ')[-1]}",
                )
            ]
        )


@pytest.mark.parametrize("case", list(KINDS))
async def test_a_refusal_for_good_costs_one_request_no_attempt_and_suspends(
    runtime: Runtime, emulator: Emulator, case: str
) -> None:
    status, kind, section, words = KINDS[case]
    cabinet = await _cabinet(runtime, emulator)
    _refuse(emulator, cabinet, case)

    outcomes = await _run(runtime, cabinet.id)

    assert [o.outcome for o in outcomes] == ["completed"]
    result = outcomes[0].result
    assert result["outcome"] == "needs_attention"
    assert (result["kind"], result["section"], result["status"]) == (kind, section, status)
    assert words.split("; ")[-1] in result["words"]
    assert emulator.counters.total() == 1
    assert await runtime.queue(FINANCE).job(str(cabinet.id)) is None  # not failed, not retried
    [held] = await runtime.store.suspensions()
    assert (held.cabinet_id, held.section, held.kind) == (cabinet.id, section, kind)
    assert held.words is not None and words.split("; ")[-1] in held.words
    assert held.probe_at is not None and held.probe_at > held.since
    [record] = await runtime.store.runs.of_cabinets([cabinet.id])
    assert (record.failure_reason or "").startswith("NeedsAttention: ")
    assert record.failure_attempts == 0

    assert await _fed(runtime) == 0
    assert emulator.counters.total() == 1


async def test_a_known_expired_token_is_never_sent(runtime: Runtime, emulator: Emulator) -> None:
    cabinet = await _cabinet(runtime, emulator, lifetime=timedelta(hours=-1))
    assert cabinet.token_expires_at is not None and cabinet.token_expires_at < utcnow()

    assert await _fed(runtime) == 0  # the fan-out suspends it at its read
    [held] = await runtime.store.suspensions()
    assert (held.kind, held.section, held.words, held.probe_at) == ("expired", None, None, None)

    outcomes = await _run(runtime, cabinet.id)  # a job enqueued before: held, nothing sent
    assert [o.result["kind"] for o in outcomes] == ["expired"]
    assert emulator.counters.total() == 0


async def test_an_expiry_not_stored_yet_is_read_from_the_token_and_kept(
    runtime: Runtime, emulator: Emulator
) -> None:
    raw = emulator.token(SELLER, lifetime=timedelta(hours=-1))
    cabinet = await runtime.store.cabinets.add("old-row", raw, SELLER)  # as before 0009
    assert cabinet.token_expires_at is None

    outcomes = await _run(runtime, cabinet.id)

    assert [o.result["kind"] for o in outcomes] == ["expired"]
    assert emulator.counters.total() == 0
    [(_, _, expires)] = await runtime.store.token_expiries()
    assert expires is not None and expires < utcnow()


async def test_a_new_token_lifts_the_suspension(runtime: Runtime, emulator: Emulator) -> None:
    cabinet = await _cabinet(runtime, emulator)
    _refuse(emulator, cabinet, REVOKED)
    await _run(runtime, cabinet.id)
    assert len(await runtime.store.suspensions()) == 1

    raw = emulator.token(SELLER)
    await runtime.store.cabinets.replace_token(cabinet.id, raw, SELLER)

    assert await runtime.store.suspensions() == []
    outcomes = await _run(runtime, cabinet.id)
    assert "outcome" not in outcomes[-1].result
    assert await runtime.store.count("finance_report", cabinet.id) > 0


async def test_an_operator_lifts_it_through_the_cli_and_the_api(
    runtime: Runtime,
    emulator: Emulator,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tests.support.databases import TEST_SECRET_KEY
    from wbsync.cli import app as cli

    cabinet = await _cabinet(runtime, emulator)
    store = runtime.store
    for section in ("finance", "statistics"):
        await store.suspended.suspend(
            cabinet.id, section, kind="payment", words="no balance", probe_at=None
        )

    monkeypatch.setenv("WBSYNC_DATABASE_URL", database_url)
    monkeypatch.setenv("WBSYNC_SECRET_KEY", TEST_SECRET_KEY)
    caplog.set_level("INFO", logger="wbsync.audit")
    get_settings.cache_clear()  # the command reads the settings above, not a cached read
    try:
        result = await _invoke(cli, ["cabinets", "resume", cabinet.name, "--section", "finance"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert "lifted finance payment (WB said: no balance)" in result.output
    audit = [r.getMessage() for r in caplog.records if "resumed by hand" in r.getMessage()]
    assert len(audit) == 1 and "by the command line (user " in audit[0], audit
    assert [s.section for s in await store.suspensions()] == ["statistics"]
    assert await _fed(runtime) == 1  # finance is fed again

    transport = httpx.ASGITransport(app=create_app(runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://wbsync.test") as api:
        reply = await api.post(f"/api/v1/cabinets/{cabinet.id}/resume", headers=AUTH)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert [(s["section"], s["kind"]) for s in body["lifted"]] == [("statistics", "payment")]
        said = [r.getMessage() for r in caplog.records if "resumed by hand" in r.getMessage()]
        assert "by API key #1 of WBSYNC_API_KEYS from " in said[-1], said
        again = await api.post(
            f"/api/v1/cabinets/{cabinet.id}/resume", json={"section": "x"}, headers=AUTH
        )
        assert again.status_code == 200 and again.json()["lifted"] == []
        missing = await api.post("/api/v1/cabinets/999999/resume", headers=AUTH)
        assert missing.status_code == 404
    assert await store.suspensions() == []


async def _invoke(cli: Any, args: list[str]) -> Any:
    """The CLI runs its own event loop: run it in a thread."""
    import asyncio

    return await asyncio.to_thread(CliRunner().invoke, cli, args)


@pytest.mark.parametrize("probe_s", [SHORT_PROBE_S])
async def test_a_probe_after_the_interval_renews_when_refused_and_lifts_when_accepted(
    runtime: Runtime, emulator: Emulator
) -> None:
    cabinet = await _cabinet(runtime, emulator)
    _refuse(emulator, cabinet, REVOKED)
    await _run(runtime, cabinet.id)
    [first] = await runtime.store.suspensions()
    assert first.probe_at is not None
    assert await _fed(runtime) == 0  # before the probe time

    await _probe_fed(runtime)  # the interval passed: the fan-out lets one job through
    outcomes = await _run(runtime, cabinet.id)
    assert [o.result["outcome"] for o in outcomes] == ["needs_attention"]
    assert emulator.counters.total() == 2  # refused again: renewed
    [renewed] = await runtime.store.suspensions()
    assert renewed.since == first.since
    assert renewed.probe_at is not None and renewed.probe_at > first.probe_at
    assert await _fed(runtime) == 0

    emulator.state.revoked.clear()  # the seller restored the token (as WB sees it)
    await _probe_fed(runtime)
    outcomes = await _run(runtime, cabinet.id)
    assert "outcome" not in outcomes[-1].result  # accepted: lifted
    assert await runtime.store.count("finance_report", cabinet.id) > 0
    assert await runtime.store.suspensions() == []


async def _probe_fed(runtime: Runtime) -> None:
    async def fed() -> bool:
        return await _fed(runtime) == 1

    await wait_for(fed, timeout_s=30.0)


async def test_a_suspended_cabinet_keeps_its_cursor_and_continues_from_it(
    runtime: Runtime, emulator: Emulator
) -> None:
    cabinet = await _cabinet(runtime, emulator)
    await _run(runtime, cabinet.id)
    cursor = await runtime.store.cursors.get(cabinet.id, FINANCE)
    stored = await runtime.store.count("finance_report", cabinet.id)
    assert cursor is not None and stored > 0

    _refuse(emulator, cabinet, REVOKED)
    await _run(runtime, cabinet.id)
    assert await runtime.store.cursors.get(cabinet.id, FINANCE) == cursor
    assert await runtime.store.count("finance_report", cabinet.id) == stored

    await runtime.store.lift_suspensions(cabinet.id)
    emulator.state.revoked.clear()
    after = await _run(runtime, cabinet.id)
    assert "outcome" not in after[-1].result and after[-1].result["rows"] == 0  # from the cursor
    assert await runtime.store.count("finance_report", cabinet.id) == stored


async def test_the_fan_outs_first_read_fills_the_expiries_of_older_rows(
    runtime: Runtime, emulator: Emulator
) -> None:
    for name in ("old-1", "old-2"):  # as stored before the expiry was kept
        await runtime.store.cabinets.add(name, emulator.token(SELLER), SELLER)
    assert [e for _, _, e in await runtime.store.token_expiries()] == [None, None]

    _, gaps = _fanout(runtime)
    await gaps.active_ids()

    expiries = [e for _, _, e in await runtime.store.token_expiries()]
    assert all(e is not None and e > utcnow() for e in expiries)
    assert await runtime.store.suspensions() == []
