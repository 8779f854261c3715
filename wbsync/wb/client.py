"""The WB API client: one rate-limited, retried ``call`` path for every WB method.

Each request first takes a token from the shared limiter (one bucket per seller and limit
group, in Redis), so every process of every host spends one budget. WB's rate-limit headers on
every reply are evidence of its real bucket (``feedback.py``): a stricter WB tightens the shared
bucket. A 429 from WB pushes that shared bucket forward for everyone (``penalize``), or the
seller's global bucket when WB's global limiter said it (``Feedback.is_global``), and goes
back through ``acquire``, which may sleep, or raise ``RateLimitDeferred`` inside a job: that
signal, like ``RateLimitExceeded``, passes through untouched. Transport errors and 5xx are
retried within a budget (``retry.py``); each of them, and each unusable reply, is also reported
to the running job's failure budget
(``wbsync.observability.context.report_upstream_failure``), which outlives this call and its
deferrals. A reply is read into an answer or an error by ``replies.py``; every
error carries WB's words, whatever their shape (``words.py``); a 404 "path not found" stops the
section in the process (``stops.py``). The token never appears in a log line, an exception or
a repr.

Bounds of one HTTP exchange (``http.py``, on the process's shared connection pool): it must
finish, last body byte included, within ``request_deadline_s`` (a reply trickling past it is a
transport failure), and its body is read as a stream and abandoned past ``max_body_bytes``. Only
a 2xx is an answer: a 3xx is an unusable reply (redirects are not followed, and a redirected
write was not applied). The client follows a ``ClientOptions`` (``options.py``), never the whole
settings; replies are parsed with orjson.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from wbsync import __version__
from wbsync.errors import (
    WbApiError,
    WbBadResponseError,
    WbMethodDisabledError,
    WbPathNotFoundError,
    WbRateLimitedError,
    WbTransportError,
)
from wbsync.observability.context import report_upstream_failure
from wbsync.observability.metrics import count_upstream
from wbsync.ratelimit import Acquired, BucketScope, RateLimiter
from wbsync.redis.throughput import Throughput
from wbsync.system import clock
from wbsync.wb.endpoints import Endpoint, base_url, base_url_setting, check_token
from wbsync.wb.feedback import Feedback, RateHeaders
from wbsync.wb.http import HttpPool, HttpReply
from wbsync.wb.options import ClientOptions
from wbsync.wb.replies import (
    WbReply,
    json_or_none,
    no_data_reply,
    refusal,
    request_id,
    server_error,
    success,
)
from wbsync.wb.retry import rate_limit_wait_ms
from wbsync.wb.stops import SectionStops, is_path_not_found
from wbsync.wb.tokens import TokenType, WbToken, parse_token
from wbsync.wb.words import wb_words

__all__ = ["WbClient"]

log = logging.getLogger(__name__)

_JITTER = random.Random()
"""The retries' jitter of every client that is given no generator of its own: seeding one from the
OS at each client (one a job) cost ~12 us."""


class WbClient:
    """Calls WB methods for one cabinet with its token, through the shared limiter.

    The constructor parses the token (``TokenError`` if malformed or expired) and does no I/O;
    without a shared ``http`` pool the client makes its own on first use (and closes it in
    ``aclose``); without the process's ``stops`` it keeps its own. Use ``async with`` or
    ``aclose``.
    """

    def __init__(
        self,
        cabinet_name: str,
        token: str | WbToken,
        limiter: RateLimiter,
        *,
        options: ClientOptions,
        http: HttpPool | None = None,
        rng: random.Random | None = None,
        throughput: Throughput | None = None,
        stops: SectionStops | None = None,
    ) -> None:
        self.cabinet = cabinet_name
        self._token = (
            token if isinstance(token, WbToken) else parse_token(token, cabinet=cabinet_name)
        )
        self._sandbox = self._token.type is TokenType.TEST
        self._limiter = limiter
        self._feedback = Feedback(limiter, cabinet=cabinet_name)
        # Given by whoever composes the application: the client never reads the environment.
        self._options = options
        self._http = http
        self._owns_http = http is None
        self._retry = options.retry
        self._rng = rng or _JITTER
        self._throughput = throughput
        # The process's, when given: a section whose URL does not exist stops for every client.
        self._stops = stops if stops is not None else SectionStops()
        self._closed = False

    def __repr__(self) -> str:
        return f"WbClient(cabinet={self.cabinet!r}, token={self._token!r})"

    @property
    def options(self) -> ClientOptions:
        """The options this client follows (page sizes, bounds, base URLs)."""
        return self._options

    @property
    def token(self) -> WbToken:
        """The parsed token (its repr hides the secret)."""
        return self._token

    async def __aenter__(self) -> WbClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client if this client made it; the client refuses calls afterwards."""
        self._closed = True
        if self._owns_http and self._http is not None:
            await self._http.aclose()
        self._http = None

    def scope(self, ep: Endpoint) -> BucketScope:
        """The shared bucket ``ep`` spends for this token's seller."""
        limit = ep.limit_for(self._token.type, self._options.limit_overrides)
        return BucketScope(cabinet=self._token.seller_id, group=ep.group, limit=limit)

    async def ready_in_ms(self, ep: Endpoint) -> float:
        """Milliseconds until a call of ``ep`` could take its budget's token (0: now), read
        from the shared bucket without taking anything. What a caller that can choose when to
        call (a report task's status poll) times its call by."""
        result = await self._limiter.peek(self.scope(ep))
        return 0.0 if result.acquired else float(result.wait_ms)

    def _client(self) -> HttpPool:
        if self._closed:
            raise RuntimeError(f"WbClient for cabinet {self.cabinet!r} is closed")
        if self._http is None:
            self._http = HttpPool()
        return self._http

    async def call(
        self, ep: Endpoint, *, params: dict[str, Any] | None = None, json: Any = None
    ) -> WbReply:
        """Call ``ep`` once (with retries): rate-limited, errors mapped to ``WbApiError``."""
        check_token(self._token, ep, cabinet=self.cabinet)
        if ep.name in self._options.disabled_methods:
            raise WbMethodDisabledError(
                "method is switched off by WBSYNC_WB_DISABLED_METHODS; nothing sent",
                method=ep.name,
            )
        self._stops.check(ep.section.name, self._base(ep), method=ep.name)
        http, scope = self._client(), self.scope(ep)
        failures = limited = 0
        while True:
            acquired = await self._limiter.acquire(scope)
            answer = await self._send(http, ep, params, json, failures)
            replied_at = clock.monotonic()
            if answer is None:
                failures += 1
                await self._backoff(ep, failures, "transport error")
                continue
            count_upstream(ep.section.name, str(answer.status))
            headers = self._rate_headers(ep, scope, answer)
            if answer.status == 429:
                limited += 1
                await self._on_429(ep, scope, answer, headers, limited, acquired, replied_at)
                continue
            await self._feedback.on_reply(scope, headers, acquired)
            if answer.status >= 500:
                failures += 1
                error = server_error(ep, answer)
                report_upstream_failure(error)
                self._check_budget(failures, error)
                said = f", WB said {error.words!r}" if error.words else ""
                await self._backoff(ep, failures, f"status {answer.status}{said}")
                continue
            return self._reply(ep, answer)

    def _rate_headers(self, ep: Endpoint, scope: BucketScope, reply: HttpReply) -> RateHeaders:
        scale = self._options.time_scale
        return RateHeaders.of(
            reply.headers,
            method=ep.name,
            cabinet=self.cabinet,
            max_wait_s=self._options.rate_wait_max_s * scale,
        )

    async def _send(
        self,
        http: HttpPool,
        ep: Endpoint,
        params: dict[str, Any] | None,
        body: Any,
        failures: int,
    ) -> HttpReply | None:
        """One HTTP exchange within the deadline and the body maximum; None after a transport
        error (or the deadline) that the budget still covers."""
        headers = {
            "Authorization": self._token.authorization(),
            "User-Agent": f"wbsync/{__version__}",
        }
        if ep.probe:
            headers["Host"] = self._wb_host(ep)
        options = self._options
        try:
            return await http.exchange(
                ep.method,
                self._url(ep),
                name=ep.name,
                params=params,
                body=body,
                headers=headers,
                deadline_s=options.request_deadline_s,
                read_timeout_s=options.read_timeout_s,
                max_body_bytes=options.max_body_bytes,
            )
        except WbTransportError as error:
            count_upstream(ep.section.name, "transport")
            report_upstream_failure(error)
            self._check_budget(failures + 1, error)
            return None
        except WbBadResponseError as bad:
            # Not a lost answer but an unusable one (too large, undecodable): not retried.
            report_upstream_failure(bad)
            raise

    def _url(self, ep: Endpoint) -> str:
        return self._base(ep) + ep.path

    def _base(self, ep: Endpoint) -> str:
        # Test tokens work only on WB's sandbox hosts (check_token refused sections without one).
        return base_url(ep.section, self._options.hosts, sandbox=self._sandbox)

    def _wb_host(self, ep: Endpoint) -> str:
        """WB's own host name of ``ep``'s section (its ``-sandbox`` twin for Test tokens)."""
        twin = "-sandbox" if self._sandbox else ""
        return f"{ep.section.host_prefix}{twin}.wildberries.ru"

    def _check_budget(self, failures: int, error: WbApiError) -> None:
        if failures >= self._retry.attempts:
            raise error

    async def _backoff(self, ep: Endpoint, failures: int, reason: str) -> None:
        delay_s = self._retry.backoff_s(
            failures, time_scale=self._options.time_scale, rng=self._rng
        )
        log.warning(
            "cabinet %s: %s failed (%s), try %d of %d in %.0f ms",
            self.cabinet,
            ep.name,
            reason,
            failures + 1,
            self._retry.attempts,
            delay_s * 1000.0,
        )
        await clock.sleep_ms(delay_s * 1000.0)

    async def _on_429(
        self,
        ep: Endpoint,
        scope: BucketScope,
        reply: HttpReply,
        headers: RateHeaders,
        limited: int,
        acquired: Acquired,
        replied_at: float,
    ) -> None:
        wait_ms = rate_limit_wait_ms(headers, scope.limit, self._options.time_scale)
        body = json_or_none(reply.content)
        words = wb_words(reply.status, reply.headers, reply.content)
        # Everyone sharing the bucket waits, not just this caller: WB counts the seller. A 429
        # of WB's global limiter is not about this method: every method of the seller waits,
        # and it teaches nothing of the method's rate. The refused request's token is given
        # back (WB served nothing, so counted nothing): the bucket frees when WB says a retry
        # can succeed, not a whole interval later (a request that reached WB a few ms early,
        # on a loaded machine, would otherwise cost a window).
        if await self._feedback.is_global(scope, body, words):
            target = self._limiter.seller_scope(scope.cabinet)
        else:
            target = scope
            await self._feedback.on_429(scope, headers, acquired, replied_at)
        await self._limiter.penalize(target, wait_ms, words=words, given_back=1)
        if self._throughput is not None:
            await self._throughput.rate_limited()
        rid = request_id(reply.headers, body)
        log.info(
            "cabinet %s: %s got 429 (request %s, WB said %r), bucket %s pushed %d ms",
            self.cabinet,
            ep.name,
            rid,
            words,
            target,
            wait_ms,
        )
        if limited > self._retry.rate_limit_attempts:
            raise WbRateLimitedError(
                "WB kept answering 429",
                retry_after=wait_ms / 1000.0,
                method=ep.name,
                status=429,
                request_id=rid,
                words=words,
            )

    def _reply(self, ep: Endpoint, reply: HttpReply) -> WbReply:
        if reply.status >= 400:
            error = self._refusal(ep, reply)
            if not ep.says_no_data(error):
                raise error
            return self._no_data(ep, reply, error)
        bounds = (self._options.max_unzipped_bytes, self._options.max_csv_rows)
        return success(ep, reply, csv_bounds=bounds)

    def _no_data(self, ep: Endpoint, reply: HttpReply, said: WbApiError) -> WbReply:
        # WB's way of saying "nothing here" for this method: an answer, not a failure.
        log.info(
            "cabinet %s: %s has no data (%d, WB said %r)",
            self.cabinet,
            ep.name,
            said.status,
            said.words,
        )
        return no_data_reply(reply, said)

    def _refusal(self, ep: Endpoint, reply: HttpReply) -> WbApiError:
        """The error of a 4xx, with WB's words; a 404 "path not found" stops the section."""
        words = wb_words(reply.status, reply.headers, reply.content)
        rid = request_id(reply.headers, json_or_none(reply.content))
        error = refusal(ep, reply, rid, words)
        # A probe's 404 is reported by its caller; only a sync's stops the section (a proxy
        # that serves every section but not /ping must not stop the syncs). A 404 its method
        # declares as "no data" is WB's answer, not a wrong path: a report task's status for
        # an id WB does not know is a bare "Not Found: not found".
        if reply.status == 404 and is_path_not_found(words) and not ep.probe:
            if not ep.says_no_data(error):
                return self._path_not_found(ep, rid, words)
        return error

    def _path_not_found(
        self, ep: Endpoint, request_id: str | None, words: str | None
    ) -> WbPathNotFoundError:
        setting = base_url_setting(ep.section, self._options.hosts, sandbox=self._sandbox)
        error = self._stops.misrouted(ep, self._base(ep), setting, request_id, words)
        log.error("cabinet %s: %s", self.cabinet, error)
        return error
