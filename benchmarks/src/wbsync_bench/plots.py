"""The benchmark plots (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

_MODE_STYLE = {"defer": "o-", "block": "s--", "retry": "^:"}


def slots_plot(result: dict[str, Any], path: Path) -> bool:
    """Makespan against K per mode (the sweep), else makespan per mode at the default K."""
    fig, ax = plt.subplots(figsize=(7, 4.2))
    sweep = result.get("sweep")
    if sweep:
        ks = sorted(int(k) for k in sweep)
        for mode in next(iter(sweep.values())):
            ax.plot(ks, [sweep[str(k)][mode] for k in ks], _MODE_STYLE.get(mode, "o-"), label=mode)
        p = result["params"]
        bound = (p["pages"] - p["burst"]) * p["period_s"]
        ax.axhline(bound, color="grey", linewidth=0.8, label="window bound (P-1) x period")
        ax.set_xlabel("cabinets K")
        ax.set_xscale("log")
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_yscale("log")
        ax.legend()
    else:
        modes = list(result["modes"])
        ax.bar(modes, [result["modes"][m]["makespan_s"] for m in modes])
    ax.set_ylabel("makespan, s")
    ax.set_title(
        f"slots: P={result['params']['pages']} pages, C={result['params']['concurrency']}"
        f" slot(s), window {result['params']['period_s']:g} s"
    )
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, path)


def limiter_plot(result: dict[str, Any], path: Path) -> bool:
    """ops/s per implementation, one group of bars per scenario."""
    scenarios = list(result["scenarios"])
    impls = list(next(iter(result["scenarios"].values()))["implementations"])
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.8 / len(scenarios)
    for i, scenario in enumerate(scenarios):
        values = [result["scenarios"][scenario]["implementations"][m]["ops_per_s"] for m in impls]
        ax.bar([x + i * width for x in range(len(impls))], values, width, label=scenario)
    ax.set_xticks(
        [x + width * (len(scenarios) - 1) / 2 for x in range(len(impls))],
        impls,
        rotation=20,
        ha="right",
    )
    ax.set_ylabel("calls per second (median of rounds)")
    ax.set_title(f"limiter: one process, {result['params']['tasks']} concurrent tasks")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, path)


def lateness_plot(result: dict[str, Any], path: Path) -> bool:
    """Histogram of resume lateness."""
    values = result.get("lateness_ms") or []
    if not values:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(values, bins=40)
    for q, style in (("p50_ms", "--"), ("p95_ms", ":")):
        ax.axvline(result[q], color="black", linestyle=style, label=f"{q[:-3]} {result[q]:.1f} ms")
    ax.set_xlabel("start after resume_at_ms, ms")
    ax.set_ylabel("deferrals")
    ax.set_title(f"lateness of {result['samples']} deferred jobs")
    ax.legend()
    return _save(fig, path)


def scaleout_plot(result: dict[str, Any], path: Path) -> bool:
    """Pages/s against processes per Redis kind, and how busy the machine's cores were."""
    runs = result.get("runs") or []
    if not runs:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.2))
    busy = ax.twinx()
    for kind, style in (("single", "o-"), ("cluster", "s--")):
        mine = sorted((r for r in runs if r["redis"] == kind), key=lambda r: r["processes"])
        if not mine:
            continue
        procs = [r["processes"] for r in mine]
        ax.plot(procs, [r["pages_per_s"] for r in mine], style, label=f"{kind}: pages/s")
        shares = [100 * r["machine_cpu_share"] for r in mine]
        busy.plot(procs, shares, style, alpha=0.35, label=f"{kind}: machine CPU busy %")
    ax.set_xlabel("wbsync run processes")
    ax.set_xticks(sorted({r["processes"] for r in runs}))
    ax.set_ylabel("pages per second")
    ax.set_ylim(bottom=0)
    busy.set_ylabel("machine CPU busy, % of all cores")
    busy.set_ylim(0, 105)
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = busy.get_legend_handles_labels()
    ax.legend(handles + more, labels + more_labels, loc="lower right", fontsize=8)
    p = result["params"]
    ax.set_title(
        f"scaleout: {p['cabinets']:,} cabinets, {p['concurrency']} per queue per process, "
        f"{p['latency_ms']:g} ms replies"
    )
    ax.grid(True, alpha=0.3)
    return _save(fig, path)


def _save(fig: Any, path: Path) -> bool:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def page_plot(result: dict[str, Any], path: Path) -> bool:
    """CPU ms per page of wbsync and every bare variant, per sync; one panel per database."""
    runs = result.get("runs") or []
    if not runs:
        return False
    fig, axes = plt.subplots(len(runs), 1, figsize=(9, 3.6 * len(runs)), squeeze=False)
    variants = result["params"]["variants"]
    for ax, run in zip(axes[:, 0], runs, strict=True):
        names = list(run["syncs"])
        width = 0.8 / len(variants)
        for i, variant in enumerate(variants):
            values = [run["syncs"][n]["cpu_ms_per_page"][variant] or 0 for n in names]
            ax.bar([x + i * width for x in range(len(names))], values, width, label=variant)
        ax.set_xticks(
            [x + width * (len(variants) - 1) / 2 for x in range(len(names))],
            [n.removesuffix("-sync") for n in names],
            rotation=20,
            ha="right",
            fontsize=8,
        )
        ax.set_ylabel("CPU ms per page (median)")
        ax.set_title(f"page: worker CPU per page, {run['database']}")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncol=len(variants))
    return _save(fig, path)


def capacity_plot(result: dict[str, Any], path: Path) -> bool:
    """Freshness lag (share of the interval) and CPU (cores) against N."""
    runs = sorted(result.get("runs") or [], key=lambda r: r["cabinets"])
    if not runs:
        return False
    ns = [r["cabinets"] for r in runs]
    fig, (lag, cpu) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, style in (
        ("lag_share_p50", "o--"),
        ("lag_share_p95", "o-"),
        ("start_lag_share_p95", "s:"),
    ):
        label = key.replace("_share", "").replace("_", " ")
        lag.plot(ns, [100 * (r.get(key) or 0) for r in runs], style, label=label)
    lag.axhline(100 * result["lag_target"], color="grey", linewidth=0.8, label="target")
    lag.set_xlabel("cabinets N")
    lag.set_ylabel("lag, % of the queue's interval")
    lag.set_ylim(bottom=0)
    lag.set_title("freshness lag (pooled over the queues)")
    lag.legend(fontsize=8)
    lag.grid(True, alpha=0.3)
    for part in ("workers", "redis", "database", "emulator"):
        values = [r["cpu_cores"].get(part) for r in runs]
        if all(v is None for v in values):
            continue
        style = ":" if part == "emulator" else "-"
        cpu.plot(ns, [v or 0 for v in values], "o" + style, label=part)
    cpu.set_xlabel("cabinets N")
    cpu.set_ylabel("CPU, cores")
    cpu.set_ylim(bottom=0)
    cpu.set_title("CPU (the emulator is WB's)")
    cpu.legend(fontsize=8)
    cpu.grid(True, alpha=0.3)
    p = result["params"]
    fig.suptitle(
        f"capacity: time scale {p['time_scale']:g}, {p['processes']} processes, "
        f"{result['database']}",
        fontsize=10,
    )
    return _save(fig, path)
