"""The one ``Settings`` class: every setting's type, default, bound and meaning.

Nearly all of it is the settings table (docs/settings.md is generated from it); the per-queue
rows are in ``wbsync.config.queues``, the reading of the environment in
``wbsync.config.environment``. It is one module past 400 lines on purpose: one class, one field
per setting, read top to bottom as the table it is; cut in two, a reader would look for a
setting in both halves.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import AwareDatetime, Field, SecretStr, ValidationInfo, field_validator
from pydantic_core import to_jsonable_python
from pydantic_settings import BaseSettings, SettingsConfigDict

from wbsync.config.queues import QUEUE_OPTIONS, per_queue
from wbsync.config.secrets import revealed, without_password
from wbsync.values.limit_overrides import LimitOverrides, parse_limit_overrides

# Shortest API key accepted: 32 characters leave guessing out of reach for any key made as the
# message below says (``openssl rand -hex 32`` gives 64).
API_KEY_MIN_LENGTH = 32
FUNNEL_DAYS_MAX = 7
"""WB serves the sales-funnel history of the last week only (analytics, products/history)."""
_MAKE_A_KEY = "make one with `openssl rand -hex 32`"


class Settings(BaseSettings):
    """All of wbsync's configuration.

    Secrets (the secret key, the API keys) are ``SecretStr``: their value is read with
    ``get_secret_value()`` where it is used and never appears in a repr, a log or an error; URL
    settings show no password in the repr either.
    """

    model_config = SettingsConfigDict(env_prefix="WBSYNC_", extra="forbid", frozen=True)

    redis_url: str | None = Field(
        default=None,
        description="Redis to use: redis://host:port/db, or a cluster by its seed nodes, "
        "redis+cluster://host1:port1,host2:port2; unset = run and api refuse to start (unless "
        "given --embedded-redis); the demo starts a private embedded redis-server.",
    )
    redis_prefix: str = Field(
        default="wbsync", description="Every Redis key wbsync writes starts with this prefix."
    )
    database_url: str = Field(
        default="sqlite+aiosqlite:///./wbsync.db",
        description="SQLAlchemy async URL (sqlite+aiosqlite or postgresql+asyncpg).",
    )
    database_pool_size: int = Field(
        default=15,
        ge=1,
        description="PostgreSQL connections a process keeps open; a burst opens up to 10 "
        "more, closed when given back. Every process counts against the server's "
        "max_connections. SQLite uses one.",
    )
    time_scale: float = Field(
        default=1.0,
        gt=0,
        description="Multiplies every WB period and every wait policy duration (0.01: a minute "
        "becomes 0.6 s). For the emulator, tests and demos; 1 against real WB.",
    )
    calendar_origin: AwareDatetime | None = Field(
        default=None,
        description="A scaled calendar (RFC 3339 instant with its offset, the same in every "
        "process and the emulator): from it, dates run 1/time_scale as fast as real time, so a "
        "compressed-time run sees days pass and age out of retention. Unset: the real calendar.",
    )
    defer_threshold_ms: int = Field(
        default=5000,
        ge=0,
        description="Inside a job, waits up to this long are slept in place; longer waits defer "
        "the job to BullMQ's delayed state (scaled by time_scale). Per queue: "
        "WBSYNC_QUEUE_DEFER_THRESHOLD_MS.",
    )
    wait_ceiling_margin_ms: int = Field(
        default=5000,
        ge=0,
        description="Outside a job the limiter sleeps while the total wait stays under two "
        "periods of the bucket plus this margin (scaled), then raises RateLimitExceeded.",
    )
    wait_ceiling_cap_ms: int = Field(
        default=125_000,
        ge=0,
        description="The most that wait (two periods plus the margin) may be, whatever the "
        "bucket's period (scaled): a 1-per-hour bucket refuses at once instead of sleeping.",
    )
    limiter_refill_margin_ratio: float = Field(
        default=0.02,
        ge=0,
        le=0.5,
        description="Fraction of each token's refill interval added to it (at most "
        "limiter_refill_margin_cap_ms), so jitter between our clock and WB's never makes a "
        "request arrive before WB's bucket refilled.",
    )
    limiter_refill_margin_cap_ms: float = Field(
        default=25.0,
        ge=0,
        description="The most the refill margin adds to one token's interval (real ms, not "
        "scaled: the jitter it absorbs is real time).",
    )
    learned_limit_ttl_s: float = Field(
        default=3600.0,
        gt=0,
        description="How long a limit learned from WB's replies (stricter than the table) "
        "holds before the table applies again (scaled).",
    )
    wb_seller_limit_per_min: int | None = Field(
        default=None,
        ge=1,
        description="A rate of each seller's global bucket (requests a minute, burst as many), "
        "spent by every call of the seller besides its method's bucket. WB's global limiter "
        "publishes no number: unset, the global bucket holds only the penalties WB's global "
        "limiter gives.",
    )
    wb_rate_wait_max_s: float = Field(
        default=21_600.0,
        gt=0,
        description="The longest wait WB's rate-limit headers (X-Ratelimit-Retry, Retry-After, "
        "X-Ratelimit-Reset) may impose on a bucket, and the longest interval a learned limit "
        "may have (scaled). 6 h: WB's largest penalty seen was 18,236 s (5 h 4 min). A wait "
        "past it is clamped to it, never shortened further; one that is non-numeric, "
        "negative, NaN or infinite is logged and read as absent.",
    )
    wb_request_deadline_s: float = Field(
        default=120.0,
        gt=0,
        description="The most one HTTP exchange with WB may take, connect to last body byte "
        "(real seconds, not scaled), on top of the 60 s per-read timeout; past it the exchange "
        "is a transport failure (retried, spends the job's failure budget).",
    )
    wb_max_body_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="The largest reply body read from WB (bytes, decoded); a larger one is "
        "abandoned at that size as an unusable reply naming the method and the size.",
    )
    wb_max_unzipped_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        description="The largest CSV file a reply that WB sends as a ZIP archive may inflate "
        "to (bytes; seller analytics' nm-report downloads), as the archive declares it, checked "
        "before anything is inflated (an archive that understates it fails its CRC check); past "
        "it the reply is unusable, naming the file and the bound.",
    )
    wb_max_csv_rows: int = Field(
        default=200_000,
        ge=1,
        description="The most rows the CSV file of a ZIP-archive reply may hold (its header not "
        "counted); past it the reply is unusable, naming the file and the bound: ask WB for a "
        "shorter period (a report task's window) or raise it.",
    )
    wb_finance_page_rows: int = Field(
        default=10_000,
        ge=1,
        le=100_000,
        description="Rows asked for per page of the finance detail report (WB allows up to "
        "100,000, ~2 KB of JSON each); 10,000 keeps a page near 21 MB.",
    )
    limit_overrides: LimitOverrides = Field(
        default_factory=dict,
        description="Limits that replace the table's, by limit group, JSON: {\"finance.detailed_"
        'report": {"period_s": 90, "limit": 1, "burst": 1}}, or per token type: {"prices": '
        '{"personal": {...}, "base": {...}}}. WB seconds, unscaled.',
    )
    sync_queue_concurrency: int = Field(
        default=5,
        ge=1,
        description="Jobs each sync queue's worker runs at once, unless its sync has a figure of "
        "its own (booking-slot-monitor: 10). Per process. Per queue: WBSYNC_QUEUE_CONCURRENCY.",
    )
    queue_concurrency: dict[str, int] = per_queue("concurrency")
    leader_lease_ms: int = Field(
        default=15_000,
        ge=300,
        description="Lease of a queue's fan-out leader in Redis (real ms, not scaled): a leader "
        "extends it every third of it; when a leader dies another process takes over after at "
        "most this long plus a third.",
    )
    wb_base_url: str | None = Field(
        default=None,
        description="One base URL for every WB section (e.g. the emulator); unset = WB's hosts. "
        "A WB section's own host (<prefix>.wildberries.ru) serves that section only: given here "
        "for others, the start is refused.",
    )
    wb_base_urls: dict[str, str] = Field(
        default_factory=dict,
        description='Per-section base URLs, JSON: {"finance": "https://..."}; beats wb_base_url. '
        "A WB host given for another section than its own refuses the start.",
    )
    wb_sandbox_base_url: str | None = Field(
        default=None,
        description="Where Test tokens go: one base URL for WB's -sandbox hosts (e.g. the "
        "emulator's sandbox URL); unset = WB's <host>-sandbox.wildberries.ru.",
    )
    wb_disabled_methods: list[str] = Field(
        default_factory=list,
        description='WB methods known to be switched off, JSON: ["tariffs.acceptance_'
        'coefficients"]; a job calling one sends nothing and waits disabled_retry_s.',
    )
    disabled_retry_s: float = Field(
        default=3600.0,
        gt=0,
        description="A job that meets a method WB switched off comes back after this long "
        "(scaled).",
    )
    suspension_probe_s: float = Field(
        default=21600.0,
        gt=0,
        description="What WB refused for good (a dead token, a missing category, a token type, "
        "no balance; docs/failures.md) is suspended: after this long the fan-out lets one job "
        "of it through as a probe, and WB accepting it lifts the suspension, refusing renews it "
        "(scaled). A revoked cabinet costs at most one request per section this often.",
    )
    secret_key: SecretStr | None = Field(
        default=None,
        description="Key that encrypts cabinet tokens in the database (any string; keep it "
        "secret). Required once a cabinet is stored.",
    )
    api_keys: list[SecretStr] = Field(
        default_factory=list,
        description='Bearer keys the HTTP API accepts, JSON: ["k1", "k2"]; each at least '
        f"{API_KEY_MIN_LENGTH} characters.",
    )
    fanout_intervals_s: dict[str, float] = per_queue("fanout_interval_s")
    sync_lookback_days: int = Field(
        default=30, ge=1, description="How far back a first pull of a report starts."
    )
    sync_stats_days: int = Field(
        default=7, ge=1, le=31, description="Days of advert stats each run pulls (WB: up to 31)."
    )
    sync_funnel_days: int = Field(
        default=FUNNEL_DAYS_MAX,
        ge=1,
        description="Days of sales-funnel history each run pulls; WB serves the last week only "
        f"(at most {FUNNEL_DAYS_MAX}).",
    )
    sync_report_horizon_days: int = Field(
        default=90,
        ge=1,
        le=400,
        description="How far back a first run of a dated report task (paid storage, paid "
        "acceptance) starts, in windows WB accepts (8 and 31 days); later runs go on from "
        "the last day stored.",
    )
    sync_report_recent_days: int = Field(
        default=8,
        ge=1,
        le=31,
        description="Days before the last day stored that each later run of a dated report "
        "task asks for again (WB recalculates recent days).",
    )
    report_deadline_s: float = Field(
        default=3600.0,
        gt=0,
        description="A report task WB has not built this long after it was created fails the "
        "job's attempt with that reason (scaled); the next attempt creates it again. Waiting "
        "for WB to build a report spends no attempt.",
    )
    report_recreate_max: int = Field(
        default=3,
        ge=0,
        description="Times a report task that WB lost (purged, canceled, unknown id) is "
        "created again for one window before the job's attempt fails with that reason.",
    )
    autobid_min: int = Field(default=150, ge=1, description="Autobidder: lowest bid it sets (RUB).")
    autobid_max: int = Field(default=1000, ge=1, description="Autobidder: highest bid it sets.")
    autobid_target: int = Field(default=400, ge=1, description="Autobidder: the bid it moves to.")
    autobid_step: int = Field(default=50, ge=1, description="Autobidder: largest change a run.")
    job_attempts: int = Field(
        default=3,
        ge=1,
        description="Attempts a sync job gets for real failures (deferrals spend none).",
    )
    job_failure_budget: int = Field(
        default=8,
        ge=1,
        description="Upstream failures (WB 5xx, transport, unusable replies) a job may meet "
        "without progress, across deferrals and retries; the one that reaches it fails the job. "
        "Per queue: WBSYNC_QUEUE_FAILURE_BUDGET.",
    )
    queue_failure_budget: dict[str, int] = per_queue("failure_budget")
    queue_defer_threshold_ms: dict[str, float] = per_queue("defer_threshold_ms")
    infra_retry_ms: int = Field(
        default=1000,
        ge=1,
        description="First backoff of a job sent back to delayed by an infrastructure failure "
        "(database or Redis unavailable) or a WB call that gave up; doubles each time (scaled).",
    )
    infra_retry_max_ms: int = Field(
        default=60_000,
        ge=1,
        description="Largest backoff of those retries (scaled).",
    )
    change_stream_maxlen: int = Field(
        default=100_000,
        ge=1,
        description="Entries the change stream keeps (XADD MAXLEN ~, approximate): one per "
        "committed page that changed rows; a consumer further behind catches up from the feed.",
    )
    prune_interval_s: float = Field(
        default=3600.0,
        gt=0,
        description="How often a queue's fan-out leader prunes the queue's datasets to their "
        "retention (scaled).",
    )
    failed_retry_s: float = Field(
        default=300.0,
        gt=0,
        description="The fan-out enqueues a cabinet whose last job failed again after this "
        "long, instead of at the queue's next interval (scaled).",
    )
    job_lock_ms: int = Field(
        default=30_000,
        ge=1000,
        description="How long a job's lock lives without renewal; a crashed worker's job is "
        "taken over after one to two of these (the stalled-job check runs this often).",
    )
    shutdown_grace_s: float = Field(
        default=30.0,
        gt=0,
        description="On SIGINT/SIGTERM, how long running jobs may take to "
        "finish or defer before they are cancelled (resumed later from their cursors).",
    )
    log_level: str = Field(default="INFO", description="Python logging level.")
    plugins: list[str] | None = Field(
        default=None,
        description="Plugins to load (entry-point names, see docs/extending.md), JSON: "
        '["deductions"]; [] = none; unset = every installed plugin. `wbsync plugins` lists them.',
    )

    @field_validator("redis_url")
    @classmethod
    def _unset_when_empty(cls, url: str | None) -> str | None:
        return url or None  # an empty variable is an unset one; the URL is checked at start

    @field_validator(*(option.field for option in QUEUE_OPTIONS.values()))
    @classmethod
    def _per_queue_bound(cls, values: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        option = next(o for o in QUEUE_OPTIONS.values() if o.field == info.field_name)
        problem = option.problem(values)
        if problem:
            raise ValueError(problem)
        return values

    @field_validator("sync_funnel_days")
    @classmethod
    def _within_the_last_week(cls, days: int) -> int:
        if days > FUNNEL_DAYS_MAX:
            raise ValueError(
                f"WB serves the sales-funnel history of the last week only: at most "
                f"{FUNNEL_DAYS_MAX} days; set 1 to {FUNNEL_DAYS_MAX}"
            )
        return days

    @field_validator("api_keys")
    @classmethod
    def _long_enough(cls, keys: list[SecretStr]) -> list[SecretStr]:
        for i, key in enumerate(keys):
            if len(key.get_secret_value()) < API_KEY_MIN_LENGTH:
                raise ValueError(
                    f"key #{i + 1} has {len(key.get_secret_value())} characters, at least "
                    f"{API_KEY_MIN_LENGTH} are needed; {_MAKE_A_KEY}"
                )
        return keys

    @field_validator("infra_retry_max_ms")
    @classmethod
    def _at_least_the_first_retry(cls, value: int, info: ValidationInfo) -> int:
        first = info.data.get("infra_retry_ms")
        if first is not None and value < first:
            raise ValueError(
                f"{value} is less than WBSYNC_INFRA_RETRY_MS ({first}); the longest retry wait "
                "must be at least the first"
            )
        return value

    @field_validator("limit_overrides", mode="before")
    @classmethod
    def _parse_overrides(cls, value: object) -> LimitOverrides:
        return parse_limit_overrides(value)

    def secret_key_value(self) -> str | None:
        """The secret key itself, for the one place that derives the cipher from it."""
        return self.secret_key.get_secret_value() if self.secret_key else None

    def api_key_values(self) -> tuple[str, ...]:
        """The API keys themselves, for the one place that compares them."""
        return tuple(key.get_secret_value() for key in self.api_keys)

    def environment(self) -> dict[str, str]:
        """Every setting as the variable that gives it back (``WBSYNC_<NAME>``; JSON where the
        setting is JSON), unset ones left out: the environment a child process is started with
        to run on these very settings. Secrets are in clear (the child needs them): never log
        it."""
        env = {}
        for name in type(self).model_fields:
            value = revealed(getattr(self, name))
            if value is None:
                continue
            plain = to_jsonable_python(value)
            env[f"WBSYNC_{name.upper()}"] = plain if isinstance(plain, str) else json.dumps(plain)
        return env

    def described(self) -> list[tuple[str, str, str]]:
        """Every setting as (variable, current value, meaning); secrets and URL passwords masked."""
        out = []
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if isinstance(value, SecretStr) or (
                isinstance(value, list) and value and isinstance(value[0], SecretStr)
            ):
                shown = "**********" if not isinstance(value, list) else f"[{len(value)} set]"
            elif isinstance(value, str):
                shown = without_password(value)
            elif value is None:
                shown = "(unset)"
            else:
                shown = json.dumps(value) if isinstance(value, dict | list) else str(value)
            out.append((f"WBSYNC_{name.upper()}", shown, info.description or ""))
        return out

    def __repr_args__(self) -> Any:
        for name, value in super().__repr_args__():
            yield name, without_password(value) if isinstance(value, str) else value
