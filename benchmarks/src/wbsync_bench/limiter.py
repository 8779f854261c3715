"""``limiter``: try_acquire throughput and latency against a bare round trip and peer libraries.

One process, ``tasks`` concurrent asyncio tasks calling one implementation for ``window_s``;
implementations alternate within each round (ABBA order), ``rounds`` times, per scenario:

* ``many_buckets``: each task walks ``n_keys`` buckets (nearly every call admitted);
* ``hot_bucket``: every task hits one bucket (nearly every call refused).

Reported per implementation: the median over rounds of calls per second, p50/p99 latency over
every call of every round, the share of calls admitted, and the median over rounds of the ratio
to the bare EVALSHA measured in the same round.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from wbsync_bench import peers
from wbsync_bench.common import (
    delete_prefix,
    median,
    percentile,
    ratio,
    rounds,
    table,
    unique_prefix,
)

SCENARIOS = {"many_buckets": 10_000, "hot_bucket": 1}


@dataclass
class Params:
    """What to run."""

    tasks: int = 64
    # Short windows, many rounds: neighbours in the ABBA order see the same machine, and the
    # median of per-round ratios shrugs off a round that another process disturbed.
    window_s: float = 0.5
    rounds: int = 10
    warmup_s: float = 0.3
    implementations: tuple[str, ...] = peers.IMPLEMENTATIONS


@dataclass
class _Samples:
    ops_per_s: list[float] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    admitted: int = 0
    decided: int = 0
    client_cpu_us: list[float] = field(default_factory=list)
    redis_us: list[float] = field(default_factory=list)


@dataclass
class _Window:
    """One implementation's window: throughput, latencies, and CPU per call on both sides."""

    ops_per_s: float
    latencies_ms: list[float]
    admitted: int
    decided: int
    client_cpu_us: float = 0.0
    redis_us: float = 0.0


async def _script_usec(control: Redis) -> tuple[int, int]:
    """Redis's own time in scripts so far (commandstats of EVALSHA and EVAL): (usec, calls)."""
    stats = await control.info("commandstats")
    usec = calls = 0
    for name in ("cmdstat_evalsha", "cmdstat_eval"):
        usec += int(stats.get(name, {}).get("usec", 0))
        calls += int(stats.get(name, {}).get("calls", 0))
    return usec, calls


async def _measure(
    control: Redis, op: peers.Op, n_keys: int, tasks: int, window_s: float
) -> _Window:
    """``_drive`` plus the CPU it cost: this process's (all of it is the 64 tasks) and Redis's.

    Throughput on a shared machine moves with everyone else's load; CPU per call does much
    less, so it is the steadier comparison of what each implementation costs.
    """
    usec0, calls0 = await _script_usec(control)
    cpu0 = time.process_time()
    ops, latencies, admitted, decided = await _drive(op, n_keys, tasks, window_s)
    cpu = time.process_time() - cpu0
    usec1, calls1 = await _script_usec(control)
    n = len(latencies) or 1
    window = _Window(ops, latencies, admitted, decided, cpu * 1e6 / n)
    window.redis_us = (usec1 - usec0) / max(1, calls1 - calls0)
    return window


async def _drive(
    op: peers.Op, n_keys: int, tasks: int, window_s: float
) -> tuple[float, list[float], int, int]:
    """``tasks`` loops of ``op`` for ``window_s``: (calls/s, latencies ms, admitted, decided)."""
    deadline = time.perf_counter() + window_s
    latencies: list[float] = []
    counts = [0, 0, 0]  # calls, admitted, decided

    async def loop(task: int) -> None:
        n = 0
        while True:
            started = time.perf_counter()
            if started >= deadline:
                return
            outcome = await op((task + n * tasks) % n_keys)
            latencies.append((time.perf_counter() - started) * 1000.0)
            n += 1
            counts[0] += 1
            if outcome is not None:
                counts[2] += 1
                counts[1] += int(outcome)

    began = time.perf_counter()
    await asyncio.gather(*(loop(t) for t in range(tasks)))
    elapsed = time.perf_counter() - began
    return counts[0] / elapsed, latencies, counts[1], counts[2]


async def _scenario(url: str, name: str, n_keys: int, params: Params) -> dict[str, Any]:
    prefix = unique_prefix(f"limiter:{name}")
    built = [await peers.build(impl, url, prefix, n_keys) for impl in params.implementations]
    samples = {peer.name: _Samples() for peer in built}
    per_round: dict[int, dict[str, float]] = {}
    control = Redis.from_url(url)
    try:
        for peer in built:  # connections opened, scripts loaded, before anything counts
            await _drive(peer.op, n_keys, params.tasks, params.warmup_s)
        for r, peer in rounds(built, params.rounds):
            w = await _measure(control, peer.op, n_keys, params.tasks, params.window_s)
            s = samples[peer.name]
            s.ops_per_s.append(w.ops_per_s)
            s.latencies_ms.extend(w.latencies_ms)
            s.admitted += w.admitted
            s.decided += w.decided
            s.client_cpu_us.append(w.client_cpu_us)
            s.redis_us.append(w.redis_us)
            per_round.setdefault(r, {})[peer.name] = w.ops_per_s
    finally:
        for peer in built:
            await peer.close()
        await delete_prefix(control, prefix)
        await control.aclose()
    return _summarise(samples, per_round)


def _summarise(
    samples: dict[str, _Samples], per_round: dict[int, dict[str, float]]
) -> dict[str, Any]:
    impls = {
        name: {
            "ops_per_s": median(s.ops_per_s),
            "p50_ms": percentile(s.latencies_ms, 50),
            "p99_ms": percentile(s.latencies_ms, 99),
            "admitted_share": s.admitted / s.decided if s.decided else None,
            "client_cpu_us_per_call": median(s.client_cpu_us),
            "redis_us_per_call": median(s.redis_us),
        }
        for name, s in samples.items()
    }
    ratios = {
        name: median([ratio(r[name], r["bare_evalsha"]) for r in per_round.values()])
        for name in samples
        if "bare_evalsha" in samples
    }
    return {"implementations": impls, "ratio_to_bare": ratios}


async def run(url: str, params: Params | None = None) -> dict[str, Any]:
    """Both scenarios; the JSON object of the benchmark."""
    params = params or Params()
    scenarios = {}
    for name, n_keys in SCENARIOS.items():
        scenarios[name] = await _scenario(url, name, n_keys, params)
    return {
        "scenarios": scenarios,
        "params": {
            "tasks": params.tasks,
            "window_s": params.window_s,
            "rounds": params.rounds,
            "limit_per_s": peers.LIMIT_PER_S,
            "keys": SCENARIOS,
        },
    }


def tables(result: dict[str, Any]) -> list[Any]:
    """One table per scenario."""
    out = []
    for name, s in result["scenarios"].items():
        rows = [
            [
                impl,
                m["ops_per_s"],
                m["p50_ms"],
                m["p99_ms"],
                s["ratio_to_bare"].get(impl, "-"),
                m["client_cpu_us_per_call"],
                m["redis_us_per_call"],
            ]
            for impl, m in s["implementations"].items()
        ]
        out.append(
            table(
                f"limiter: {name}",
                [
                    "implementation",
                    "ops/s",
                    "p50 ms",
                    "p99 ms",
                    "x bare",
                    "client CPU us",
                    "Redis us",
                ],
                rows,
            )
        )
    return out
