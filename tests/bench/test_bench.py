"""The benchmarks keep working: each runs with tiny parameters; JSON shape and basic sanity."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import SecretStr
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from typer.testing import CliRunner
from wbsync_bench import (
    bare,
    capacity,
    capacity_lag,
    common,
    data,
    feed,
    lateness,
    limiter,
    page,
    peers,
    processes,
    reschedule,
    scale,
    slots,
    slots_reports,
    soak,
    soak_retention,
    status,
)
from wbsync_bench.cli import app
from wbsync_bench.docs.markdown import table as bench_docs_table

from tests.support.databases import DatabaseFactory
from tests.support.runtimes import runtime_starter
from wbsync.config import Settings
from wbsync.errors import ConfigError
from wbsync.jobs.contract import FLEET_JOB
from wbsync.jobs.fanout import offset_ms
from wbsync.redis.redis_server import EmbeddedRedis
from wbsync.system.procs import free_port


@pytest.fixture(scope="module")
def private_redis() -> Iterator[str]:
    """A Redis of these tests' own: reschedule and scale read server-wide numbers."""
    with EmbeddedRedis() as server:
        yield server.url


async def test_reschedule_counts_commands(private_redis: str) -> None:
    result = await reschedule.run(private_redis, reschedule.Params(n=3))
    assert result["n"] == 3
    assert result["redis_commands_per_try_acquire"] == 1
    assert result["redis_commands_per_deferral"] == 2
    by_name = result["detail"]["deferral"]["commands_by_name"]
    assert by_name == {"evalsha": 1, "zadd": 1}  # moveToDelayed carrying the data; the wake-up


async def test_reschedule_says_why_its_monitor_could_not_start(redis_url: str) -> None:
    """A MONITOR watcher that fails before it watches (nothing listens at its URL) fails the
    start with the reason, instead of leaving it waiting forever."""
    control = Redis.from_url(redis_url)
    windows = reschedule._Windows(control, f"redis://127.0.0.1:{free_port()}")
    try:
        with pytest.raises(RedisConnectionError):
            await asyncio.wait_for(windows.start(), 30)
    finally:
        await control.aclose()


async def test_data_a_second_run_of_unchanged_data_writes_nothing(redis_url: str) -> None:
    result = await data.run(redis_url, data.Params(cabinets=1, runs=2))
    syncs = result["syncs"]
    assert all(s["first_written"] > 0 for s in syncs.values())
    # Only the autobidder changes data between runs: the bids it moved itself.
    assert {name for name, s in syncs.items() if s["later_written"]} == {"autobidder-sync"}
    assert syncs["inventory-sync"]["later_fetched"] == syncs["inventory-sync"]["first_fetched"] > 0
    assert result["written_after_first"] == syncs["autobidder-sync"]["later_written"]
    assert data.tables(result)


async def test_lateness_measures_each_deferral(redis_url: str) -> None:
    result = await lateness.run(redis_url, lateness.Params(samples=8, stagger_ms=15))
    assert result["samples"] == 8
    # Never resumed before due (1 ms: BullMQ keeps whole ms); how late is the benchmark's figure.
    assert -1 <= result["min_ms"] <= result["p50_ms"] <= result["p95_ms"] <= result["max_ms"]


async def test_limiter_reports_every_implementation(redis_url: str) -> None:
    params = limiter.Params(tasks=4, window_s=0.05, rounds=2, warmup_s=0.02)
    result = await limiter.run(redis_url, params)
    assert set(result["scenarios"]) == {"many_buckets", "hot_bucket"}
    for scenario in result["scenarios"].values():
        assert set(scenario["implementations"]) == set(peers.IMPLEMENTATIONS)
        for measure in scenario["implementations"].values():
            assert measure["ops_per_s"] > 0
            assert 0 < measure["p50_ms"] <= measure["p99_ms"]
        assert scenario["ratio_to_bare"]["bare_evalsha"] == 1.0
    hot = result["scenarios"]["hot_bucket"]["implementations"]["wbsync"]
    assert 0 < hot["admitted_share"] <= 1.0


