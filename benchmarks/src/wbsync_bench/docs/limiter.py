"""The ``limiter`` section of docs/benchmarks.md: try_acquire's throughput and latency against its
peers.
"""

from __future__ import annotations

from typing import Any

from wbsync_bench.docs.markdown import check, fmt, table

TITLE = "limiter: try_acquire throughput and latency"


def render(r: dict[str, Any]) -> str:
    out = [
        f"One process, {r['params']['tasks']} asyncio tasks calling one implementation for "
        f"{r['params']['window_s']:g} s, implementations alternating, {r['params']['rounds']} "
        f"rounds; limit {r['params']['limit_per_s']}/s, burst {r['params']['limit_per_s']}. "
        "`many_buckets`: tasks walk 10,000 buckets (nearly every call admitted, the writing "
        "path); `hot_bucket`: one bucket (nearly every call refused). `bare_evalsha` is one "
        "EVALSHA of `return 0`: the ceiling of any one-round-trip design. "
        "`wbsync_two_buckets` takes a bucket and its seller's global bucket in one EVALSHA, "
        "as every WB call does. `limits_*` run on "
        "`limits`' async Redis storage through redis-py (the same client as ours). "
        "`pyrate_limiter` is its public `Limiter.try_acquire_async(blocking=False)` over "
        "`RedisBucket`, which holds a per-limiter asyncio lock around each call (one call in "
        "flight per process); `pyrate_bucket` calls `RedisBucket.put` directly (its one "
        "EVALSHA, no lock). `x bare` is the median over rounds of the ratio to the bare call "
        "measured in the same round. On a shared 2-core machine (Redis, this process and "
        "whatever else runs) throughput moves with everyone's load, so two steadier costs are "
        "shown too, medians over rounds: this process's CPU time per call (`process_time`, "
        "the client side: encoding, parsing, the library's own code) and Redis's time per "
        "script call (`INFO commandstats` usec of EVALSHA/EVAL over the window).",
    ]
    for name, s in r["scenarios"].items():
        rows = [
            [
                impl,
                m["ops_per_s"],
                m["p50_ms"],
                m["p99_ms"],
                s["ratio_to_bare"].get(impl),
                m.get("client_cpu_us_per_call"),
                m.get("redis_us_per_call"),
                m.get("admitted_share"),
            ]
            for impl, m in s["implementations"].items()
        ]
        out += [
            "",
            f"**{name}**",
            "",
            table(
                [
                    "implementation",
                    "ops/s",
                    "p50 ms",
                    "p99 ms",
                    "x bare",
                    "client CPU µs/call",
                    "Redis µs/call",
                    "admitted",
                ],
                rows,
            ),
        ]
    out += ["", _verdict(r), "", "![limiter](bench-limiter.png)"]
    return "\n".join(out)


def _verdict(r: dict[str, Any]) -> str:
    parts = []
    for name, s in r["scenarios"].items():
        ours = s["implementations"]["wbsync"]["ops_per_s"]
        peers = {
            k: v["ops_per_s"]
            for k, v in s["implementations"].items()
            if k not in ("wbsync", "wbsync_two_buckets", "bare_evalsha")
        }
        beaten = [k for k, v in peers.items() if v >= ours]
        parts.append(
            f"{name}: {fmt(s['ratio_to_bare']['wbsync'])} of bare "
            f"({check(s['ratio_to_bare']['wbsync'] >= 0.8)}), "
            + ("faster than every peer" if not beaten else f"not faster than {', '.join(beaten)}")
        )
    return "Targets (>= 0.8 of bare, faster than every peer): " + "; ".join(parts) + "."
