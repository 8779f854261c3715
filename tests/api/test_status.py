"""The status for thousands of cabinets: paging, search, filters, order; failures and retries.

Real Redis, a real database per backend, the emulator on loopback; the app in process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from tests.support.api import API_KEY, AUTH, SELLERS
from tests.support.waiting import wait_for
from wbsync.api.auth import COOKIE, new_session
from wbsync.composition.service import TokenGaps
from wbsync.composition.workers import build_workers
from wbsync.emulator import Emulator, LimitSpec
from wbsync.emulator.server import ALL_CATEGORIES
from wbsync.errors import RateLimitExceeded
from wbsync.jobs.fanout import FanOut
from wbsync.jobs.model import Outcome
from wbsync.observability.context import JobInfo, running_job
from wbsync.redis.redis_bounds import POOL_SIZE
from wbsync.redis.throughput import HISTORY_MINUTES
from wbsync.shared.runtime import Runtime
from wbsync.store import Cabinet, NewCabinet
from wbsync.store.runs import REASON_MAX_CHARS
from wbsync.syncs import SYNCS
from wbsync.wb import methods

AddCabinet = Callable[..., Awaitable[Cabinet]]
FINANCE = "rnp-finance-sync"
BOOKING = "booking-slot-monitor"
ACCEPTANCE = "tariffs.acceptance_coefficients"  # what the booking monitor polls
MANY = 10_000
READERS = 20


async def _status(api: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    reply = await api.get("/api/v1/status", params=params, headers=AUTH)
    assert reply.status_code == 200, reply.text
    body: dict[str, Any] = reply.json()
    return body


@pytest.mark.long
async def test_ten_thousand_cabinets_page_search_filter_under_twenty_readers(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    tokens = [api_emulator.token(seller) for seller in SELLERS]
    report = await api_runtime.store.cabinets.add_many(
        [
            NewCabinet(f"shop-{i:05d}", tokens[i % len(SELLERS)], SELLERS[i % len(SELLERS)])
            for i in range(MANY)
        ]
    )
    assert len(report.added) == MANY and report.skipped == []
    ids = [c.id for c in report.added]
    # Jobs for 300 cabinets, waiting (no worker runs): they are the "stuck" ones.
    pending = [str(i) for i in ids[-300:]]
    await api_runtime.queue(BOOKING).enqueue_many(pending)

    async def page_json(n: int) -> dict[str, Any]:
        return await _status(api, sort="id", page=n, per_page=50)

    async def page_html(n: int) -> str:
        reply = await api.get("/", params={"sort": "id", "page": n}, headers=AUTH)
        assert reply.status_code == 200, reply.text
        return reply.text

    readers = [page_json(n) for n in range(1, READERS // 2 + 1)]
    htmls = [page_html(n) for n in range(1, READERS // 2 + 1)]
    results = await asyncio.gather(*readers, *htmls)
    pages: list[dict[str, Any]] = results[: READERS // 2]
    for n, body in enumerate(pages, start=1):
        assert (body["total"], body["matched"], body["pages"]) == (MANY, MANY, MANY // 50)
        shown = [c["cabinet"]["id"] for c in body["cabinets"]]
        assert shown == ids[(n - 1) * 50 : n * 50]
    for n, html in enumerate(results[READERS // 2 :], start=1):
        assert f"{MANY} of {MANY} cabinets match · page {n} of {MANY // 50}" in str(html)
    assert sum(body["queues"][BOOKING]["waiting"] for body in pages[:1]) == 300

    found = await _status(api, q="shop-07777")
    assert [c["cabinet"]["name"] for c in found["cabinets"]] == ["shop-07777"]
    by_id = await _status(api, q=str(ids[42]), sort="id", per_page=200)  # and names with it
    assert ids[42] in [c["cabinet"]["id"] for c in by_id["cabinets"]]

    waiting = await _status(api, state="waiting", per_page=200)
    assert waiting["matched"] == 300 and len(waiting["cabinets"]) == 200
    assert {c["cabinet"]["id"] for c in waiting["cabinets"]} <= {int(i) for i in pending}
    assert (await _status(api, state="failed"))["matched"] == 0
    assert (await _status(api, state="idle"))["matched"] == MANY - 300

    stuck_first = await _status(api, sort="stuck", per_page=10)
    assert all(c["stuck_since"] is not None for c in stuck_first["cabinets"])
    assert {str(c["cabinet"]["id"]) for c in stuck_first["cabinets"]} <= set(pending)
    last = await _status(api, sort="stuck", page=MANY // 10, per_page=10)
    assert all(c["stuck_since"] is None for c in last["cabinets"])

    bad = await api.get("/api/v1/status", params={"state": "stalled"}, headers=AUTH)
    assert bad.status_code == 422 and "state" in bad.text
    assert (
        await api.get("/api/v1/status", params={"per_page": 201}, headers=AUTH)
    ).status_code == 422


async def test_a_failed_job_shows_its_reason_and_retry_runs_it_again(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    seller = SELLERS[0]
    no_finance = [c for c in ALL_CATEGORIES if c != "finance"]
    cabinet = await api_runtime.store.cabinets.add(
        "no-finance", api_emulator.token(seller, categories=no_finance), seller
    )
    outcomes: list[Outcome] = []
    [worker] = build_workers(api_runtime, [FINANCE], concurrency=1, on_outcome=outcomes.append)
    await worker.start()
    try:
        await api_runtime.queue(FINANCE).enqueue(str(cabinet.id))

        async def failed_for_good() -> bool:
            view = await api_runtime.queue(FINANCE).job(str(cabinet.id))
            return view is not None and view.state == "failed"

        await wait_for(failed_for_good)

        async def listed_as_failed() -> bool:  # the status index is rebuilt within INDEX_TTL_S
            return bool((await _status(api, state="failed"))["matched"] == 1)

        await wait_for(listed_as_failed)
        body = await _status(api, state="failed")
        [entry] = body["failed"]
        assert entry["cabinet"]["id"] == cabinet.id and entry["job"]["queue"] == FINANCE
        assert "finance" in entry["job"]["failed_reason"]
        assert entry["job"]["attempts_made"] == api_runtime.settings.job_attempts
        [run] = body["cabinets"][0]["runs"]
        assert run["queue"] == FINANCE and run["success_at"] is None
        assert "finance" in run["failure_reason"]
        assert run["failure_attempts"] == api_runtime.settings.job_attempts
        html = (await api.get("/", params={"state": "failed"}, headers=AUTH)).text
        assert "finance" in html and 'class="retry"' in html

        # A job that has not failed cannot be retried; the failed one can, once the token is fixed.
        other = f"/api/v1/cabinets/{cabinet.id}/syncs/{BOOKING}/retry"
        assert (await api.post(other, headers=AUTH)).status_code == 404
        await api_runtime.store.cabinets.replace_token(
            cabinet.id, api_emulator.token(seller), seller
        )
        retry = await api.post(f"/api/v1/cabinets/{cabinet.id}/syncs/{FINANCE}/retry", headers=AUTH)
        assert retry.status_code == 202, retry.text
        assert retry.json()["job_id"] == f"{FINANCE}.{cabinet.id}"

        async def succeeded() -> bool:
            [record] = await api_runtime.store.runs.of_cabinets([cabinet.id])
            return record.success_at is not None

        await wait_for(succeeded)
    finally:
        await worker.close()
    [record] = await api_runtime.store.runs.of_cabinets([cabinet.id])
    # Two pages of four rows, over the deferral the finance window forces between them.
    assert (record.success_pages, record.success_rows) == (2, 8)
    assert "finance" in (record.failure_reason or "")  # the last failure stays on record

    async def no_failed_job() -> bool:
        return bool((await _status(api, state="failed"))["matched"] == 0)

    await wait_for(no_failed_job)
    again = await api.post(f"/api/v1/cabinets/{cabinet.id}/syncs/{FINANCE}/retry", headers=AUTH)
    assert again.status_code in (404, 409)
    # The two pages are in the throughput history, this minute or the one before.
    history = (await api.get("/api/v1/throughput", headers=AUTH)).json()
    assert len(history["minutes"]) == HISTORY_MINUTES
    assert sum(history["queues"][FINANCE]["pages"][-2:]) == 2
    assert sum(history["queues"][BOOKING]["pages"]) == 0


async def test_throughput_counts_pages_and_429s_per_queue_over_the_last_hour(
    api: httpx.AsyncClient, api_runtime: Runtime
) -> None:
    history = api_runtime.throughput
    for _ in range(3):
        await history.record(FINANCE, pages=1)
    with running_job(JobInfo(queue=BOOKING, job_id=f"{BOOKING}.1", cabinet="1")):
        await history.rate_limited()
        await history.rate_limited()
    await history.rate_limited()  # outside a job: no queue to count it for
    assert (await api.get("/status/throughput")).status_code == 401
    body = (await api.get("/status/throughput", headers=AUTH)).json()
    minutes = body["minutes"]
    assert len(minutes) == HISTORY_MINUTES and minutes == sorted(minutes)
    assert minutes[-1] - minutes[0] == (HISTORY_MINUTES - 1) * 60_000
    totals = {q: {k: sum(v) for k, v in series.items()} for q, series in body["queues"].items()}
    assert totals[FINANCE] == {"pages": 3, "upstream_429": 0}
    assert totals[BOOKING] == {"pages": 0, "upstream_429": 2}
    assert set(totals) == set(SYNCS)


async def test_the_page_retry_button_needs_the_key_and_returns_to_the_same_view(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    cabinet = await add_cabinet(0)
    url = f"/retry/{FINANCE}/{cabinet.id}?q=cab&state=failed&x=1"
    assert (await api.post(url)).status_code == 401
    reply = await api.post(url, headers=AUTH)
    assert reply.status_code == 404  # no job to retry: said so, nothing moved
    await api_runtime.queue(FINANCE).enqueue(str(cabinet.id))
    reply = await api.post(url, headers=AUTH)
    assert reply.status_code == 409 and "waiting" in reply.text
    api.cookies.set(COOKIE, new_session(API_KEY))  # what the browser holds after /?key=
    reply = await api.post(f"/retry/nope/{cabinet.id}?state=failed")
    assert reply.status_code == 404 and "no queue 'nope'" in reply.text


async def test_many_concurrent_status_reads_share_the_sized_pool(
    api: httpx.AsyncClient, api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    """More readers than the pool has connections: every read answers 200, none is refused."""
    for i in range(3):
        await add_cabinet(i)
    replies = await asyncio.gather(
        *(
            api.get("/api/v1/status", params={"page": 1 + i % 3, "per_page": 1}, headers=AUTH)
            for i in range(2 * POOL_SIZE)
        )
    )
    assert {r.status_code for r in replies} == {200}


async def test_queues_a_token_cannot_serve_are_skipped_by_the_fan_out_and_shown(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    full = await api_runtime.store.cabinets.add("full", api_emulator.token(SELLERS[0]), SELLERS[0])
    no_finance = [c for c in ALL_CATEGORIES if c != "finance"]
    partial = await api_runtime.store.cabinets.add(
        "partial", api_emulator.token(SELLERS[1], categories=no_finance), SELLERS[1]
    )
    gaps = TokenGaps(api_runtime)
    queues = {q: api_runtime.queue(q) for q in (FINANCE, BOOKING)}
    fanout = FanOut(queues, gaps.active_ids, dict.fromkeys(queues, 3600.0), serves=gaps.serves)
    reports = await fanout.run_once()
    assert (reports[FINANCE].added, reports[BOOKING].added) == (1, 2)
    assert await queues[FINANCE].job(str(partial.id)) is None
    assert await queues[FINANCE].job(str(full.id)) is not None

    body = await _status(api, sort="id")
    unserved = {c["cabinet"]["name"]: c["unserved"] for c in body["cabinets"]}
    assert unserved["full"] == {}
    assert "lacks category 'finance'" in unserved["partial"][FINANCE]
    assert set(unserved["partial"]) == {FINANCE}
    html = (await api.get("/", params={"q": "partial"}, headers=AUTH)).text
    assert f"{FINANCE}: skipped, token lacks category" in html

    # A new token with the category: the next pass serves the queue.
    await api_runtime.store.cabinets.replace_token(
        partial.id, api_emulator.token(SELLERS[1]), SELLERS[1]
    )
    assert (await fanout.run_once([FINANCE]))[FINANCE].added == 1


async def test_a_long_failure_reason_is_kept_cut_to_its_bound(
    api_runtime: Runtime, add_cabinet: AddCabinet
) -> None:
    cabinet = await add_cabinet(0)
    runs = api_runtime.store.runs
    await runs.failed(cabinet.id, FINANCE, reason="x" * (REASON_MAX_CHARS + 500), attempts=2)
    [record] = await runs.of_cabinets([cabinet.id])
    assert record.failure_reason == "x" * REASON_MAX_CHARS and record.failure_attempts == 2


async def test_filters_find_a_method_wb_switched_off_and_a_limit_learned_from_wb(
    api: httpx.AsyncClient, api_runtime: Runtime, api_emulator: Emulator
) -> None:
    off, strict, plain = [
        await api_runtime.store.cabinets.add(name, api_emulator.token(seller), seller)
        for name, seller in zip(("method-off", "strict-wb", "plain"), SELLERS, strict=False)
    ]
    # WB holds the acceptance coefficients stricter than the table (a burst of 3, not 6, and a
    # token every 1,000 s, so none comes back while the test runs, however loaded the machine):
    # the fourth call is answered 429, and the bucket learns WB's burst.
    half = LimitSpec(period_s=3000, limit=3, burst=3)
    api_emulator.change_limits({ACCEPTANCE: half})
    for _ in range(4):
        # The fourth: WB's 429 asks for more than a request path waits, so it is refused.
        with contextlib.suppress(RateLimitExceeded):
            await methods.acceptance_coefficients(api_runtime.client(strict))
    assert api_emulator.counters.total("rate_limited") >= 1
    # WB switches the method off: the booking monitor's run meets it and waits (delayed).
    api_emulator.disable(ACCEPTANCE)
    outcomes: list[Outcome] = []
    [worker] = build_workers(api_runtime, [BOOKING], concurrency=1, on_outcome=outcomes.append)
    await worker.start()
    try:
        await api_runtime.queue(BOOKING).enqueue(str(off.id))
        await wait_for(lambda: [o.outcome for o in outcomes] == ["deferred"])
    finally:
        await worker.close()

    async def matched(state: str) -> list[int]:
        return [c["cabinet"]["id"] for c in (await _status(api, state=state))["cabinets"]]

    assert await matched("disabled-method") == [off.id]
    assert await matched("learned-limit") == [strict.id]
    assert plain.id in await matched("all")
    html = (await api.get("/", params={"state": "learned-limit"}, headers=AUTH)).text
    assert '<option value="learned-limit" selected>learned limit</option>' in html
    assert '<option value="disabled-method">disabled method</option>' in html
    assert "strict-wb" in html and "method-off" not in html

    # A later success clears the mark: the method is on again and the job runs.
    api_emulator.enable()
    [worker] = build_workers(api_runtime, [BOOKING], concurrency=1, on_outcome=outcomes.append)
    await worker.start()
    try:
        await api_runtime.queue(BOOKING).promote_delayed()
        await wait_for(lambda: outcomes[-1].outcome == "completed")
    finally:
        await worker.close()

    async def cleared() -> bool:  # the success is written behind, within the flush time
        [overview] = [c for c in await api_runtime.store.runs.overview() if c.id == off.id]
        return overview.disabled_methods == 0

    await wait_for(cleared)