async def test_scale_defers_every_job_once(private_redis: str) -> None:
    result = await scale.run(private_redis, scale.Params(cabinets=5, concurrency=2))
    assert result["cabinets"] == 5
    assert result["jobs"] == 5 * len(scale.LONG_QUEUES)
    assert result["enqueue_s"] > 0 and result["jobs_per_s"] > 0
    assert result["redis_bytes_per_delayed_job"] > 0


@pytest.mark.long
async def test_slots_defer_beats_block(redis_url: str) -> None:
    params = slots.Params(cabinets=4, pages=3, time_scale=0.005)
    result = await slots.run(redis_url, params)
    modes = result["modes"]
    assert set(modes) == {"defer", "block", "retry"}
    for mode in modes.values():
        assert mode["failed_jobs"] == 0
        # Every page once; a 429 (scheduling jitter on a loaded machine) adds a request.
        assert 4 * 3 <= mode["upstream_requests"] <= 4 * 3 + mode["upstream_429"]
    assert modes["defer"]["attempts_made_max"] == 0
    assert modes["defer"]["deferrals"] >= 4 * 2  # one per closed window (more after a 429)
    assert modes["retry"]["attempts_made_max"] >= 1
    # Blocking sleeps through every closed window in its one slot, one after another: 4 x 2
    # windows at least. Which mode is faster, and by how much, is the benchmark's figure.
    assert modes["block"]["makespan_s"] >= 4 * 2 * params.period_s
    assert modes["block"]["slot_sleep_s"] > modes["defer"]["slot_sleep_s"]
    speedup = modes["block"]["makespan_s"] / modes["defer"]["makespan_s"]
    assert result["speedup_defer_vs_block"] == pytest.approx(speedup, rel=0.01)
    assert all(set(slots.COLUMNS) <= set(mode) for mode in modes.values())  # every column shown
    assert slots.tables(result)


def test_slots_reports_backfills_every_cabinet_and_writes_its_section(tmp_path: Path) -> None:
    """Two cabinets, two report tasks each, one round: every row stored, no attempt spent, a
    wait for WB's build at least once a task, the figures and the docs section written."""
    reply = CliRunner().invoke(
        app,
        [
            *("slots", "--scenario", "reports", "-k", "2", "--days", "16"),
            *("--time-scale", "0.01", "--rounds", "1", "--json", "--write-docs"),
            *("--docs-dir", str(tmp_path)),
        ],
    )
    assert reply.exit_code == 0, reply.output
    result = json.loads(reply.stdout)
    assert result["benchmark"] == "slots_reports" and result["params"]["windows"] == 2
    [run] = result["rounds"]
    assert run["rows_ok"] and run["attempts_spent"] == 0 and run["failed_jobs"] == 0
    assert run["report_deferrals"] >= 2 * 2 and 2 * 2 <= run["status_calls"] <= run["runs"]
    assert result["bound_s"] == pytest.approx((20 + 60) * 0.01)
    assert 0 < result["efficiency"] == run["efficiency"]
    assert set(slots_reports.COLUMNS) <= set(run)  # every column shown
    page = (tmp_path / "benchmarks.md").read_text("utf-8")
    assert "report tasks" in page
    assert "wbsync bench slots --scenario reports --cabinets 2 --days 16" in page


def test_slots_reports_refuses_a_bad_size() -> None:
    reply = CliRunner().invoke(app, ["slots", "--scenario", "reports", "--days", "0"])
    assert reply.exit_code == 2
    said = " ".join(reply.output.replace("│", " ").split())
    assert "cabinets, days, concurrency and rounds must each be >= 1" in said


def test_cli_prints_one_json_object_and_writes_docs(tmp_path: Path) -> None:
    runner = CliRunner()
    reply = runner.invoke(
        app,
        [
            "lateness",
            "--samples",
            "4",
            "--stagger-ms",
            "10",
            "--json",
            "--write-docs",
            "--docs-dir",
            str(tmp_path),
        ],
    )
    assert reply.exit_code == 0, reply.output
    result = json.loads(reply.stdout)
    assert result["benchmark"] == "lateness" and result["samples"] == 4
    assert result["machine"]["redis"]
    page = (tmp_path / "benchmarks.md").read_text("utf-8")
    assert "lateness" in page and "wbsync bench lateness" in page
    assert (tmp_path / "bench-lateness.png").stat().st_size > 0
    assert "lateness" in json.loads((tmp_path / "benchmarks.json").read_text("utf-8"))


