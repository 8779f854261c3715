"""Control routes under ``/__emulator/``: counters, journal, reset, faults, data, tokens, limits.

No token is needed: the emulator listens on loopback and is a test and demo tool.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from wbsync.emulator.config import FaultRule, LimitOverride
from wbsync.emulator.emulated import NoExpectation, expected
from wbsync.emulator.replies import json_reply
from wbsync.emulator.state import EmulatorState
from wbsync.emulator.tokens import Kind, category_bit, mint, token_id
from wbsync.emulator.wbdocs import METHODS

__all__ = ["PREFIX", "routes"]

PREFIX = "/__emulator"


class _Faults(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[FaultRule]
    seed: int | None = None


class _Reset(BaseModel):
    model_config = ConfigDict(extra="forbid")
    counters: bool = True
    buckets: bool = True
    faults: bool = True
    state: bool = True
    limits: bool = True


class _Limits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    limits: dict[str, LimitOverride]


class _Disabled(BaseModel):
    model_config = ConfigDict(extra="forbid")
    methods: list[str]


class _Revoke(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token: str = Field(repr=False)


class _Balance(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seller: str
    method: str = "*"
    empty: bool = True


class _TokenRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seller: str
    type: Kind = Kind.PERSONAL
    categories: list[str] = Field(default_factory=list)
    lifetime_s: float = 180 * 86400.0


async def _json(request: Request) -> Any:
    raw = await request.body()
    return json.loads(raw) if raw.strip() else {}


def _invalid(exc: Exception) -> Response:
    return json_reply({"title": "invalid control request", "detail": str(exc)}, status=400)


def _dump(override: LimitOverride) -> Any:
    if isinstance(override, BaseModel):
        return override.model_dump()
    return {t.value: spec.model_dump() for t, spec in override.items()}


def routes(state: EmulatorState) -> list[Route]:
    """The control routes over ``state``."""

    async def counters(request: Request) -> Response:
        return json_reply(state.counters.snapshot())

    async def requests(request: Request) -> Response:
        seller, method = request.query_params.get("seller"), request.query_params.get("method")
        rows = [
            e
            for e in state.counters.journal
            if seller in (None, e["seller"]) and method in (None, e["method"])
        ]
        return json_reply({"requests": rows})

    async def reset(request: Request) -> Response:
        try:
            what = _Reset.model_validate(await _json(request))
        except (ValueError, ValidationError) as exc:
            return _invalid(exc)
        state.reset(**what.model_dump())
        return json_reply({"reset": what.model_dump()})

    async def faults(request: Request) -> Response:
        if request.method == "DELETE":
            state.faults.clear()
        elif request.method in ("POST", "PUT"):
            try:
                body = _Faults.model_validate(await _json(request))
            except (ValueError, ValidationError) as exc:
                return _invalid(exc)
            state.faults.replace(body.rules, body.seed)
        return json_reply({"rules": state.faults.rules()})

    async def expectation(request: Request) -> Response:
        method = request.path_params["method"]
        params = dict(request.query_params)
        seller = params.pop("seller", None)
        if not seller or method not in METHODS:
            return _invalid(ValueError("need ?seller=<sid> and a known method name"))
        try:
            rows = expected(state, seller, method, **params)
        except NoExpectation as exc:
            return json_reply({"title": "no expectation", "detail": str(exc)}, status=404)
        except ValueError as exc:
            return _invalid(exc)
        return json_reply(rows)

    async def tokens(request: Request) -> Response:
        try:
            body = _TokenRequest.model_validate(await _json(request))
            bits = [category_bit(c) for c in body.categories]
        except (ValueError, ValidationError) as exc:
            return _invalid(exc)
        token = mint(
            key=state.config.signing_key,
            seller=body.seller,
            kind=body.type,
            categories=bits,
            lifetime=timedelta(seconds=body.lifetime_s),
        )
        return json_reply({"token": token})

    async def revoke(request: Request) -> Response:
        try:
            tid = token_id(_Revoke.model_validate(await _json(request)).token)
            if not tid:
                raise ValueError("not a token of this emulator (no id claim)")
        except (ValueError, ValidationError) as exc:
            return _invalid(exc)
        state.revoked.add(tid)
        return json_reply({"revoked": len(state.revoked)})

    async def balance(request: Request) -> Response:
        try:
            body = _Balance.model_validate(await _json(request))
        except (ValueError, ValidationError) as exc:
            return _invalid(exc)
        if body.empty:
            state.unpaid.add((body.seller, body.method))
        else:
            state.unpaid.discard((body.seller, body.method))
        return json_reply({"empty": sorted(f"{s}:{m}" for s, m in state.unpaid)})

    async def disabled(request: Request) -> Response:
        if request.method == "DELETE":
            method = request.query_params.get("method")
            if method is None:
                state.disabled.clear()
            else:
                state.disabled.discard(method)
        elif request.method in ("POST", "PUT"):
            try:
                state.disable(_Disabled.model_validate(await _json(request)).methods)
            except (ValueError, ValidationError) as exc:
                return _invalid(exc)
        return json_reply({"disabled": sorted(state.disabled)})

    async def limits(request: Request) -> Response:
        if request.method == "DELETE":
            group = request.query_params.get("group")
            if group is None:
                state.limits.clear()
            else:
                state.limits.pop(group, None)
        elif request.method in ("POST", "PUT"):
            try:
                state.change_limits(_Limits.model_validate(await _json(request)).limits)
            except (ValueError, ValidationError) as exc:
                return _invalid(exc)
        out: dict[str, Any] = {}
        for name, ep in METHODS.items():
            per_type = {}
            for t in Kind:
                lim = state.limit_for(name, t)
                per_type[t.value] = (
                    None
                    if lim is None
                    else {"period_s": lim.period_s, "limit": lim.limit, "burst": lim.burst}
                )
            out[name] = {"group": ep.group, "path": ep.path, "limits": per_type}
        changed = {g: _dump(o) for g, o in state.limits.items()}
        return json_reply(
            {"time_scale": state.config.time_scale, "changed": changed, "methods": out}
        )

    return [
        Route(f"{PREFIX}/counters", counters, methods=["GET"]),
        Route(f"{PREFIX}/requests", requests, methods=["GET"]),
        Route(f"{PREFIX}/reset", reset, methods=["POST"]),
        Route(f"{PREFIX}/faults", faults, methods=["GET", "POST", "PUT", "DELETE"]),
        Route(f"{PREFIX}/expected/{{method}}", expectation, methods=["GET"]),
        Route(f"{PREFIX}/tokens", tokens, methods=["POST"]),
        Route(f"{PREFIX}/tokens/revoke", revoke, methods=["POST"]),
        Route(f"{PREFIX}/balance", balance, methods=["POST"]),
        Route(f"{PREFIX}/limits", limits, methods=["GET", "POST", "PUT", "DELETE"]),
        Route(f"{PREFIX}/disabled", disabled, methods=["GET", "POST", "PUT", "DELETE"]),
    ]
