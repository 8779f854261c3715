"""The JSON Schema of a dataset's data: declared, with the natural key's fields added."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import SELLERS
from wbsync.emulator import EmulatorConfig
from wbsync.emulator.state import seller_data
from wbsync.errors import StoreError
from wbsync.store.data_schema import data_json_schema
from wbsync.store.datasets import DATASETS, Dataset, KeyField


def _dataset(**declared: object) -> Dataset:
    key = (
        KeyField("nm_id", "product.nmId"),
        KeyField("day", "date", "date"),
        KeyField("box", "boxTypeID", missing=0),
    )
    return Dataset("shaped", "GET /shaped", key, **declared)  # type: ignore[arg-type]


def test_the_keys_are_added_at_their_paths_and_the_declared_words_kept() -> None:
    declared = {
        "type": "object",
        "required": ["price"],
        "properties": {
            "price": {"type": "number"},
            "date": {"type": "string", "format": "date"},  # the declaration's words win
        },
    }
    ds = _dataset(data_schema=declared)
    assert data_json_schema(ds) == {
        "type": "object",
        "required": ["price", "product", "date"],  # boxTypeID may be absent: it has a default
        "properties": {
            "price": {"type": "number"},
            "date": {"type": "string", "format": "date"},
            "product": {
                "type": "object",
                "required": ["nmId"],
                "properties": {"nmId": {"type": "integer"}},
            },
            "boxTypeID": {"type": "integer"},
        },
    }
    assert declared["required"] == ["price"]  # the declaration itself is left as it was
    assert data_json_schema(_dataset())["properties"]["date"]["pattern"] == r"^\d{4}-\d{2}-\d{2}"


def test_a_schema_that_is_no_json_object_schema_is_refused() -> None:
    with pytest.raises(StoreError, match="data_schema must be a JSON object schema"):
        _dataset(data_schema={"type": "array"})
    with pytest.raises(StoreError, match="data_schema is not JSON"):
        _dataset(data_schema={"default": {1, 2}})


def test_a_declared_schema_keeps_a_dataset_hashable_and_tells_declarations_apart() -> None:
    one = _dataset(data_schema={"type": "object"})
    assert hash(one) == hash(_dataset(data_schema={"type": "object"}))
    assert one == _dataset(data_schema={"type": "object"})
    assert one != _dataset(data_schema={"type": "object", "title": "other"})


def _json_type(value: Any) -> str:
    if isinstance(value, bool):  # before int: a bool is an int to Python, not to JSON
        return "boolean"
    names = {int: "integer", float: "number", str: "string", dict: "object", list: "array"}
    return names.get(type(value), "null")


def _conforms(row: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """What in ``row`` breaks ``schema``'s required fields and properties' types (one level)."""
    wrong = [f"{name} missing" for name in schema.get("required", []) if name not in row]
    for name, prop in schema["properties"].items():
        if name in row and _json_type(row[name]) != prop["type"]:
            wrong.append(f"{name}={row[name]!r} is no {prop['type']}")
    return wrong


def test_the_built_in_stocks_schema_fits_the_rows_the_emulator_serves() -> None:
    """The emulator is written from WB's documents: the declared schema and it must agree."""
    schema = data_json_schema(DATASETS["stocks"])
    rows = seller_data(EmulatorConfig(seed=3), SELLERS[0]).stocks()
    assert rows and all(_conforms(row, schema) == [] for row in rows)
    assert set(schema["properties"]) <= set(rows[0])