@pytest.mark.long
async def test_status_reads_the_page_and_the_api_under_readers(redis_url: str) -> None:
    params = status.Params(cabinets=40, readers=3, requests=2)
    result = await status.run(redis_url, params)
    assert result["jobs"] == 40 * len(scale.LONG_QUEUES)
    assert result["page_requests"] == result["api_requests"] == 3
    assert result["errors_5xx"] == result["non_200"] == 0
    assert 0 < result["page_p50_ms"] <= result["page_p95_ms"]


@pytest.mark.long
def test_scaleout_smallest_configuration_end_to_end(tmp_path: Path) -> None:
    """Two cabinets, one `wbsync run` process, single Redis: every job done, every refusal
    waited out, the figures present, the docs section and its plot written."""
    reply = CliRunner().invoke(
        app,
        [
            *("scaleout", "--cabinets", "2", "--processes", "1", "--redis", "single"),
            *("--latency-ms", "20", "--json", "--write-docs", "--docs-dir", str(tmp_path)),
        ],
    )
    assert reply.exit_code == 0, reply.output
    result = json.loads(reply.stdout)
    [run] = result["runs"]
    fleet = [name for name, sync in common.syncs().items() if sync.fleet]
    jobs = 2 * (len(common.syncs()) - len(fleet)) + len(fleet)  # the fleet's: one job each
    assert (run["redis"], run["processes"], run["jobs"]) == ("single", 1, jobs)
    assert run["completed_jobs"] == jobs and run["failed_jobs"] == 0
    # A fleet-wide sync's pages are its one run's, not shared out over the cabinets.
    assert fleet and run["per_cabinet_by_sync"]["wb-tariffs-sync"]["pages"] == 4
    # A 429 means a request reached the emulator more than its grace after our limiter granted
    # it: a loaded machine can stall a process that long. The job waits the window out and asks
    # again, so a refused request is one more request, never a lost page.
    assert run["requests"] >= run["pages"] + run["rate_limited"]
    assert run["pages"] > jobs  # some syncs page, some pages take 2 requests
    assert run["rows"] > 0 and run["pages_per_s"] > 0
    assert 0 < run["lower_bound_s"] < run["makespan_s"]
    assert run["redis_commands_per_page"] > 10  # BullMQ, the limiter, the job data: all counted
    assert run["worker_cpu_s_per_1000_pages"] > 0 and 0 < run["machine_cpu_share"] <= 1
    page = (tmp_path / "benchmarks.md").read_text("utf-8")
    assert "scaleout" in page and "wbsync bench scaleout --cabinets 2" in page
    assert (tmp_path / "bench-scaleout-2-c5.png").stat().st_size > 0


def test_scaleout_refuses_a_bad_process_list() -> None:
    reply = CliRunner().invoke(app, ["scaleout", "--processes", "1,two"])
    assert reply.exit_code == 2
    said = " ".join(reply.output.replace("│", " ").split())  # rich boxes and wraps the error
    assert "'1,two' is not a comma-separated list of whole numbers" in said


