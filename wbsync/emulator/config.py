"""The emulator's configuration: seed, time scale, signing key, sizes, limit overrides, faults.

Everything can come from a JSON file (``EmulatorConfig.from_file``) or from keyword options.
Unknown keys are errors.
"""

from __future__ import annotations

import math
import random
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from wbsync.emulator.method import METHODS, Rate, disabled_in_docs
from wbsync.emulator.tokens import Kind
from wbsync.errors import ConfigError
from wbsync.system import clock

__all__ = [
    "DEFAULT_SIGNING_KEY",
    "MOSCOW",
    "BodyShape",
    "EmulatorConfig",
    "FaultRule",
    "LimitOverride",
    "LimitSpec",
    "ReplyLatency",
    "ReportTaskLife",
    "SellerSizes",
    "moscow_date",
]

#: The emulator is a local development tool: a fixed default key lets ``wbsync emulator token``
#: and a separately started emulator agree without sharing a file. Override it for anything else.
DEFAULT_SIGNING_KEY = "wbsync-emulator-development-signing-key-v1"

#: WB's calendar: every date WB reads or writes is Moscow's (UTC+3, no daylight saving), so a
#: day at WB begins at 21:00 UTC. The emulator says so itself, as WB's documents do.
MOSCOW = timezone(timedelta(hours=3), "MSK")


def moscow_date(moment: datetime) -> date:
    """The date at WB (in Moscow) at the aware instant ``moment``."""
    return moment.astimezone(MOSCOW).date()


def _moscow_today() -> date:
    return moscow_date(clock.calendar_now())


#: Every limit group (one budget); overrides are keyed by these.


def limit_groups() -> frozenset[str]:
    """The limit groups of every registered emulated method (a plugin's included)."""
    return frozenset(m.group for m in METHODS.values())


_STRICT = ConfigDict(extra="forbid", frozen=True)


class SellerSizes(BaseModel):
    """How much data one seller has."""

    model_config = _STRICT

    products: int = Field(default=25, ge=0, description="Cards, goods with prices, funnel rows.")
    campaigns: int = Field(default=6, ge=0, description="Advert campaigns.")
    report_rows: int = Field(default=40, ge=0, description="Finance detailed report rows.")
    orders: int = Field(default=30, ge=0, description="Statistics orders.")
    sales: int = Field(default=20, ge=0, description="Statistics sales and returns.")
    days: int = Field(default=7, ge=1, le=31, description="Days of funnel and advert history.")
    warehouses: int = Field(default=4, ge=0, description="Warehouses in acceptance coefficients.")
    batch: int = Field(
        default=3,
        ge=1,
        description="Statistics rows sharing one lastChangeDate (WB refreshes them in batches).",
    )


class LimitSpec(BaseModel):
    """A replacement for WB's limit of a group (raw, before the time scale)."""

    model_config = _STRICT

    period_s: float = Field(gt=0)
    limit: int = Field(ge=1)
    burst: int = Field(ge=1)

    def to_rate(self) -> Rate:
        """As a bucket's ``Rate``."""
        return Rate(period_s=self.period_s, limit=self.limit, burst=self.burst)


#: A group's replacement limit: one for every token type, or one per type.
LimitOverride = LimitSpec | dict[Kind, LimitSpec]

FaultKind = Literal[
    "error",
    "refuse",
    "slow",
    "drop",
    "malformed",
    "rate_limit",
    "global_limit",
    "redirect",
    "error_body",
    "trickle",
]
#: The shapes WB writes its errors in: problem+json (``title``, ``detail``), ``{"error":
#: str}``, ``{"errors": [str]}``, ``{"error": true, "errorText": str}``, ``{"message": str}``,
#: plain text, an HTML page.
BodyShape = Literal["problem", "error", "errors", "error_text", "message", "text", "html"]


