"""The emulator's ASGI app: WB's gateway (auth, limits, faults, counters) in front of handlers.

Every WB method is served on one host. Paths are distinct but one: ``/ping``, which WB serves
on every section host, is told apart by the request's ``Host`` (its first label, ``-sandbox``
dropped); a ``/ping`` naming no emulated host is WB's 404. Control routes live under
``/__emulator/`` and need no token.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from wbsync.emulator import control
from wbsync.emulator.buckets import BucketDecision, format_seconds
from wbsync.emulator.config import FaultRule
from wbsync.emulator.emulated import EMULATED, Call
from wbsync.emulator.method import Method, Rate
from wbsync.emulator.replies import BadRequest, json_reply, problem, shaped
from wbsync.emulator.state import EmulatorState
from wbsync.emulator.tokens import CATEGORY_BITS, EmuToken, Kind, TokenRefused, verify
from wbsync.emulator.wbdocs import METHODS, SANDBOX_HOSTS

__all__ = ["build_app"]

UNKNOWN_SELLER = "-"


class _Dropped(Response):
    """Starts a reply and abandons it: the server closes the connection mid-reply.

    ASGI gives an app no way to close a socket before replying; a body cut short is what a
    client sees of a connection reset during a reply.
    """

    def __init__(self) -> None:
        super().__init__(status_code=200)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"', "more_body": True})


class _Trickled(Response):
    """A whole reply sent one byte every ``delay_s``: each read gets a byte in time, so only a
    deadline on the whole exchange ends it."""

    def __init__(self, inner: Response, delay_s: float) -> None:
        super().__init__(bytes(inner.body), status_code=inner.status_code)
        self.raw_headers = list(inner.raw_headers)
        self._delay_s = delay_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        body = bytes(self.body)
        for i in range(len(body)):
            await asyncio.sleep(self._delay_s)
            more = i + 1 < len(body)
            await send({"type": "http.response.body", "body": body[i : i + 1], "more_body": more})
        if not body:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


#: Where a redirect fault points: WB's seller portal, which is no API.
REDIRECT_TO = "https://seller.wildberries.ru/login"


@dataclass(slots=True)
class _Outcome:
    response: Response
    seller: str = UNKNOWN_SELLER
    fault: str | None = None


def _rate_limited(
    state: EmulatorState, request_id: str, retry_s: float, reset_s: float, burst: int, limiter: str
) -> Response:
    scale = state.config.time_scale
    resp = problem(429, "too many requests", f"limited by {limiter}", request_id)
    resp.headers["X-Ratelimit-Retry"] = format_seconds(retry_s, scale)
    resp.headers["X-Ratelimit-Limit"] = str(burst)
    resp.headers["X-Ratelimit-Reset"] = format_seconds(reset_s, scale)
    return resp


def _override(resp: Response, rule: FaultRule) -> None:
    """Set the rule's headers on its reply; one given as "" is removed."""
    for name, value in rule.headers.items():
        if value:
            resp.headers[name] = value
        elif name in resp.headers:
            del resp.headers[name]


def _limiter_id(seller: str, group: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"wb-limiter:{seller}:{group}"))


#: How the emulator's global limiter signs its 429's ``detail`` after WB's "limited by <id>":
#: WB documents no words for it, so the reply names it (docs/emulator.md).
GLOBAL_LIMITER = "global limiter"


def _globally_limited(
    state: EmulatorState, rid: str, seller: str, left_s: float, burst: int
) -> Response:
    """The 429 of the seller's global limiter: ``left_s`` (scaled) until it lifts."""
    scale = state.config.time_scale
    detail = f"limited by {_limiter_id(seller, 'global')} ({GLOBAL_LIMITER})"
    resp = problem(429, "too many requests", detail, rid)
    resp.headers["X-Ratelimit-Retry"] = format_seconds(left_s, scale)
    resp.headers["X-Ratelimit-Limit"] = str(burst)
    resp.headers["X-Ratelimit-Reset"] = format_seconds(left_s, scale)
    return resp


#: What the emulator answers for a method switched off. WB documents no reply for it; its
#: gateway answers an unknown path with 404, which is what a method taken off looks like.
DISABLED_DETAIL = (
    "the method is temporarily disabled, see https://dev.wildberries.ru/en/release-notes?id=570"
)


def _with_remaining(
    state: EmulatorState, ep: Method, token: EmuToken | None, resp: Response
) -> Response:
    """WB: every reply but a 429 says what is left, a refusal too. A request without a valid
    token names no seller: it is answered from the bucket of no seller (which no request
    spends, so it shows the method's whole burst)."""
    kind = token.kind if token is not None else Kind.PERSONAL
    rate = state.limit_for(ep.name, kind) or state.limit_for(ep.name, Kind.PERSONAL)
    if rate is not None:
        seller = token.seller if token is not None else UNKNOWN_SELLER
        left = state.buckets.remaining(seller, ep.group, rate.scaled(state.config.time_scale))
        resp.headers["X-Ratelimit-Remaining"] = str(left)
    return resp