@pytest.mark.long
def test_page_smallest_configuration_end_to_end(tmp_path: Path) -> None:
    """The finance sync for one cabinet, one round, SQLite: wbsync's worker, every bare variant
    and the floor (the fastest pair in a job; the run raises unless its job completed) measured
    on the same page, the ratios and the commands reported, the docs written."""
    reply = CliRunner().invoke(
        app,
        [
            *("page", "--sync", page.FINANCE, "--cabinets", "1", "--rounds", "1"),
            *("--json", "--write-docs", "--docs-dir", str(tmp_path)),
        ],
    )
    assert reply.exit_code == 0, reply.output
    result = json.loads(reply.stdout)
    [run] = result["runs"]
    assert run["database"] == "sqlite" and list(run["syncs"]) == [page.FINANCE]
    finance = run["syncs"][page.FINANCE]
    assert finance["failed_runs"] == 0
    assert finance["pages_per_run"] == 1 and finance["rows_per_page"] == 40
    assert finance["requests_per_run"] == 2  # the page, then WB's 204 that ends the report
    cpu = finance["cpu_ms_per_page"]
    assert set(cpu) == {page.WBSYNC, *bare.BARE_VARIANTS, bare.FLOOR}
    assert all(v > 0 for v in cpu.values())
    fastest = min(cpu[v] for v in bare.BARE_VARIANTS)  # the floor is not a bare variant
    assert cpu[finance["fastest_bare"]] == fastest
    assert finance["ratio_to_fastest_bare"] == pytest.approx(cpu[page.WBSYNC] / fastest, rel=0.01)
    assert finance["ratio_to_floor"] == pytest.approx(cpu[page.WBSYNC] / cpu[bare.FLOOR], rel=0.01)
    floor_ratio = cpu[bare.FLOOR] / fastest
    assert finance["floor_ratio_to_fastest_bare"] == pytest.approx(floor_ratio, rel=0.01)
    targets = result["targets"]["sqlite"]
    assert targets["finance_floor_ratio_met"] == (targets["finance_floor_ratio"] <= 1.5)
    by_name = finance["redis_commands_per_page_by_name"]
    assert by_name["evalsha"] >= 1  # the bucket, at least, runs on the private Redis
    assert "info" not in by_name  # the benchmark's own reads are not the page's
    assert finance["redis_commands_per_page"] == pytest.approx(sum(by_name.values()), rel=0.01)
    # The MONITOR split: BullMQ's scripts run for the job (add, take, finish: 35 commands at
    # least), wbsync's part holds the two bucket passes, the cursor save and the notification.
    assert finance["bullmq_commands_per_job"] >= 35
    assert finance["wbsync_commands_per_page"] >= 2 * 5 + 4 + 1
    assert finance["client_calls_per_page"] >= 2 + 1 + 1
    # Most commands run inside scripts: a client sends a fraction of them.
    assert finance["client_calls_per_page"] < finance["redis_commands_per_page"] / 2
    assert result["targets"]["sqlite"]["finance_cpu_ms_per_page"] == cpu[page.WBSYNC]
    doc = (tmp_path / "benchmarks.md").read_text("utf-8")
    assert (
        "page: worker CPU" in doc
        and "BullMQ cmd/job" in doc
        and "x floor" in doc
        and "--sync rnp-finance-sync" in doc
        and "wbsync bench page --cabinets 1" in doc
    )
    assert (tmp_path / "bench-page.png").stat().st_size > 0


@pytest.mark.long
def test_page_runs_a_fleet_syncs_jobs_back_to_back_and_counts_each_runs_pages() -> None:
    """A fleet-wide sync's measurement: one fleet job after another (each enqueued as BullMQ
    ends the one before), every run's pages counted, though a carrier's runs share a record."""
    tariffs = "wb-tariffs-sync"
    reply = CliRunner().invoke(
        app, ["page", "--sync", tariffs, "--cabinets", "3", "--rounds", "1", "--json"]
    )
    assert reply.exit_code == 0, reply.output
    [run] = json.loads(reply.stdout)["runs"]
    fleet = run["syncs"][tariffs]
    assert fleet["failed_runs"] == 0 and fleet["pages_per_run"] == 4
    assert fleet["rounds_wbsync_pages"] == [3 * 4]
    assert fleet["cpu_ms_per_page"][page.WBSYNC] > 0
    assert fleet["bullmq_commands_per_job"] >= 35  # add, take, finish: each job's own


def test_page_refuses_an_unknown_database() -> None:
    reply = CliRunner().invoke(app, ["page", "--db", "mysql://x"])
    assert reply.exit_code == 2
    said = " ".join(reply.output.replace("│", " ").split())  # rich boxes and wraps the error
    assert "unknown database 'mysql://x'" in said and "PostgreSQL server URL" in said


def _at(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000.0, UTC)


