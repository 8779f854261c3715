"""An emulated WB method: its documented :class:`Method`, the handler that answers it, and what
a full pull of it returns; one table of them, the built-ins' and the plugins' alike.

A handler gets a :class:`Call` (the request, the seller's data and edits) after the gateway
(auth, limits, faults) has passed it, and returns a reply or raises ``BadRequest``. The
gateway finds it, and ``/__emulator/expected/<method>`` the method's expectation, with one
lookup in :data:`EMULATED`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from wbsync.catalog.registry import Claim, Table
from wbsync.emulator.config import MOSCOW, EmulatorConfig
from wbsync.emulator.dataset import Row, SellerData
from wbsync.emulator.method import METHODS, Method, Rate
from wbsync.emulator.replies import BadRequest, json_reply
from wbsync.emulator.state import EmulatorState, SellerState, initial_state, seller_data
from wbsync.emulator.tokens import Kind
from wbsync.system import clock

__all__ = [
    "EMULATED",
    "EXPECTED",
    "HANDLERS",
    "Call",
    "EmulatedMethod",
    "Expectation",
    "Handler",
    "NoExpectation",
    "expected",
    "expected_rows",
    "ping",
]


@dataclass(frozen=True, slots=True)
class Call:
    """One authorised request to a method."""

    request: Request
    method: str
    seller_id: str
    state: EmulatorState

    @property
    def data(self) -> SellerData:
        """The seller's generated data."""
        return self.state.data(self.seller_id)

    @property
    def seller(self) -> SellerState:
        """The seller's edits."""
        return self.state.seller(self.seller_id)

    @property
    def config(self) -> EmulatorConfig:
        """The emulator's configuration."""
        return self.state.config

    async def body(self) -> dict[str, Any]:
        """The JSON object body, or ``BadRequest``."""
        try:
            body = json.loads(await self.request.body() or b"null")
        except ValueError:
            raise BadRequest("request body is not valid JSON") from None
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        return body

    def query(self, name: str) -> str | None:
        """A query parameter."""
        return self.request.query_params.get(name)


Handler = Callable[[Call], Awaitable[Response]]

Expectation = Callable[[SellerData, SellerState, dict[str, Any]], list[Row]]
"""A method's expected rows: what a full pull returns from the seller's data and edits, given
``/__emulator/expected``'s query parameters (``seller`` left out)."""

EMULATED: Table[EmulatedMethod] = Table("emulated method declaration")
"""Every emulated method (the built-ins and the plugins'), by method name."""


@dataclass(frozen=True, slots=True)
class EmulatedMethod:
    """A WB method the emulator serves: its documented table row and the handler that answers
    it (after the gateway has checked the token, the limits and the faults)."""

    method: Method
    handler: Handler
    #: What a full pull returns (``/__emulator/expected``); None: the emulator answers 404.
    expected: Expectation | None = None

    @property
    def name(self) -> str:
        """The method's name."""
        return self.method.name

    def claims(self) -> Iterator[Claim]:
        """The method's name and route, and the method itself in :data:`EMULATED`."""
        yield from self.method.claims()
        yield Claim(EMULATED, self.method.name, self)


T = TypeVar("T")


class _Column(Mapping[str, T], Generic[T]):
    """One field of every :data:`EMULATED` entry, by method name (a live, read-only view)."""

    def __init__(self, read: Callable[[EmulatedMethod], T | None]) -> None:
        self._read = read

    def __getitem__(self, name: str) -> T:
        value = self._read(EMULATED[name])
        if value is None:
            raise KeyError(name)
        return value

    def __iter__(self) -> Iterator[str]:
        return (n for n, m in EMULATED.items() if self._read(m) is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


HANDLERS: Mapping[str, Handler] = _Column(lambda m: m.handler)
"""The handler of each emulated method, by method name (a view of :data:`EMULATED`)."""

EXPECTED: Mapping[str, Expectation] = _Column(lambda m: m.expected)
"""The expectation of each method that declares one, by method name (a view of
:data:`EMULATED`)."""


class NoExpectation(LookupError):
    """The emulator computes no expected rows for this method (declared without one, or
    unknown)."""

    def __init__(self, method: str) -> None:
        owner = METHODS.owner(method)
        why = (
            "no emulated method by that name"
            if owner is None
            else f"plugin {owner!r} declares it with no expectation (EmulatedMethod's "
            "expected): compute its rows from SellerData"
        )
        super().__init__(f"no expected rows for {method!r}: {why} (docs/extending.md)")


def _expect(
    data: SellerData, seller: SellerState, method: str, params: dict[str, Any]
) -> list[Row]:
    declared = EMULATED.get(method)
    if declared is None or declared.expected is None:
        raise NoExpectation(method)
    return declared.expected(data, seller, params)


def expected(state: EmulatorState, seller: str, method: str, **params: Any) -> list[Row]:
    """The rows a full pull of ``method`` returns now from the running emulator (edits
    included); ``NoExpectation`` when the method declares none."""
    return _expect(state.data(seller), state.seller(seller), method, params)


def expected_rows(config: EmulatorConfig, seller: str, method: str, **params: Any) -> list[Row]:
    """The rows a full pull of ``method`` returns from a fresh emulator with ``config``.

    ``params``: each method's (``date_from``/``date_to`` for the finance and statistics
    reports, ``begin``/``end`` for the campaigns' statistics and the sales funnel; default: all
    history days); docs/emulator.md lists them.
    """
    data = seller_data(config, seller)
    return _expect(data, initial_state(data), method, params)


async def _ping(call: Call) -> Response:
    """WB's connection check: the gateway has already judged the token for this host."""
    now = clock.calendar_now().astimezone(MOSCOW).isoformat(timespec="seconds")
    return json_reply({"TS": now, "Status": "OK"})


#: /ping: "a maximum of 3 requests every 30 seconds", applied "individually to each instance of
#: the method on each host"; no token types named, so every type.
_PING_RATE_PERIOD_S, _PING_RATE = 30.0, 3


def ping(host: str, section: str, category: str | None) -> EmulatedMethod:
    """WB's ``GET /ping`` on a section's host (``<section>.ping``), which a token needs
    ``category`` to call (None: any token, as on common-api)."""
    rate = Rate(_PING_RATE_PERIOD_S, _PING_RATE, _PING_RATE)
    method = Method(
        f"{section}.ping",
        "GET",
        "/ping",
        host,
        category,
        {kind: rate for kind in Kind},
        x_category="all",
    )
    return EmulatedMethod(method, _ping)
