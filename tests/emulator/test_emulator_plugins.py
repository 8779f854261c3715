"""A plugin's emulated methods in the emulator: its per-seller state (cleared by a reset), its
expectation (or a 404 saying why there is none), and a route clash with a built-in refused at
registration."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from starlette.responses import Response

from tests.support.wb import ANCHOR, SELLER_A
from wbsync.emulator import EmulatorConfig, running_emulator
from wbsync.emulator.extend import (
    METHODS,
    ROUTES,
    Call,
    EmulatedMethod,
    Kind,
    Method,
    Rate,
    Registrar,
    Row,
    SellerData,
    SellerState,
    json_reply,
)
from wbsync.errors import ConfigError

_RATES = {kind: Rate(1.0, 100, 100) for kind in Kind}
NOTES = Method(
    name="test.notes",
    verb="GET",
    path="/api/v1/test-notes",
    host="test-notes-api",
    category="analytics",
    rates=_RATES,
)
ADD = dataclasses.replace(NOTES, name="test.notes_add", verb="POST", writes=True)


def _notes(call: Call) -> list[object]:
    notes: list[object] = call.seller.plugins.setdefault(NOTES.name, [])
    return notes


async def list_notes(call: Call) -> Response:
    return json_reply({"notes": _notes(call)})


async def add_note(call: Call) -> Response:
    _notes(call).append((await call.body())["note"])
    return json_reply({})


def expected_notes(data: SellerData, seller: SellerState, params: dict[str, Any]) -> list[Row]:
    return [{"note": note, "seller": data.seller_id} for note in seller.plugins.get(NOTES.name, [])]


@pytest.fixture
def registered() -> Iterator[Registrar]:
    registrar = Registrar("test-notes")
    registrar.declare(
        EmulatedMethod(NOTES, list_notes, expected=expected_notes), EmulatedMethod(ADD, add_note)
    )
    registrar.commit()
    yield registrar
    for claim in registrar._claims:  # the registry is process-wide
        if claim.table.owner(claim.key) == registrar.owner:
            claim.table._drop(claim.key)


@pytest.fixture
async def http(registered: Registrar) -> AsyncIterator[httpx.AsyncClient]:
    async with running_emulator(EmulatorConfig(anchor_date=ANCHOR)) as emu:
        token = emu.token(SELLER_A)
        headers = {"Authorization": token}
        async with httpx.AsyncClient(base_url=emu.base_url, headers=headers) as client:
            yield client


async def test_a_plugins_per_seller_state_is_cleared_by_a_reset(http: httpx.AsyncClient) -> None:
    assert (await http.post(ADD.path, json={"note": "first"})).status_code == 200
    assert (await http.get(NOTES.path)).json() == {"notes": ["first"]}
    assert (await http.post("/__emulator/reset", json={})).status_code == 200
    assert (await http.get(NOTES.path)).json() == {"notes": []}


async def test_a_plugin_methods_expectation_is_its_own_or_a_404_saying_why(
    http: httpx.AsyncClient,
) -> None:
    await http.post(ADD.path, json={"note": "kept"})
    reply = await http.get(f"/__emulator/expected/{NOTES.name}", params={"seller": SELLER_A})
    assert reply.status_code == 200
    assert reply.json() == [{"note": "kept", "seller": SELLER_A}]

    reply = await http.get(f"/__emulator/expected/{ADD.name}", params={"seller": SELLER_A})
    assert reply.status_code == 404
    assert reply.json()["detail"] == (
        "no expected rows for 'test.notes_add': plugin 'test-notes' declares it with no "
        "expectation (EmulatedMethod's expected): compute its rows from SellerData "
        "(docs/extending.md)"
    )


def test_a_method_on_a_built_in_route_is_refused_naming_both() -> None:
    cards = METHODS["content.cards_list"]
    twin = dataclasses.replace(cards, name="test.cards")
    registrar = Registrar("test-twin")
    registrar.declare(EmulatedMethod(twin, list_notes))
    with pytest.raises(ConfigError) as caught:
        registrar.commit()
    route = f"{cards.verb} {cards.host} {cards.path}"
    assert str(caught.value) == (
        f"plugin 'test-twin': emulated route {route!r} is already declared by 'wbsync' "
        "as 'content.cards_list', so 'test.cards' cannot take it"
    )
    assert "test.cards" not in METHODS and ROUTES[route] == "content.cards_list"


def test_a_method_whose_token_category_does_not_exist_is_refused_where_it_is_written() -> None:
    # No token could carry it: every request would fail, so it never gets as far as a route.
    with pytest.raises(ValueError, match="unknown token category") as caught:
        Method("test.typo", "GET", "/test/typo", "supplies-api", "suplies", _RATES)
    assert str(caught.value).startswith("emulated method 'test.typo': unknown token category")
    assert "supplies" in str(caught.value).split("known:")[1]  # what it may have meant
    assert Method("test.any", "GET", "/test/any", "supplies-api", None, _RATES).category is None