def test_capacity_pairs_each_due_time_with_the_run_that_served_it() -> None:
    """Lag = the cabinet's first completion after the time it was due that served no earlier
    one; a (cabinet, queue) is due at the fan-out's own offset in every interval."""
    ledger = capacity_lag.Ledger({"q": 1.0})  # due every 1,000 ms, at the cabinet's offset
    o = offset_ms("7", "q", 1_000)
    for at in (900, 1_100, 2_050, 3_950, 3_990):
        ledger.ran(7, "q", _at(o + at), 1)
    ledger.ran(7, "q", _at(o + 3_990), 1)  # seen again by a later poll: not a second completion
    # window [1_500, 4_500) past the offset: due at 2k, 3k, 4k; anchor (the last before) is 1k.
    lags = ledger.lags(o + 1_500.0, o + 4_500.0, now_ms=o + 6_000.0)
    # 1k <- 1_100; 2k <- 2_050 (50); 3k <- 3_950 (950: late); 4k: 3_990 is before it, so
    # nothing served it by now (missed, 2,000 ms so far).
    assert lags["q"] == pytest.approx([50.0, 950.0, -2_000.0])
    assert ledger.pages(o + 1_500.0, o + 4_500.0) == 3


def test_capacity_counts_a_fleet_wide_queues_runs_for_its_one_entry() -> None:
    """A fleet-wide queue has one entry (due at the fleet job's offset) whichever cabinet
    carried its run; its first pass is that one run, not one per cabinet."""
    ledger = capacity_lag.Ledger({"q": 1.0, "f": 1.0}, fleet=["f"])
    o = offset_ms(FLEET_JOB, "f", 1_000)
    ledger.ran(7, "q", _at(500), 1)
    ledger.ran(7, "f", _at(o + 1_100), 2)
    assert not ledger.first_pass_done(2) and ledger.not_yet_run(2) == {"q": 1}
    ledger.ran(8, "q", _at(600), 1)
    assert ledger.first_pass_done(2) and ledger.not_yet_run(2) == {}
    ledger.ran(8, "f", _at(o + 2_050), 2)  # another carrier: the same entry's next run
    lags = ledger.lags(o + 1_500.0, o + 2_500.0, now_ms=o + 3_000.0)
    assert lags["f"] == pytest.approx([50.0])  # due at 2k, served at 2_050
    assert ledger.pages(o + 1_000.0, o + 2_500.0) == 4


def test_benchmark_reports_are_kept_for_their_download_at_any_scale() -> None:
    """WB's life of a report task, but a built report kept at least the real floor."""
    tiny = common.report_life(1e-6)
    assert (tiny.new_s, tiny.build_s) == (2.0, 20.0)  # WB's
    assert tiny.kept_s * 1e-6 == pytest.approx(common.REPORT_KEPT_REAL_S)
    assert common.report_life(1.0).kept_s == 7200.0  # WB's 2 hours, already long enough


def test_capacity_start_lags_are_the_runs_due_in_the_window() -> None:
    """The workers' samples (started ms, lag ms) count for the window their due time (started
    minus lag) falls in; a sample read again by a later poll counts once."""
    ledger = capacity_lag.Ledger({"q": 1.0})
    ledger.started("q", ["2100:200", b"2600:100", "4100:50", "1400:100"])
    ledger.started("q", ["2100:200"])
    # due at 1,900, 2,500 (in [1,500, 4,000)); 4,050 after it; 1,300 before it
    assert sorted(ledger.start_lags(1_500.0, 4_000.0)["q"]) == [100, 200]
    figures = capacity_lag.lag_figures(
        {"q": [1_000.0, -3_000.0]}, ledger.start_lags(1_500.0, 4_000.0), {"q": 10.0}
    )
    assert figures["missed"] == 1 and figures["runs"] == 2
    assert figures["per_queue"]["q"]["start_lag_p95_s"] == pytest.approx(0.2)
    assert figures["start_lag_share_p95"] == pytest.approx(0.02)
    assert figures["lag_share_max"] == pytest.approx(0.3)


def test_capacity_reads_the_run_queue_wait_of_this_process() -> None:
    """Its own threads have run (the test is running) and the figures only grow."""
    import os

    ran, waited = capacity_lag.scheduled_s([os.getpid()])
    again = capacity_lag.scheduled_s([os.getpid()])
    assert 0 < ran <= again[0] and 0 <= waited <= again[1]
    assert capacity_lag.scheduled_s([2**22 + 7]) == (0.0, 0.0)  # no such process: nothing