class FaultRule(BaseModel):
    """One injected fault: which requests it hits, how often, and what it does.

    ``count`` makes it hit the next N matching requests (then it is spent); otherwise ``share``
    is the probability per matching request, drawn from the emulator's seeded RNG. Kinds:
    ``error`` (a 5xx), ``refuse`` (a 4xx), ``slow`` (the reply waits ``delay_ms``), ``drop`` (a
    body cut short),
    ``malformed`` (a body that is not JSON), ``rate_limit`` (a 429 before the bucket, from
    the method's limiter: a penalty of ``retry_s``), ``global_limit`` (WB's global limiter puts
    the seller under a penalty of ``retry_s``: every method of the seller answers 429 until it
    lifts; with ``extends``, each request during it restarts it),
    ``redirect`` (a 3xx with a Location, nothing applied), ``error_body`` (a 200 whose body is
    an error object, nothing applied), ``trickle`` (the real reply, one byte every
    ``delay_ms``). ``headers`` replace the fault reply's headers (a hostile gateway).
    ``error``, ``refuse`` and ``error_body`` answer in ``shape`` (problem+json, ``error_text``
    for ``error_body``, by default) saying ``words`` (and ``title``, a problem's).
    """

    model_config = _STRICT

    kind: FaultKind
    method: str = Field(default="*", description="Endpoint name (e.g. statistics.sales) or *.")
    seller: str | None = Field(default=None, description="Only this seller id; None = any.")
    share: float = Field(default=1.0, ge=0.0, le=1.0)
    count: int | None = Field(default=None, ge=1)
    status: int = Field(
        default=500,
        ge=300,
        le=599,
        description="Status of an error fault (5xx), a refusal (4xx; 500 = 400) or a redirect "
        "(3xx; 500 = 307).",
    )
    shape: BodyShape | None = Field(
        default=None,
        description="The body of an error, refuse or error_body fault: one of WB's error shapes; "
        "None = problem+json (error_text for error_body).",
    )
    words: str = Field(default="emulated fault", description="What the fault's body says.")
    title: str | None = Field(
        default=None, description="A problem+json body's title; None = the status's own."
    )
    delay_ms: float = Field(
        default=1000.0, ge=0, description="Real ms a slow reply waits, or between trickled bytes."
    )
    retry_s: float = Field(
        default=60.0,
        gt=0,
        description="WB seconds a rate_limit or global_limit fault asks to wait (scaled).",
    )
    extends: bool = Field(
        default=False,
        description="global_limit: a request during the penalty restarts it (as sellers "
        "report WB doing).",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description='Headers set on the fault\'s reply, as given; one given as "" is removed.',
    )

    @model_validator(mode="after")
    def _status_fits_kind(self) -> FaultRule:
        status = self.status
        if self.kind == "refuse" and status != 500 and not (400 <= status < 500 and status != 429):
            raise ValueError("status: a refusal is a 4xx other than 429 (a rate_limit fault)")
        if self.kind != "refuse" and 400 <= status < 500:
            raise ValueError("status: 3xx for a redirect, 4xx for a refusal, 5xx for an error")
        return self

    def refusal_status(self) -> int:
        """The status a ``refuse`` fault answers (400 unless one is given)."""
        return 400 if self.status == 500 else self.status


class ReplyLatency(BaseModel):
    """How long WB takes to answer a method: log-normal, in real milliseconds (never scaled).

    Replies of a real API are not all alike: most come near a typical time, a few take many
    times longer. A log-normal with median ``median_ms`` and shape ``sigma`` has that long tail
    (sigma 0.6: p90 is 2.2x the median, p99 4x), capped at ``max_ms``. The emulator sleeps
    without using its CPU, so thousands of replies can be in flight at once.
    """

    model_config = _STRICT

    median_ms: float = Field(default=0.0, ge=0, description="Median delay; 0 = answer at once.")
    sigma: float = Field(default=0.6, ge=0, le=3, description="Log-normal shape; 0 = constant.")
    max_ms: float = Field(default=10_000.0, gt=0, description="No reply waits longer.")

    def draw_s(self, rng: random.Random) -> float:
        """One reply's delay in seconds."""
        if self.median_ms <= 0:
            return 0.0
        delay_ms = self.median_ms * math.exp(self.sigma * rng.gauss(0.0, 1.0))
        return min(delay_ms, self.max_ms) / 1000.0


class ReportTaskLife(BaseModel):
    """How long a report task (``wbsync.emulator.report_tasks``) spends in each state, in
    WB-seconds (scaled by the time scale, as every WB period): WB's figures by default.

    A benchmark at a tiny time scale keeps built reports longer (``kept_s``): WB's 2 hours at
    a minute of 60 us are 7 ms, less than a loaded machine takes between a report's status
    and its download.
    """

    model_config = _STRICT

    new_s: float = Field(default=2.0, ge=0, description="A task is 'new' this long.")
    build_s: float = Field(
        default=20.0,
        ge=0,
        description="From a task's creation to its report being built ('processing' between).",
    )
    kept_s: float = Field(
        default=2 * 3600.0, gt=0, description="A built report is kept this long, then purged."
    )

    @model_validator(mode="after")
    def _built_after_new(self) -> ReportTaskLife:
        if self.build_s < self.new_s:
            raise ValueError("build_s: a task is built after it stops being new (>= new_s)")
        return self


