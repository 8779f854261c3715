"""A CSV report's cells typed as its dataset declares: text in, JSON's types out.

A report WB sends as a CSV file (``Endpoint(reply="zip-csv")``) arrives as rows of text. Before
they are stored, each cell of a column the dataset's ``data_schema`` (with its key fields'
kinds, ``store/data_schema.py``) declares ``integer``, ``number`` or ``boolean`` becomes that
type, so a row of a CSV report reads like a row of a JSON one: ``"42"`` is ``42``, ``"12.5"``
is ``12.5`` (a ``number`` written as an integer stays one), ``"true"``/``"false"`` (any case)
are booleans, and an empty cell is ``null``. Every other column (``string``, a type list that
allows ``string``, a column the schema does not name) keeps WB's text. A cell that is not of
its declared type is a ``ValueError`` naming the row, the column and the cell.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from wbsync.store.data_schema import data_json_schema
from wbsync.store.datasets import Dataset

__all__ = ["column_types", "typed_rows"]

_TYPED = ("integer", "number", "boolean")
_INTEGER = re.compile(r"-?\d+")
_NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def column_types(ds: Dataset) -> dict[str, str]:
    """The top-level columns of ``ds``'s rows that are typed, with their JSON type."""
    out = {}
    for column, schema in data_json_schema(ds).get("properties", {}).items():
        declared = schema.get("type") if isinstance(schema, Mapping) else None
        types = [declared] if isinstance(declared, str) else list(declared or [])
        if "string" in types:
            continue
        kind = next((t for t in _TYPED if t in types), None)
        if kind is not None:
            out[column] = kind
    return out


def typed_rows(rows: Sequence[Mapping[str, Any]], ds: Dataset) -> list[dict[str, Any]]:
    """``rows`` with each text cell of a typed column of ``ds`` as its type (module docstring);
    ``ValueError`` for a cell that is not."""
    types = column_types(ds)
    out = []
    for number, row in enumerate(rows, start=1):
        typed = dict(row)
        for column, kind in types.items():
            cell = typed.get(column)
            if isinstance(cell, str):
                typed[column] = _cell(cell, kind, f"row {number}: {column}", ds)
        out.append(typed)
    return out


def _cell(text: str, kind: str, where: str, ds: Dataset) -> Any:
    cell = text.strip()
    if not cell:
        return None
    if kind == "boolean" and cell.lower() in ("true", "false"):
        return cell.lower() == "true"
    if _INTEGER.fullmatch(cell) and kind in ("integer", "number"):
        return int(cell)
    if kind == "number" and _NUMBER.fullmatch(cell):
        value = float(cell)
        if math.isfinite(value):
            return value
    raise ValueError(f"{where} is {text!r}, not the {kind} dataset {ds.name} declares")