@pytest.mark.long
def test_capacity_smallest_configuration_end_to_end(tmp_path: Path) -> None:
    """Two cabinets, one process, a short window at time scale 0.01: lag and CPU measured,
    the docs section and its plot written."""
    reply = CliRunner().invoke(
        app,
        [
            *("capacity", "--cabinets", "2", "--time-scale", "0.01", "--processes", "1"),
            *("--window-s", "3", "--drain-s", "1"),
            *("--json", "--write-docs", "--docs-dir", str(tmp_path)),
        ],
    )
    assert reply.exit_code == 0, reply.output
    result = json.loads(reply.stdout)
    [run] = result["runs"]
    assert run["cabinets"] == 2 and run["failures"] == 0
    booking = run["per_queue"]["booking-slot-monitor"]  # every 0.6 s: several in 3 s
    assert booking["interval_s"] == pytest.approx(0.6)
    assert booking["runs"] >= 2 * 3 and booking["runs"] == run["runs"] - sum(
        q["runs"] for name, q in run["per_queue"].items() if name != "booking-slot-monitor"
    )
    assert 0 <= booking["lag_p50_s"] <= booking["lag_p95_s"] <= booking["lag_max_s"]
    assert 0 <= run["lag_share_p50"] <= run["lag_share_p95"] <= run["lag_share_max"]
    assert booking["start_lag_p50_s"] <= booking["start_lag_p95_s"]
    assert run["workers_runqueue"] >= 0 and run["workers_wait_per_cpu_s"] >= 0
    assert run["database_connections_opened"] is None  # SQLite: no server backends
    assert run["pages_per_s"] > 0
    assert run["settled"] and 0 <= run["settle_s"] < result["params"]["settle_limit_s"]
    cores = run["cpu_cores"]
    assert cores["workers"] > 0 and cores["redis"] > 0 and cores["database"] is None  # SQLite
    doc = (tmp_path / "benchmarks.md").read_text("utf-8")
    assert "capacity: steady state" in doc and "wbsync bench capacity --cabinets 2" in doc
    assert (tmp_path / "bench-capacity.png").stat().st_size > 0


async def test_capacity_stops_at_an_n_whose_first_pass_does_not_drain() -> None:
    """No time at all for the first pass: the smallest N is reported as not held, the larger
    one is not run, and no capacity is claimed."""
    params = capacity.Params(
        cabinets=(3, 2),
        time_scale=0.01,
        processes=1,
        warmup_base_s=0.0,
        warmup_s_per_cabinet=0.0,
        window_s=1.0,
        drain_s=0.0,
    )
    result = await capacity.run(params)
    assert result["runs"] == []
    assert result["overloaded"]["cabinets"] == 2  # smallest first
    assert "the first pass of 2 cabinets did not drain in 0 s" in result["overloaded"]["reason"]
    assert result["capacity_cabinets"] is None


def test_capacity_stops_past_a_whole_interval_late_and_bounds_the_warm_up() -> None:
    """An N whose pooled lag p95 passes ``STOP_SHARE`` of the interval is the last one run; at
    the share it is not, nor with no due time in its window. The first pass may take
    ``WARMUP_BASE_S`` plus ``WARMUP_S_PER_CABINET`` a cabinet (the test above runs past it)."""
    at = capacity.STOP_SHARE
    assert capacity.past_stop({"lag_share_p95": at}) is None
    assert capacity.past_stop({"lag_share_p95": float("nan")}) is None
    reason = capacity.past_stop({"lag_share_p95": at * 1.01})
    assert reason is not None and "passed 100% of the interval" in reason
    limit = capacity.Params().warmup_limit_s(1000)
    assert limit == capacity.WARMUP_BASE_S + 1000 * capacity.WARMUP_S_PER_CABINET == 620.0
    with pytest.raises(ConfigError, match="warmup"):
        capacity.Params(warmup_s_per_cabinet=-0.5)