class EmulatorConfig(BaseModel):
    """All the emulator's knobs."""

    model_config = _STRICT

    seed: int = 0
    time_scale: float = Field(default=1.0, gt=0, description="Multiplies every WB period.")
    signing_key: str = Field(default=DEFAULT_SIGNING_KEY, min_length=16)
    anchor_date: date = Field(
        default_factory=_moscow_today,
        description="'Today' of the generated data (the reports end on it): today's date at WB "
        "(Moscow's) by default, so the syncs' windows, which end today, cover the data; fix it "
        "in a config file for data that never moves.",
    )
    calendar_origin: AwareDatetime | None = Field(
        default=None,
        description="A scaled calendar, as wbsync's WBSYNC_CALENDAR_ORIGIN (the same instant): "
        "from it, the dated data's 'today' runs 1/time_scale as fast as real time (new days "
        "appear in the funnel and advert history and the acceptance coefficients, old ones "
        "leave), while the rest stays generated from anchor_date. Unset: today is anchor_date.",
    )
    sizes: SellerSizes = SellerSizes()
    seller_sizes: dict[str, SellerSizes] = Field(default_factory=dict)
    page_size: dict[str, int] = Field(
        default_factory=dict,
        description="Max rows per reply by endpoint name (statistics default: WB's 80000).",
    )
    statistics_date_from: Literal[">=", ">"] = Field(
        default=">=",
        description="Which statistics rows a dateFrom selects: WB documents lastChangeDate >= "
        "dateFrom (the boundary rows come back); '>' is the stricter reading.",
    )
    limits: dict[str, LimitOverride] = Field(
        default_factory=dict, description="Limit overrides by group: one spec or one per type."
    )
    grace_ms: float = Field(
        default=10.0,
        ge=0,
        description="Real ms of refill a request may be early by (network jitter between the "
        "client's limiter and our bucket) before it is refused.",
    )
    latency: ReplyLatency = Field(
        default_factory=ReplyLatency,
        description="How long every WB method takes to answer (none by default).",
    )
    min_bid_kopecks: int = Field(
        default=100,
        ge=1,
        description="The lowest search-cluster bid WB sets, in kopecks (WB publishes it per item "
        "through its minimum-bids method; by default 1 ruble, the lowest v0 takes): a lower bid "
        "fails alone in v1's reply and refuses a v0 call whole.",
    )
    report_tasks: ReportTaskLife = Field(
        default_factory=ReportTaskLife,
        description="How long a report task is new, building and kept once built (WB's by "
        "default).",
    )
    faults: list[FaultRule] = Field(default_factory=list)
    disabled: list[str] = Field(
        default_factory=list,
        description="Methods switched off, as WB switches some off: they answer 404 (with the "
        "methods WB's documents mark temporarily disabled, unless serve_disabled_in_docs).",
    )
    serve_disabled_in_docs: bool = Field(
        default=False,
        description="Serve the methods WB's documents mark temporarily disabled (acceptance "
        "coefficients) as working, for a demo or tests that need their data; by default they "
        "answer 404, as WB's do.",
    )

    @field_validator("disabled")
    @classmethod
    def _known_methods(cls, names: list[str]) -> list[str]:
        unknown = [n for n in names if n not in METHODS]
        if unknown:
            raise ValueError(f"unknown method(s) {unknown}; known: {', '.join(METHODS)}")
        return names

    @classmethod
    def from_file(cls, path: str | Path, **overrides: object) -> EmulatorConfig:
        """Read a JSON file; keyword ``overrides`` win over the file's values."""
        try:
            data = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                f"cannot read emulator config {path}: {exc.strerror}; give --config a readable "
                "JSON file (its fields: docs/emulator.md)"
            ) from None
        try:
            base = cls.model_validate_json(data)
            return cls.model_validate(base.model_dump() | overrides) if overrides else base
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ConfigError(
                f"invalid emulator config {path}: {problems}; fix the file (its fields: "
                "docs/emulator.md)"
            ) from None

    def disabled_at_start(self) -> set[str]:
        """The methods switched off at start and after a reset: ``disabled``, and those WB's
        documents mark temporarily disabled unless ``serve_disabled_in_docs``."""
        documented = set() if self.serve_disabled_in_docs else disabled_in_docs()
        return set(self.disabled) | documented

    def today(self) -> date:
        """WB's today, the dated data's last day: ``anchor_date``, or Moscow's date on the
        scaled calendar."""
        if self.calendar_origin is None:
            return self.anchor_date
        return moscow_date(clock.Calendar(self.calendar_origin, self.time_scale).now())

    def sizes_for(self, seller_id: str) -> SellerSizes:
        """The data sizes of ``seller_id``."""
        return self.seller_sizes.get(seller_id, self.sizes)

    def page_for(self, endpoint_name: str, default: int) -> int:
        """The most rows one reply of ``endpoint_name`` may carry."""
        return max(1, self.page_size.get(endpoint_name, default))

    def limit_for(
        self,
        endpoint_name: str,
        token_type: Kind,
        changed: dict[str, LimitOverride] | None = None,
    ) -> Rate | None:
        """The raw limit the emulator enforces: a ``changed`` (run-time) or configured override
        of the group, else WB's."""
        method = METHODS[endpoint_name]
        for layer in (changed or {}, self.limits):
            override = layer.get(method.group)
            if isinstance(override, LimitSpec):
                return override.to_rate()
            if isinstance(override, dict) and token_type in override:
                return override[token_type].to_rate()
        return method.rate(token_type)