def _on_sandbox(state: EmulatorState, request: Request) -> bool:
    """True for a request to a ``-sandbox`` host: by name, or on the sandbox port locally."""
    host = request.headers.get("host", "").split(":")[0]
    server = request.scope.get("server")
    port = server[1] if server else None
    return host.split(".")[0].endswith("-sandbox") or port in state.sandbox_ports


def _authorise(
    state: EmulatorState, ep: Method, request: Request, rid: str
) -> EmuToken | tuple[Response, EmuToken | None]:
    """The token, or the refusal (with the token when it was valid but not enough)."""
    header = request.headers.get("authorization")
    if not header:
        return problem(401, "unauthorized", "token problem; token is missing", rid), None
    try:
        token = verify(header, state.config.signing_key)
    except TokenRefused as exc:
        return problem(401, "unauthorized", f"token problem; {exc}", rid), None
    if token.token_id and token.token_id in state.revoked:
        return problem(401, "unauthorized", "token problem; token is revoked", rid), None
    # WB: a Test token works only on the sandbox hosts, which take nothing else.
    if _on_sandbox(state, request) != (token.kind is Kind.TEST):
        detail = (
            "token problem; test tokens work only on the sandbox hosts"
            if token.kind is Kind.TEST
            else f"token problem; a {token.kind.value} token is not valid on a sandbox host"
        )
        return problem(401, "unauthorized", detail, rid), token
    if ep.category is not None and not token.has(CATEGORY_BITS[ep.category]):
        # WB's status table: 401 when the token's category does not match the API's.
        detail = f"token problem; token scope not allowed for this path: needs {ep.category}"
        return problem(401, "unauthorized", detail, rid), token
    if state.limit_for(ep.name, token.kind) is None:
        detail = f"{token.kind.value} token is not allowed for this path"
        return problem(403, "forbidden", detail, rid), token
    if ep.writes and token.read_only:
        detail = "read-only token scope not allowed for this path"
        return problem(403, "forbidden", detail, rid), token
    if not state.has_balance(token.seller, ep.name):
        detail = "not enough balance for the paid service"
        return problem(402, "payment required", detail, rid), token
    return token


async def _after_bucket(
    state: EmulatorState, call: Call, rule: FaultRule | None, rid: str
) -> Response:
    if rule is not None and rule.kind == "error":
        title = rule.title or "internal server error"
        return shaped(rule.status, rule.shape or "problem", rule.words, rid, title=title)
    if rule is not None and rule.kind == "refuse":
        status = rule.refusal_status()
        return shaped(status, rule.shape or "problem", rule.words, rid, title=rule.title)
    if rule is not None and rule.kind == "drop":
        return _Dropped()
    if rule is not None and rule.kind == "malformed":
        return Response(b'{"data": [{"broken"', media_type="application/json")
    if rule is not None and rule.kind == "redirect":
        status = rule.status if 300 <= rule.status < 400 else 307
        return Response(status_code=status, headers={"Location": REDIRECT_TO})
    if rule is not None and rule.kind == "error_body":
        # By default the shape WB's content and prices APIs answer errors in, here with a 200.
        return shaped(200, rule.shape or "error_text", rule.words, rid, title=rule.title)
    if rule is not None and rule.kind == "slow":
        await asyncio.sleep(rule.delay_ms / 1000.0)
    try:
        reply = await EMULATED[call.method].handler(call)
    except BadRequest as exc:
        body = {
            "title": exc.title,
            "detail": exc.detail,
            "origin": "emulator",
            "requestId": rid,
            "status": 400,
        }
        return json_reply(body, status=400)
    if rule is not None and rule.kind == "trickle":
        return _Trickled(reply, rule.delay_ms / 1000.0)
    return reply


