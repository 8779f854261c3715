"""Settings, read once from the environment (``WBSYNC_*``) into one typed object.

Every setting, its default and its meaning is listed in the README; this module is the source.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from functools import lru_cache

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from wbsync.errors import ConfigError


class Settings(BaseSettings):
    """All of wbsync's configuration."""

    model_config = SettingsConfigDict(env_prefix="WBSYNC_", extra="forbid", frozen=True)

    redis_url: str | None = Field(
        default=None,
        description="Redis to use; unset = start a private embedded redis-server.",
    )
    redis_prefix: str = Field(
        default="wbsync", description="Every Redis key wbsync writes starts with this prefix."
    )
    database_url: str = Field(
        default="sqlite+aiosqlite:///./wbsync.db",
        description="SQLAlchemy async URL (sqlite+aiosqlite or postgresql+asyncpg).",
    )
    time_scale: float = Field(
        default=1.0,
        gt=0,
        description="Multiplies every WB period and every wait policy duration (0.01: a minute "
        "becomes 0.6 s). For the emulator, tests and demos; 1 against real WB.",
    )
    defer_threshold_ms: int = Field(
        default=5000,
        ge=0,
        description="Inside a job, waits up to this long are slept in place; longer waits defer "
        "the job to BullMQ's delayed state (scaled by time_scale).",
    )
    wait_ceiling_margin_ms: int = Field(
        default=5000,
        ge=0,
        description="Outside a job the limiter sleeps while the total wait stays under two "
        "periods of the bucket plus this margin (scaled), then raises RateLimitExceeded.",
    )
    limiter_refill_margin_ms: float = Field(
        default=25.0,
        ge=0,
        description="Real milliseconds added to each token's refill interval (not scaled), so "
        "jitter between our clock and WB's never makes a request arrive before WB's bucket "
        "refilled.",
    )
    sync_queue_concurrency: int = Field(
        default=5, ge=1, description="Jobs each sync queue's worker runs at once."
    )
    wb_base_url: str | None = Field(
        default=None,
        description="One base URL for every WB section (e.g. the emulator); unset = WB's hosts.",
    )
    wb_base_urls: dict[str, str] = Field(
        default_factory=dict,
        description='Per-section base URLs, JSON: {"finance": "https://..."}; beats wb_base_url.',
    )
    secret_key: str | None = Field(
        default=None,
        description="Key that encrypts cabinet tokens in the database (any string; keep it "
        "secret). Required once a cabinet is stored.",
    )
    api_keys: list[str] = Field(
        default_factory=list, description='Bearer keys the HTTP API accepts, JSON: ["k1", "k2"].'
    )
    fanout_intervals_s: dict[str, float] = Field(
        default_factory=dict,
        description='Fan-out interval per queue, JSON: {"rnp-finance-sync": 3600}; unset queues '
        "keep their defaults (see the README). Scaled by time_scale.",
    )
    sync_lookback_days: int = Field(
        default=30, ge=1, description="How far back a first pull of a report starts."
    )
    sync_stats_days: int = Field(
        default=7, ge=1, le=31, description="Days of advert and sales-funnel stats each run pulls."
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
    job_lock_ms: int = Field(
        default=30_000,
        ge=1000,
        description="How long a job's lock lives without renewal; a "
        "crashed worker's job is taken over after about this long.",
    )
    shutdown_grace_s: float = Field(
        default=30.0,
        gt=0,
        description="On SIGINT/SIGTERM, how long running jobs may take to "
        "finish or defer before they are cancelled (resumed later from their cursors).",
    )
    log_level: str = Field(default="INFO", description="Python logging level.")


# Read by the test suite only; allowed beside the settings so CI can set it.
_NOT_SETTINGS = frozenset({"WBSYNC_TEST_POSTGRES_URL"})


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """``WBSYNC_*`` variables that name no setting, each with a hint (a typo is an error)."""
    known = {f"WBSYNC_{name.upper()}" for name in Settings.model_fields}
    problems = []
    for var in sorted(environ):
        if var.startswith("WBSYNC_") and var not in known and var not in _NOT_SETTINGS:
            close = difflib.get_close_matches(var, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problems.append(f"{var} is not a setting{hint}")
    return problems


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read from the environment on first use."""
    unknown = unknown_variables(os.environ)
    if unknown:
        raise ConfigError("; ".join(unknown) + "; see the README's settings table")
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"WBSYNC_{'_'.join(str(p) for p in err['loc']).upper()}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"invalid configuration: {problems}") from None