async def test_capacity_settles_once_no_queue_has_more_jobs_waiting_than_its_slots(
    redis_url: str, prefix: str, database_factory: DatabaseFactory
) -> None:
    """The window waits for the first pass's backlog: a queue with one job waiting past its
    slots over the processes keeps it unsettled until the limit; queues at their slots settle
    it after ``SETTLE_POLLS`` polls."""
    settings = Settings(
        redis_url=redis_url,
        redis_prefix=prefix,
        secret_key=SecretStr("capacity-settle-secret"),
        database_url=await database_factory.new_url("sqlite"),
    )
    params = capacity.Params(cabinets=(1,), processes=2, concurrency=2, settle_limit_s=0.5)
    polls = 0

    async def poll() -> None:
        nonlocal polls
        polls += 1

    async with runtime_starter(redis_url, prefix) as start:
        runtime = await start(settings)
        await runtime.queue("pricing-bulk").enqueue_many([str(i) for i in range(5)])  # slots 4
        await runtime.queue("inventory-sync").enqueue_many([str(i) for i in range(4)])
        waited, settled = await capacity._settle(
            params, runtime, {"pricing-bulk": 90.0, "inventory-sync": 180.0}, poll
        )
        assert not settled and waited >= params.settle_limit_s and polls >= 1
        polls = 0
        waited, settled = await capacity._settle(params, runtime, {"inventory-sync": 180.0}, poll)
        assert settled and polls == capacity.SETTLE_POLLS
    with pytest.raises(ConfigError, match="settle_limit_s"):
        capacity.Params(settle_limit_s=-1.0)


_POSTGRES = os.environ.get("WBSYNC_TEST_POSTGRES_URL")


@pytest.mark.skipif(_POSTGRES is None, reason="set WBSYNC_TEST_POSTGRES_URL to run")
async def test_data_dead_tuples_are_the_rows_that_really_changed(redis_url: str) -> None:
    """PostgreSQL's dead tuples against wbsync's own count of rows changed: the check is met
    and its figures are the counters' (the autobidder's moved bids are the changes)."""
    result = await data.run(redis_url, data.Params(cabinets=1, runs=2, postgres=_POSTGRES))
    check, counters = result["check"], result["postgres"]
    moved = result["syncs"]["autobidder-sync"]["later_written"]
    assert moved > 0 and check["really_changed"] >= moved
    assert (
        check["dead_tuples"]
        == result["dead_tuples"]
        == sum(c["dead"] for c in counters.values() if "rows" in c)
    )
    assert check["met"] and abs(check["ratio"] - 1) <= data.DEAD_TOLERANCE
    assert counters["wb_bids"]["rows"] > 0 and data.tables(result)


async def test_data_on_sqlite_states_no_check(redis_url: str) -> None:
    result = await data.run(redis_url, data.Params(cabinets=1, runs=1))
    assert result["check"] is None and result["postgres"] == {}


