"""The JSON Schema of a dataset's ``data`` (a row as WB sent it), derived from its declaration.

What a dataset declares (``Dataset.data_schema``, or only ``{"type": "object"}``) plus what its
natural key already says: each key field is present (unless the key has a ``missing`` value) and
of its kind's type, at its dotted path. A property the declaration gives keeps the declaration's
words: the key only adds what the declaration leaves out.
"""

from __future__ import annotations

import copy
from typing import Any

from wbsync.store.datasets import Dataset, KeyField, KeyKind

__all__ = ["KEY_KIND_SCHEMAS", "data_json_schema"]

#: The JSON Schema of a key field's value in WB's row, by the key's kind. A ``"date"`` key keeps
#: the first ten characters of a date or a date-time, so either form is allowed.
KEY_KIND_SCHEMAS: dict[KeyKind, dict[str, Any]] = {
    "int": {"type": "integer"},
    "str": {"type": "string"},
    "date": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}"},
}


def data_json_schema(ds: Dataset) -> dict[str, Any]:
    """The JSON Schema of ``ds``'s rows: its declared schema with its key fields added."""
    # A copy: the declaration is shared by every reader of the registry.
    schema = copy.deepcopy(dict(ds.data_schema or {}))
    schema.setdefault("type", "object")
    for key in ds.key:
        _add_key(schema, key)
    return schema


def _add_key(schema: dict[str, Any], key: KeyField) -> None:
    """Put ``key``'s type at its path in ``schema``, creating the objects along the way."""
    *parents, leaf = key.path.split(".")
    node = schema
    for part in parents:
        _require(node, part, key)
        child = node.setdefault("properties", {}).setdefault(part, {"type": "object"})
        node = child
    _require(node, leaf, key)
    node.setdefault("properties", {}).setdefault(leaf, dict(KEY_KIND_SCHEMAS[key.kind]))


def _require(node: dict[str, Any], name: str, key: KeyField) -> None:
    # A key with a ``missing`` value may be absent: WB omits it where it does not apply.
    if key.missing is None and name not in node.setdefault("required", []):
        node["required"].append(name)
