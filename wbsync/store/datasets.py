"""What a synced WB dataset is, and the registry of them: what each one is keyed on.

Each dataset is declared once, by the sync that stores it (a built-in sync's module,
``wbsync/syncs/<name>.py``, or a plugin's), and registered with that sync. A dataset row is a
``Mapping`` exactly as WB returned it; its natural key is read from the row by :class:`KeyField`
paths (dotted for nested fields). Each dataset also says what a complete run of
its sync means (``kind``: a full ``"snapshot"`` of the cabinet's rows, or a ``"stream"`` that only
adds and updates) and how long its rows are kept (``retention_days``, ``tombstone_grace_days``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from wbsync.catalog.registry import Claim, Table
from wbsync.errors import StoreError

__all__ = [
    "DATASETS",
    "DATASET_KINDS",
    "IDENTIFIER_MAX",
    "KEY_KINDS",
    "KEY_STR_MAX",
    "NAME_MAX",
    "STANDARD_COLUMNS",
    "TOMBSTONE_GRACE_DAYS",
    "Dataset",
    "DatasetKind",
    "DatasetScope",
    "KeyField",
    "KeyKind",
    "KeyValue",
    "dataset",
]

KeyKind = Literal["int", "str", "date"]
KeyValue = int | str
KEY_KINDS: tuple[KeyKind, ...] = ("int", "str", "date")
#: The longest value a key field of kind ``"str"`` holds: its column is ``varchar(255)``, which
#: PostgreSQL refuses past (SQLite would keep it), so a longer value is refused on both.
KEY_STR_MAX = 255
DatasetKind = Literal["snapshot", "stream"]
#: Whose rows a dataset holds; a fleet-wide scope (rows the same for every seller) may follow.
DatasetScope = Literal["cabinet"]
DATASET_KINDS: tuple[DatasetKind, ...] = ("snapshot", "stream")

#: PostgreSQL's longest identifier (NAMEDATALEN - 1): it cuts a longer table, column, index or
#: constraint name there with only a NOTICE, while SQLAlchemy shortens the names its naming
#: convention derives with a hash of its own, so one name would differ between the table
#: ``migrate`` creates and the migrations that refer to it. Refused when declared instead.
IDENTIFIER_MAX = 63
_FK_SUFFIX = "_cabinet_id_cabinets"  # the longest name a dataset table gets: its foreign key
#: The longest dataset name whose table's names all fit (37).
NAME_MAX = IDENTIFIER_MAX - len(f"fk_wb_{_FK_SUFFIX}")

#: The columns every dataset table has besides the cabinet and the key (``store/schema.py``).
STANDARD_COLUMNS = ("data", "changed_at", "seq", "deleted_at", "inserted_seq")

#: Days a tombstone (a row a complete snapshot run no longer saw) is kept before it is pruned:
#: the longest a change-feed reader may lag behind and still see the deletion.
TOMBSTONE_GRACE_DAYS = 7

DATASETS: Table[Dataset] = Table("dataset")
"""Every registered dataset, by name."""


@dataclass(frozen=True, slots=True)
class KeyField:
    """One natural-key column: where it is in a WB row and how it is stored.

    ``path`` is a WB field name, dotted for nested objects (``"product.nmId"``). Kind ``"date"``
    keeps the ``YYYY-MM-DD`` part of a date or date-time string, so a day is one key whichever
    form WB sent. ``missing`` is stored when WB omits the field or sends it null; ``None`` makes
    the field required.
    """

    column: str
    path: str
    kind: KeyKind = "int"
    missing: KeyValue | None = None
    _parts: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Refused here, so a plugin declaring one is refused when it loads, not at migrate.
        if self.kind not in KEY_KINDS:
            raise StoreError(
                f"key field {self.column!r}: kind must be one of {', '.join(KEY_KINDS)}, "
                f"got {self.kind!r}"
            )
        object.__setattr__(self, "_parts", tuple(self.path.split(".")))

    def extract(self, row: Mapping[str, Any]) -> KeyValue:
        """This key's value in ``row``; StoreError when it is absent or malformed."""
        value: Any = row
        for part in self._parts:  # once per row of every page: JSON objects are dicts
            found = value.get(part) if type(value) is dict or isinstance(value, Mapping) else None
            if found is None:
                if self.missing is not None:
                    return self.missing
                raise StoreError(f"row has no key field {self.path!r}")
            value = found
        return self._convert(value)

    def _convert(self, value: Any) -> KeyValue:
        if self.kind == "int":
            if type(value) is int:
                return value
            if isinstance(value, bool) or not isinstance(value, int | str):
                raise StoreError(f"key field {self.path!r} is not an integer")
            try:
                return int(value)
            except ValueError:
                raise StoreError(f"key field {self.path!r} is not an integer") from None
        if self.kind == "date":
            text = str(value)[:10]
            try:
                date.fromisoformat(text)
            except ValueError:
                raise StoreError(f"key field {self.path!r} is not a date") from None
            return text
        if not isinstance(value, str | int) or isinstance(value, bool):
            raise StoreError(f"key field {self.path!r} is not a string")
        text = str(value)
        if len(text) > KEY_STR_MAX:
            raise StoreError(
                f"key field {self.path!r} is {len(text)} characters, past the {KEY_STR_MAX} "
                "a str key holds"
            )
        return text