@pytest.mark.long
def test_feed_reads_every_row_once_through_the_api_and_the_export(tmp_path: Path) -> None:
    """Two small feeds (SQLite): every reader, a child process each, reads every row once and
    ends at the last sequence number; its CPU and peak RSS are measured; the docs written."""
    reply = CliRunner().invoke(
        app,
        [
            *("feed", "--rows", "1200,300", "--json", "--write-docs"),
            *("--docs-dir", str(tmp_path)),
        ],
    )
    assert reply.exit_code == 0, reply.output
    result = json.loads(reply.stdout)
    assert [s["rows"] for s in result["sizes"]] == [300, 1200]  # smallest first
    for size in result["sizes"]:
        assert set(size["readers"]) == set(feed.READERS)
        for m in size["readers"].values():
            assert m["complete"] and m["rows"] == m["last_seq"] == size["rows"]
            assert m["peak_rss_mb"] > 10 and m["cpu_s"] > 0 and m["wall_s"] > 0
        # The API pages by the largest page: 300 rows is one page, 1,200 two.
        assert size["readers"]["api"]["pages"] == -(-size["rows"] // result["page_limit"])
    doc = (tmp_path / "benchmarks.md").read_text("utf-8")
    assert "feed: a long change feed" in doc and "(1,200 rows)" in doc
    assert "wbsync bench feed --rows 1200,300" in doc and "Every reader read exactly" in doc


def test_feed_refuses_a_size_below_one() -> None:
    reply = CliRunner().invoke(app, ["feed", "--rows", "0,10"])
    assert reply.exit_code == 2
    said = " ".join(reply.output.replace("│", " ").split())
    assert "sizes must be whole numbers >= 1" in said


@pytest.mark.long
def test_soak_samples_every_table_over_the_simulated_days(tmp_path: Path) -> None:
    """A quarter of a simulated day (about 5 s at twice the default speed) for one cabinet on
    SQLite: five samples in simulated-time order, every table in each, the cabinet counted in
    every one; growth per table between the half and the end; the docs section and its plot
    written."""
    reply = CliRunner().invoke(
        app,
        [
            *("soak", "--cabinets", "1", "--days", "0.25", "--sample-hours", "1.5"),
            *("--time-scale", "0.00025"),
            *("--json", "--write-docs", "--docs-dir", str(tmp_path)),
        ],
    )
    assert reply.exit_code == 0, reply.output
    result = json.loads(reply.stdout)
    samples = result["samples"]
    assert len(samples) == 5
    days = [s["day"] for s in samples]
    assert days == sorted(days) and days[-1] >= 0.25
    tables = set(samples[-1]["tables"])
    assert {"cabinets", "sync_runs", "wb_change_sequences", "wb_bids", "wb_stocks"} <= tables
    assert all(s["tables"]["cabinets"]["rows"] == 1 for s in samples)
    assert set(result["growth"]) == tables
    for name, g in result["growth"].items():
        assert g["rows_end"] == samples[-1]["tables"][name]["rows"]
        # null: empty at the half, rows at the end (JSON holds no infinity)
        grew = g["rows_growth"] is None or g["rows_growth"] > soak.GROWTH_FLAT
        assert g["flat"] == (not grew)
    doc = (tmp_path / "benchmarks.md").read_text("utf-8")
    assert "soak: table sizes over simulated days (1 cabinets)" in doc
    assert "Retention by date" in doc
    # One scaled calendar: its today never goes back, and every dated dataset is reported,
    # within its retention.
    todays = [s["today"] for s in samples]
    assert todays == sorted(todays)
    assert set(result["retention"]) == set(soak_retention.dated_datasets()) != set()
    assert all(k["within"] for k in result["retention"].values())
    assert (tmp_path / "bench-soak.png").stat().st_size > 0
    # A table empty at the half that has rows at the end grew "from 0": stored results hold no
    # infinity (JSON), so the docs get its growth as null and say so.
    stored = json.loads((tmp_path / "benchmarks.json").read_text("utf-8"))
    [entry] = [v for k, v in stored.items() if k.startswith("soak")]
    entry["growth"]["wb_stocks"]["rows_growth"] = None
    entry["growth"]["wb_stocks"]["flat"] = False
    assert "| from 0 |" in soak.render(entry, bench_docs_table)


def test_soak_refuses_too_few_samples() -> None:
    reply = CliRunner().invoke(app, ["soak", "--days", "0.1", "--sample-hours", "1"])
    assert reply.exit_code == 2
    said = " ".join(reply.output.replace("│", " ").split())
    assert "leave at least 4 samples" in said


def test_every_benchmark_takes_the_shared_options_once() -> None:
    """The shared options are declared once and every command has them, each exactly once."""
    import typer.main

    group = typer.main.get_command(app)
    commands = group.commands  # type: ignore[attr-defined]
    assert {"data", "feed", "soak", "all"} <= set(commands)
    for name, command in commands.items():
        flags = [opt for param in command.params for opt in param.opts]
        for flag in ("--json", "--write-docs", "--docs-dir", "--verbose"):
            assert flags.count(flag) == 1, (name, flag)


async def test_redis_counts_between_two_reads_hold_none_of_the_benchmarks_own_commands() -> None:
    # The page benchmark counts commands by INFO deltas; its own reads must not add to them
    # (a new connection a read added its HELLO to every measurement's count).
    async with processes.redis_under_test("single") as redis:
        first = await redis.totals()
        second = await redis.totals()
        ran = {
            name: calls - first["by_name"].get(name, 0)
            for name, calls in second["by_name"].items()
            if calls != first["by_name"].get(name, 0)
        }
        assert ran == {"info": 1}
        assert second["memory"] > 0 and second["cpu_s"] >= first["cpu_s"]