async def _serve(state: EmulatorState, ep: Method, request: Request, rid: str) -> _Outcome:
    token = _authorise(state, ep, request, rid)
    if isinstance(token, tuple):
        refusal, known = token
        seller = known.seller if known is not None else UNKNOWN_SELLER
        return _Outcome(_with_remaining(state, ep, known, refusal), seller)
    seller = token.seller
    if ep.name in state.disabled:
        off = problem(404, "method is disabled", DISABLED_DETAIL, rid)
        return _Outcome(_with_remaining(state, ep, token, off), seller)
    limit = state.limit_for(ep.name, token.kind)
    assert limit is not None  # _authorise refused types without a limit
    scaled: Rate = limit.scaled(state.config.time_scale)
    left_s = state.buckets.global_penalty(seller)
    if left_s > 0:
        return _Outcome(_globally_limited(state, rid, seller, left_s, limit.burst), seller)
    early = state.faults.draw(ep.name, seller, before_bucket=True)
    if early is not None:
        retry = early.retry_s * state.config.time_scale
        if early.kind == "global_limit":
            state.buckets.penalise_seller(seller, retry, extends=early.extends)
            resp = _globally_limited(state, rid, seller, retry, limit.burst)
        else:
            resp = _rate_limited(
                state, rid, retry, retry, limit.burst, _limiter_id(seller, ep.group)
            )
        _override(resp, early)
        return _Outcome(resp, seller, early.kind)
    decision: BucketDecision = state.buckets.take(seller, ep.group, scaled)
    if not decision.allowed:
        resp = _rate_limited(
            state,
            rid,
            decision.retry_s,
            decision.reset_s,
            decision.burst,
            _limiter_id(seller, ep.group),
        )
        return _Outcome(resp, seller)
    late = state.faults.draw(ep.name, seller, before_bucket=False)
    call = Call(request=request, method=ep.name, seller_id=seller, state=state)
    resp = await _after_bucket(state, call, late, rid)
    resp.headers["X-Ratelimit-Remaining"] = str(decision.remaining)
    if late is not None:
        _override(resp, late)
    return _Outcome(resp, seller, late.kind if late else None)


def _method_endpoint(state: EmulatorState, ep: Method) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        arrived, rid = time.time(), uuid.uuid4().hex
        if _on_sandbox(state, request) and ep.host not in SANDBOX_HOSTS:
            return await _not_found(request)  # WB has no sandbox twin of this host
        outcome = await _serve(state, ep, request, rid)
        status = 0 if isinstance(outcome.response, _Dropped) else outcome.response.status_code
        state.counters.record(outcome.seller, ep.name, status, fault=outcome.fault, arrived=arrived)
        delay_s = state.reply_delay_s()
        if delay_s:
            await asyncio.sleep(delay_s)  # the bucket counted the arrival; the reply comes later
        outcome.response.headers["X-Request-Id"] = rid
        return outcome.response

    return endpoint


def _host_label(request: Request) -> str:
    """The WB host a request names: ``content-api`` of ``content-api-sandbox.wildberries.ru``."""
    label = request.headers.get("host", "").split(":")[0].split(".")[0]
    return label.removesuffix("-sandbox")


def _path_route(state: EmulatorState, methods: list[Method]) -> Route:
    """One route for the methods of one path and verb: by the request's host when several."""
    first = methods[0]
    if len(methods) == 1:
        return Route(first.path, _method_endpoint(state, first), methods=[first.verb])
    by_host = {ep.host: _method_endpoint(state, ep) for ep in methods}

    async def endpoint(request: Request) -> Response:
        served = by_host.get(_host_label(request))
        return await (served or _not_found)(request)

    return Route(first.path, endpoint, methods=[first.verb])


async def _not_found(request: Request) -> Response:
    request.app.state.emulator.counters.unserved[request.url.path] += 1
    rid = uuid.uuid4().hex
    detail = "Please consult the https://dev.wildberries.ru/openapi/api-information"
    resp = problem(404, "path not found", detail, rid)
    resp.headers["X-Request-Id"] = rid
    return resp


#: Paths WB has shut, and what it says on them: the old finance report (``reportDetailByPeriod``,
#: statistics-api) since 2026-07-15, in favour of finance-api's detailed report.
DEPRECATED = {
    "/api/v5/supplier/reportDetailByPeriod": (
        "use POST /api/finance/v1/sales-reports/detailed on finance-api.wildberries.ru, see "
        "https://dev.wildberries.ru/en/release-notes"
    ),
}


async def _deprecated(request: Request) -> Response:
    request.app.state.emulator.counters.unserved[request.url.path] += 1
    rid = uuid.uuid4().hex
    resp = problem(404, "This method is deprecated", DEPRECATED[request.url.path], rid)
    resp.headers["X-Request-Id"] = rid
    return resp


def build_app(state: EmulatorState) -> Starlette:
    """The emulator's ASGI app over ``state``."""
    paths: dict[tuple[str, str], list[Method]] = {}
    for ep in METHODS.values():
        paths.setdefault((ep.path, ep.verb), []).append(ep)
    routes = [_path_route(state, methods) for methods in paths.values()]
    routes += control.routes(state)
    methods = ["GET", "POST", "PUT", "PATCH", "DELETE"]
    routes += [Route(path, _deprecated, methods=methods) for path in DEPRECATED]
    routes.append(Route("/{path:path}", _not_found, methods=methods))
    app = Starlette(routes=routes)
    app.state.emulator = state
    return app
