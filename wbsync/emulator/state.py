"""The emulator's state: sellers' data and edits, buckets, faults, counters."""

from __future__ import annotations

import random
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from wbsync.emulator import adverts
from wbsync.emulator.buckets import Buckets
from wbsync.emulator.config import EmulatorConfig, LimitOverride, limit_groups
from wbsync.emulator.dataset import Row, SellerData
from wbsync.emulator.faults import FaultPlan
from wbsync.emulator.method import METHODS, Rate
from wbsync.emulator.tokens import Kind

__all__ = [
    "Counters",
    "EmulatorState",
    "SellerState",
    "cached",
    "initial_state",
    "seller_campaigns",
    "seller_data",
]


@dataclass
class SellerState:
    """What a seller changed: bids (kopecks), price uploads, and campaigns changed in the
    seller's portal (``Emulator.edit_campaign``: bid or payment type, status)."""

    bids: dict[tuple[int, int, str], int]
    prices: dict[int, tuple[int, int]] = field(default_factory=dict)
    uploads: list[Row] = field(default_factory=list)
    campaign_edits: dict[int, Row] = field(default_factory=dict)
    #: Plugins' emulated edits, under a key of the plugin's own (its method's name): per seller,
    #: and forgotten with the rest by ``/__emulator/reset`` (``state``).
    plugins: dict[str, Any] = field(default_factory=dict)


def seller_campaigns(data: SellerData, st: SellerState) -> list[Row]:
    """The seller's campaigns as WB shows them now (generated, then edited)."""
    out = []
    for camp in cached(data, "campaigns", adverts.campaigns):
        change = st.campaign_edits.get(camp["id"], {})
        # Nested objects (settings, timestamps) change field by field.
        out.append(
            {
                k: {**v, **change[k]} if isinstance(v, dict) and k in change else change.get(k, v)
                for k, v in camp.items()
            }
        )
    return out


def initial_state(data: SellerData) -> SellerState:
    """A seller's state before any write: bids as generated."""
    bids: dict[tuple[int, int, str], int] = {}
    for camp in cached(data, "campaigns", adverts.campaigns):
        for nm in camp["nm_settings"] or []:
            for k, query in enumerate(adverts.clusters(camp["id"], nm["nm_id"])):
                bids[(camp["id"], nm["nm_id"], query)] = nm["bids_kopecks"]["search"] + 100 * k
    return SellerState(bids=bids)


def cached(data: SellerData, key: str, build: Any) -> list[Row]:
    """``build(data)`` computed once per seller."""
    if key not in data._cache:
        data._cache[key] = build(data)
    rows: list[Row] = data._cache[key]
    return rows


@dataclass
class _Count:
    requests: int = 0
    rate_limited: int = 0
    faults: int = 0
    status: dict[str, int] = field(default_factory=lambda: defaultdict(int))


class Counters:
    """Requests, 429s and injected faults per seller and method."""

    def __init__(self, journal_size: int = 10_000) -> None:
        self._counts: dict[str, dict[str, _Count]] = defaultdict(lambda: defaultdict(_Count))
        #: The latest replies in order, with wall-clock time: when, not just how many.
        self.journal: deque[dict[str, Any]] = deque(maxlen=journal_size)
        #: Requests to paths WB serves no method on (404 "path not found", an old path WB
        #: shut), by path: they name no method nor seller.
        self.unserved: dict[str, int] = defaultdict(int)

    def record(
        self,
        seller: str,
        method: str,
        status: int,
        *,
        fault: str | None,
        arrived: float | None = None,
    ) -> None:
        """Count one reply (``status`` 0 for a dropped connection) to a request that arrived
        at wall-clock time ``arrived`` (default: now)."""
        self.journal.append(
            {
                "t": time.time() if arrived is None else arrived,
                "seller": seller,
                "method": method,
                "status": status,
                "fault": fault,
            }
        )
        count = self._counts[seller][method]
        count.requests += 1
        count.status[str(status)] += 1
        if status == 429:
            count.rate_limited += 1
        if fault is not None:
            count.faults += 1

    def reset(self) -> None:
        """All counters to zero, journal emptied."""
        self._counts.clear()
        self.journal.clear()
        self.unserved.clear()

    def total(self, field_name: str = "requests", *, seller: str | None = None) -> int:
        """Sum of one counter over every method (of one seller, or all)."""
        sellers = [seller] if seller is not None else list(self._counts)
        return sum(
            getattr(c, field_name) for s in sellers for c in self._counts.get(s, {}).values()
        )

    def snapshot(self) -> dict[str, Any]:
        """Everything, as JSON-ready dicts."""
        sellers = {
            s: {
                m: {
                    "requests": c.requests,
                    "rate_limited": c.rate_limited,
                    "faults": c.faults,
                    "status": dict(c.status),
                }
                for m, c in methods.items()
            }
            for s, methods in self._counts.items()
        }
        totals = {k: self.total(k) for k in ("requests", "rate_limited", "faults")}
        return {"total": totals, "sellers": sellers, "unserved": dict(self.unserved)}


