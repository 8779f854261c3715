"""The fan-out pass benchmark: each cabinet added once, the live pass adds none, a pass's round
trips stay within ceil(N / ENQUEUE_BATCH) x a small constant, and only the pass's own sends
are counted."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from typer.testing import CliRunner
from wbsync_bench import fanout
from wbsync_bench.cli import app

from tests.support.waiting import wait_for
from wbsync.jobs.queue import ENQUEUE_BATCH


async def test_a_pass_adds_each_cabinet_once_and_the_live_pass_none(redis_url: str) -> None:
    n = ENQUEUE_BATCH + 1  # two batches
    batches = math.ceil(n / ENQUEUE_BATCH)
    original = AbstractConnection.send_packed_command
    result = await fanout.run(redis_url, fanout.Params(cabinets=n, runs=2))
    assert AbstractConnection.send_packed_command is original  # redis-py's own method again
    assert result["round_trip_bound"] == fanout.round_trip_bound(n) == batches * 3 + 3
    due, live, step = (result["cases"][case] for case in ("due", "live", "step"))
    assert due["added"] == due["waiting_after"] == [n]
    assert live["added"] == [0] and live["waiting_after"] == [n]
    assert step["added"] == [0] and step["waiting_after"] == [n]  # one step's, all still live
    assert len(result["passes"]) == 2
    for run in result["passes"]:
        # Pipelined: each batch costs a few round trips, not one or more per cabinet.
        assert 2 * batches <= run["due"]["round_trips"] <= result["round_trip_bound"]
        assert batches <= run["live"]["round_trips"] <= result["round_trip_bound"]
        # One step's cabinets are fewer than a batch: one EXISTS, the schedule, the states.
        assert run["step"]["round_trips"] <= 1 * 3 + 3
        for case in fanout.CASES:
            assert run[case]["wall_s"] > 0 and run[case]["cpu_ms"] > 0
    assert fanout.tables(result)


async def test_only_the_counted_tasks_sends_are_counted_a_pipeline_as_one(redis_url: str) -> None:
    ours, theirs = Redis.from_url(redis_url), Redis.from_url(redis_url)
    stop = asyncio.Event()
    pings = [0]

    async def other_client() -> None:
        while not stop.is_set():
            await theirs.ping()
            pings[0] += 1

    async def three_calls() -> None:
        seen = pings[0]
        await ours.ping()
        async with ours.pipeline(transaction=False) as pipe:
            for i in range(10):
                pipe.exists(f"wbsync-test:fanout:{i}")
            await pipe.execute()
        await wait_for(lambda: pings[0] >= seen + 5)  # the other task sent while we counted
        await ours.ping()

    other = asyncio.create_task(other_client())
    try:
        await ours.ping()  # connections open before the count, as in the benchmark
        await wait_for(lambda: pings[0] > 0)
        sends, wall_s = await fanout.round_trips(three_calls)

        async def nested() -> None:
            await fanout.round_trips(ours.ping)

        with pytest.raises(RuntimeError, match="already counting"):
            await fanout.round_trips(nested)
    finally:
        stop.set()
        await other
        await ours.aclose()
        await theirs.aclose()
    assert sends == 3 and wall_s > 0


def test_the_command_runs_on_the_redis_given_writes_its_section_and_cleans_up(
    redis_url: str, tmp_path: Path
) -> None:
    args = ["fanout", "--cabinets", "3", "--runs", "1", "--redis", redis_url, "--json"]
    reply = CliRunner().invoke(app, [*args, "--write-docs", "--docs-dir", str(tmp_path)])
    assert reply.exit_code == 0, reply.output
    result = json.loads(reply.stdout)
    assert result["benchmark"] == "fanout" and result["cabinets"] == 3
    assert result["cases"]["due"]["added"] == [3]
    page = (tmp_path / "benchmarks.md").read_text("utf-8")
    assert "## fanout: one fan-out pass" in page and "(3 cabinets)" in page
    assert "fanout@3" in json.loads((tmp_path / "benchmarks.json").read_text("utf-8"))

    async def leftovers() -> list[bytes]:
        client = Redis.from_url(redis_url)
        try:
            return [k async for k in client.scan_iter(match="wbsync-bench:fanout:*")]
        finally:
            await client.aclose()

    assert asyncio.run(leftovers()) == []


@pytest.mark.parametrize("option", ["--cabinets", "--runs"])
def test_the_command_refuses_fewer_than_one(option: str) -> None:
    reply = CliRunner().invoke(app, ["fanout", option, "0"])
    assert reply.exit_code == 2
    assert "must be >= 1" in " ".join(reply.output.replace("│", " ").split())


def test_a_result_recorded_before_a_column_existed_still_renders() -> None:
    older = {
        "round_trips": 32,
        "round_trips_max": 33,
        "wall_s": 1.1,
        "added": [1],
        "waiting_after": [1],
    }
    assert fanout.row("due", older) == ["due", 32, 33, 1.1, "-", "1", "1"]