@dataclass(frozen=True, slots=True)
class Dataset:
    """A synced WB dataset: its name, its table, its natural key (per cabinet), and its lifecycle.

    ``source`` says where the rows come from (the WB method, and how rows are cut when they are
    not WB's own items); it is the table's comment. A dataset is stored in the standard table
    ``wb_<name>``: the cabinet, the key columns, the row as WB sent it, when it last changed, the
    sequence number of its last write and its tombstone (docs/data.md).

    ``kind`` ``"snapshot"``: a complete run of its sync returns every row the cabinet has, so rows
    it did not return are tombstoned; ``"stream"``: runs only add and update (nothing is ever
    inferred deleted). ``retention_days``: rows whose own date (the key field of kind ``"date"``)
    is older are pruned; None keeps them. Tombstones are pruned ``tombstone_grace_days`` after
    the deletion.

    ``columns``: nullable text columns of the table beside WB's row, which wbsync sets about a
    row (``Store.set_column``, ``store/columns.py``; the bids' ``last_write_error``). Storing
    WB's rows never writes them, so a row WB sends again keeps what was set. A plugin that adds
    one to a dataset whose table exists ships an Alembic branch that adds it (docs/extending.md).

    ``data_schema``: a JSON Schema (an object schema, as a JSON-ready dict) of the rows WB sends,
    what readers of the feed's ``data`` may rely on; the key fields' types are added to it
    (``store/data_schema.py``) and ``GET /api/v1/datasets`` serves the result. None says only
    that a row is an object with its key fields. It documents; rows are never checked against it.
    """

    name: str
    source: str
    key: tuple[KeyField, ...]
    kind: DatasetKind = "stream"
    retention_days: int | None = None
    tombstone_grace_days: int = TOMBSTONE_GRACE_DAYS
    columns: tuple[str, ...] = ()
    # Left out of the hash: a dict is unhashable, and the name already tells datasets apart.
    data_schema: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if self.kind not in DATASET_KINDS:
            raise StoreError(
                f"dataset {self.name}: kind must be one of {', '.join(DATASET_KINDS)}, "
                f"got {self.kind!r}"
            )
        if self.retention_days is not None:
            if self.retention_days < 1:
                raise StoreError(f"dataset {self.name}: retention_days must be >= 1 or None")
            if self.date_column is None:
                raise StoreError(
                    f"dataset {self.name}: retention_days needs a key field of kind 'date'"
                )
        if self.tombstone_grace_days < 0:
            raise StoreError(f"dataset {self.name}: tombstone_grace_days must be >= 0")
        if len(self.name) > NAME_MAX:
            raise StoreError(
                f"dataset {self.name}: its name is {len(self.name)} characters, past "
                f"{NAME_MAX}: its table's foreign key {self.schema_names[2]!r} would pass "
                f"PostgreSQL's {IDENTIFIER_MAX}-character names; choose a shorter name"
            )
        for key in self.key:
            if len(key.column) > IDENTIFIER_MAX:
                raise StoreError(
                    f"dataset {self.name}: key column {key.column!r} is {len(key.column)} "
                    f"characters, past PostgreSQL's {IDENTIFIER_MAX}; choose a shorter column"
                )
        self._check_columns()
        self._check_data_schema()

    def _check_data_schema(self) -> None:
        schema = self.data_schema
        if schema is None:
            return
        if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
            raise StoreError(f"dataset {self.name}: data_schema must be a JSON object schema")
        try:
            json.dumps(schema, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"dataset {self.name}: data_schema is not JSON: {exc}") from None

    @property
    def scope(self) -> DatasetScope:
        """Whose rows it holds: ``"cabinet"``, each cabinet its own (every dataset today)."""
        return "cabinet"

    def _check_columns(self) -> None:
        taken = {"cabinet_id", *STANDARD_COLUMNS, *(k.column for k in self.key)}
        for column in self.columns:
            if column in taken or len(column) > IDENTIFIER_MAX:
                raise StoreError(
                    f"dataset {self.name}: column {column!r} is taken (a key or standard "
                    f"column, or named twice) or past {IDENTIFIER_MAX} characters"
                )
            taken.add(column)

    @property
    def date_column(self) -> str | None:
        """The key column holding the row's own date (what retention counts from), if any."""
        return next((k.column for k in self.key if k.kind == "date"), None)

    def claims(self) -> Iterator[Claim]:
        """The dataset's name."""
        yield Claim(DATASETS, self.name, self)

    @property
    def table_name(self) -> str:
        """The table that holds this dataset's rows."""
        return f"wb_{self.name}"

    @property
    def schema_names(self) -> tuple[str, ...]:
        """Every name the dataset's table brings, but its columns: the table, its primary key,
        its foreign key to the cabinets, its two indexes on ``seq`` (the naming convention of
        ``store/schema.py``; wbsync's migrations write the same names)."""
        table = self.table_name
        return (
            table,
            f"pk_{table}",
            f"fk_{table}{_FK_SUFFIX}",
            f"ix_{table}_seq",
            f"ix_{table}_cabinet_id_seq",
        )

    def row_key(self, row: Mapping[str, Any]) -> tuple[KeyValue, ...]:
        """The natural key of ``row``, in ``key`` order."""
        return tuple(key.extract(row) for key in self.key)


def dataset(name_or_dataset: str | Dataset) -> Dataset:
    """The registered dataset of that name (a Dataset passes through)."""
    if isinstance(name_or_dataset, Dataset):
        return name_or_dataset
    try:
        return DATASETS[name_or_dataset]
    except KeyError:
        known = ", ".join(sorted(DATASETS))
        raise StoreError(f"unknown dataset {name_or_dataset!r}; known: {known}") from None