class EmulatorState:
    """Everything the running emulator remembers."""

    def __init__(self, config: EmulatorConfig) -> None:
        self.config = config
        self.buckets = Buckets(grace_s=config.grace_ms / 1000.0)
        self.faults = FaultPlan(list(config.faults), seed=config.seed)
        self.counters = Counters()
        self._latency_rng = random.Random(f"latency:{config.seed}")
        #: Limits changed at run time (``/__emulator/limits``), by group; they win over the
        #: config's overrides and WB's table.
        self.limits: dict[str, LimitOverride] = {}
        #: Methods switched off now (``/__emulator/disabled``; initially the config's).
        self.disabled: set[str] = config.disabled_at_start()
        #: Ids of the tokens their sellers revoked (401 "token problem" from then on).
        self.revoked: set[str] = set()
        #: (seller, method or "*") whose paid service has no balance left (402 from then on).
        self.unpaid: set[tuple[str, str]] = set()
        #: Local ports that stand for WB's ``-sandbox`` hosts (set when the server starts).
        self.sandbox_ports: set[int] = set()
        self._data: dict[str, SellerData] = {}
        self._sellers: dict[str, SellerState] = {}
        self.next_task_id = 1000

    def reply_delay_s(self) -> float:
        """How long the next reply waits (``config.latency``), from a seeded RNG."""
        return self.config.latency.draw_s(self._latency_rng)

    def data(self, seller: str) -> SellerData:
        """The seller's generated data; its dated part moved to the calendar's today, once a
        day (the rest is kept)."""
        data = self._data.get(seller)
        if data is None:
            data = self._data[seller] = seller_data(self.config, seller)
        elif self.config.calendar_origin is not None and data.last_day != self.config.today():
            data = self._data[seller] = data.on(self.config.today())
        return data

    def seller(self, seller: str) -> SellerState:
        """The seller's edits."""
        if seller not in self._sellers:
            self._sellers[seller] = initial_state(self.data(seller))
        return self._sellers[seller]

    def change_limits(self, limits: dict[str, LimitOverride]) -> None:
        """Replace the limits of some groups from now on; ``ValueError`` for an unknown group."""
        groups = limit_groups()
        unknown = sorted(set(limits) - groups)
        if unknown:
            raise ValueError(f"unknown limit group(s) {unknown}; known: {sorted(groups)}")
        self.limits.update(limits)

    def disable(self, methods: list[str]) -> None:
        """Switch methods off (404 from now on); ``ValueError`` for an unknown method."""
        unknown = sorted(set(methods) - set(METHODS))
        if unknown:
            raise ValueError(f"unknown method(s) {unknown}; known: {', '.join(METHODS)}")
        self.disabled.update(methods)

    def has_balance(self, seller: str, method: str) -> bool:
        """False when the seller's balance for ``method`` (or for every method) is empty."""
        return (seller, method) not in self.unpaid and (seller, "*") not in self.unpaid

    def limit_for(self, endpoint_name: str, token_type: Kind) -> Rate | None:
        """The raw limit in force: a run-time change of the group, else the config's."""
        return self.config.limit_for(endpoint_name, token_type, self.limits)

    def reset(
        self,
        *,
        counters: bool = True,
        buckets: bool = True,
        faults: bool = True,
        state: bool = True,
        limits: bool = True,
    ) -> None:
        """Forget counters, buckets, faults, sellers' edits and/or run-time limits."""
        if limits:
            self.limits.clear()
            self.disabled = self.config.disabled_at_start()
        if counters:
            self.counters.reset()
        if buckets:
            self.buckets.reset()
        if faults:
            self.faults.clear()
        if state:
            self._sellers.clear()
            self.revoked.clear()
            self.unpaid.clear()


def seller_data(config: EmulatorConfig, seller: str) -> SellerData:
    """A seller's generated data under ``config``."""
    today = None if config.calendar_origin is None else config.today()
    return SellerData(
        config.seed,
        seller,
        config.sizes_for(seller),
        config.anchor_date,
        today,
        date_from_inclusive=config.statistics_date_from == ">=",
    )
