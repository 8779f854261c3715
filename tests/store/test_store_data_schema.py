"""The JSON Schema of a dataset's data: declared, with the natural key's fields added."""

from __future__ import annotations

import pytest

from wbsync.errors import StoreError
from wbsync.store.data_schema import data_json_schema
from wbsync.store.datasets import Dataset, KeyField


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
