"""What one wbsync process shares: settings, Redis, the limiter, the database, HTTP, the queues.

Every WB client of the process shares one HTTP connection pool (at most
``wbsync.wb.http.MAX_CONNECTIONS`` connections to WB) and one ``ClientOptions`` built from the
settings here.

``open_runtime(settings)`` gives a started runtime and closes everything on exit. Without
``WBSYNC_REDIS_URL`` it refuses to start (``ConfigError``) unless the caller asks for a private
embedded Redis: jobs and buckets in it are discarded at exit and no other process can see them,
so only the demo and an explicit ``--embedded-redis`` use one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import MappingProxyType

from wbsync.config import Settings, without_password
from wbsync.errors import ConfigError, WbSyncError
from wbsync.jobs.lag import LagHistory
from wbsync.jobs.queue import SyncQueue
from wbsync.observability.health import Health, Probe
from wbsync.ratelimit import Limit, LimiterOptions, RateLimiter
from wbsync.redis import keys, redis_bounds
from wbsync.redis.redis_client import is_redis_failure
from wbsync.redis.redis_server import redis_url as resolve_redis_url
from wbsync.redis.throughput import Throughput
from wbsync.shared.change_stream import ChangeStream
from wbsync.store import Cabinet, Database, Store
from wbsync.store.runs import RunLog
from wbsync.syncs import SYNCS, BidRule, SyncOptions
from wbsync.system import clock
from wbsync.wb.client import WbClient
from wbsync.wb.http import HttpPool
from wbsync.wb.options import ClientOptions, Hosts
from wbsync.wb.retry import RetryPolicy
from wbsync.wb.stops import SectionStops
from wbsync.wb.tokens import WbToken


def limiter_options(settings: Settings) -> LimiterOptions:
    """The limiter's options as ``settings`` configure them (prefix, time scale, margins, cap,
    TTL), as every process builds its limiter."""
    return LimiterOptions(
        prefix=settings.redis_prefix,
        time_scale=settings.time_scale,
        ceiling_margin_ms=settings.wait_ceiling_margin_ms,
        ceiling_cap_ms=settings.wait_ceiling_cap_ms,
        refill_margin_ratio=settings.limiter_refill_margin_ratio,
        refill_margin_cap_ms=settings.limiter_refill_margin_cap_ms,
        learned_ttl_s=settings.learned_limit_ttl_s,
        max_wait_s=settings.wb_rate_wait_max_s,
        seller_limit=_seller_limit(settings.wb_seller_limit_per_min),
    )


def _seller_limit(per_min: int | None) -> Limit | None:
    """The seller's global bucket's rate: ``per_min`` a minute, as a burst too."""
    return None if per_min is None else Limit(period_s=60.0, limit=per_min, burst=per_min)


def wb_hosts(settings: Settings) -> Hosts:
    """The WB hosts ``settings`` name (WBSYNC_WB_BASE_URL(S), WBSYNC_WB_SANDBOX_BASE_URL)."""
    return Hosts(
        base_url=settings.wb_base_url,
        base_urls=MappingProxyType(dict(settings.wb_base_urls)),
        sandbox_base_url=settings.wb_sandbox_base_url,
    )


def client_options(settings: Settings, *, retry: RetryPolicy | None = None) -> ClientOptions:
    """The WB client's options as ``settings`` configure them (and ``retry``, else the default
    policy), as every process builds its clients."""
    return ClientOptions(
        time_scale=settings.time_scale,
        request_deadline_s=settings.wb_request_deadline_s,
        max_body_bytes=settings.wb_max_body_bytes,
        max_unzipped_bytes=settings.wb_max_unzipped_bytes,
        max_csv_rows=settings.wb_max_csv_rows,
        rate_wait_max_s=settings.wb_rate_wait_max_s,
        finance_page_rows=settings.wb_finance_page_rows,
        hosts=wb_hosts(settings),
        limit_overrides=MappingProxyType(
            {group: MappingProxyType(dict(by)) for group, by in settings.limit_overrides.items()}
        ),
        disabled_methods=frozenset(settings.wb_disabled_methods),
        retry=retry or RetryPolicy(),
    )


class Runtime:
    """The process's shared resources; ``start``/``aclose`` explicit, no I/O in the constructor."""

    def __init__(self, settings: Settings, *, redis_url: str) -> None:
        self.settings = settings
        self.redis_url = redis_url
        # The process's calendar: real, or scaled from the deployment's shared origin.
        clock.set_calendar(settings.calendar_origin, settings.time_scale)
        self.redis = redis_bounds.connect(redis_url)
        self.limiter = RateLimiter(self.redis, limiter_options(settings))
        self.throughput = Throughput(self.redis, prefix=settings.redis_prefix)
        self.lag = LagHistory(self.redis, prefix=settings.redis_prefix)
        self.database = Database(settings.database_url, pool_size=settings.database_pool_size)
        self.store = Store(self.database, secret_key=settings.secret_key_value())
        self.change_stream = ChangeStream(
            self.redis, prefix=settings.redis_prefix, maxlen=settings.change_stream_maxlen
        )
        self.store.add_listener(self.change_stream.publish)
        self.run_log = RunLog(self.store.runs)
        self.http = HttpPool()
        # A section whose base URL answered "path not found" stops for every client here.
        self.section_stops = SectionStops()
        self.client_options = client_options(settings)
        self.sync_options = SyncOptions(
            lookback_days=settings.sync_lookback_days,
            stats_days=settings.sync_stats_days,
            funnel_days=settings.sync_funnel_days,
            report_horizon_days=settings.sync_report_horizon_days,
            report_recent_days=settings.sync_report_recent_days,
            report_deadline_s=settings.report_deadline_s * settings.time_scale,
            report_recreate_max=settings.report_recreate_max,
            bid_rule=BidRule(
                min_bid=settings.autobid_min,
                max_bid=settings.autobid_max,
                target=settings.autobid_target,
                step=settings.autobid_step,
            ),
        )
        self.health = Health()
        self._queues: dict[str, SyncQueue] = {}
        self._closed = False

    @property
    def queue_prefix(self) -> str:
        """The prefix of every BullMQ key of this deployment."""
        return keys.queue_prefix(self.settings.redis_prefix)

    async def start(self, *, migrate: bool = True) -> Runtime:
        """Check Redis, connect the database (migrating it to the latest schema) and verify
        the secret key against the stored tokens. A Redis or database that does not answer and
        a missing or wrong key are ``ConfigError``s saying what to fix: the process did not
        start. Redis goes first: it writes nothing, so a refused start leaves no fresh database
        behind."""
        if self._closed:
            raise WbSyncError("a closed Runtime cannot be started again")
        await self._check_redis()
        await self.database.start_configured()
        if migrate:
            await self.database.migrate()
        await self.store.cabinets.verify_key()  # a missing or wrong key stops the start here
        return self

    async def _check_redis(self) -> None:
        try:
            await self.redis.ping()
        except Exception as exc:
            if not is_redis_failure(exc):
                raise
            raise ConfigError(
                f"WBSYNC_REDIS_URL: Redis at {without_password(self.redis_url)} did not answer "
                f"({type(exc).__name__}: {exc}); start Redis there or fix the URL (host, port, "
                "password, and a database number the server has: 0-15 unless its `databases` "
                "setting says more)"
            ) from None

    async def aclose(self) -> None:
        """Close every connection this runtime opened."""
        if self._closed:
            return
        self._closed = True
        for queue in self._queues.values():
            await queue.close()
        await self.http.aclose()
        await self.run_log.aclose()  # the successes still waiting, before the database goes
        await self.database.aclose()
        await self.redis.aclose()

    def probes(self) -> dict[str, Probe]:
        """One bounded question to each dependency, for ``wbsync.observability.health``."""
        return {"redis": self.redis.ping, "database": self.database.ping}

    def queue(self, name: str) -> SyncQueue:
        """The producer of queue ``name`` (one per process)."""
        if name not in SYNCS:
            raise WbSyncError(f"unknown queue {name!r}; queues: {', '.join(SYNCS)}")
        if name not in self._queues:
            self._queues[name] = SyncQueue(
                name,
                redis_url=self.redis_url,
                prefix=self.queue_prefix,
                attempts=self.settings.job_attempts,
                backoff_ms=max(1, round(1000 * self.settings.time_scale)),
            )
        return self._queues[name]

    def client(self, cabinet: Cabinet) -> WbClient:
        """A WB client for ``cabinet`` on the shared HTTP connection pool and limiter."""
        return self.client_for(cabinet.name, cabinet.token())

    def client_for(self, name: str, token: str | WbToken) -> WbClient:
        """A WB client for a cabinet called ``name`` with ``token`` (stored or not yet)."""
        return WbClient(
            name,
            token,
            self.limiter,
            options=self.client_options,
            http=self.http,
            throughput=self.throughput,
            stops=self.section_stops,
        )


NO_REDIS_URL = (
    "WBSYNC_REDIS_URL is not set: set it to your Redis (e.g. redis://127.0.0.1:6379/0), or pass "
    "--embedded-redis to try wbsync on a private Redis that is discarded at exit"
)


@asynccontextmanager
async def open_runtime(
    settings: Settings, *, migrate: bool = True, embedded_redis: bool = False
) -> AsyncIterator[Runtime]:
    """A started runtime on the configured Redis; with ``embedded_redis`` and none configured,
    on a private embedded one (``ConfigError`` when neither)."""
    if settings.redis_url is None and not embedded_redis:
        raise ConfigError(NO_REDIS_URL)
    with resolve_redis_url(settings.redis_url) as url:
        runtime = Runtime(settings, redis_url=url)
        try:
            yield await runtime.start(migrate=migrate)
        finally:
            await runtime.aclose()
