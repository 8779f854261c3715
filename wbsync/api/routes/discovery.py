"""The datasets this deployment syncs, as a reader of their feeds needs them: discovery.

Every registered dataset, built-in or a plugin's, read from the registry at each request (a
plugin's appear as soon as it is loaded): its table, scope, natural key, kind, retention, the
JSON Schema of its rows' ``data`` (``store/data_schema.py``) and its feed's water marks, so a
consumer catching up pages each feed from its cursor to ``high_water_mark`` (docs/data.md,
"Gaps and catching up"). The response models live here, beside the only routes that use them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, Field

from wbsync.api.deps import RuntimeDep
from wbsync.api.problems import Problem, problems
from wbsync.store import DATASETS, Dataset
from wbsync.store.data_schema import data_json_schema
from wbsync.store.datasets import DatasetKind, DatasetScope, KeyKind
from wbsync.store.marks import WaterMarks

__all__ = ["DatasetOut", "DatasetsOut", "KeyFieldOut", "router"]

router = APIRouter(tags=["datasets"], responses=problems(401, 503))


class KeyFieldOut(BaseModel):
    """One natural-key field: its column (the feed's ``key`` names it), where it is in WB's
    row, its kind, and what is stored when WB omits it (null: WB always sends it)."""

    column: str
    path: str = Field(description="The field in `data`, dotted for nested objects.")
    kind: KeyKind
    missing: int | str | None = None


class DatasetOut(BaseModel):
    """A synced dataset and its change feed's ends."""

    name: str
    table: str = Field(description="The table that holds its rows in the SQL mirror.")
    owner: str = Field(description="Who declared it: `wbsync`, or the plugin's name.")
    source: str = Field(description="Where its rows come from (the WB method).")
    scope: DatasetScope = Field(
        description="Whose rows: `cabinet`, each cabinet its own; `fleet`, the same for every "
        "seller (WB's tariffs), stored once with no cabinet (`cabinet_id` null in its feed), "
        "synced once per interval for the whole fleet, read by the fleet-wide feed only."
    )
    kind: DatasetKind = Field(
        description="`snapshot`: a complete run tombstones the rows it no longer sees; "
        "`stream`: runs only add and update."
    )
    key: list[KeyFieldOut] = Field(
        description="The natural key, in order (per cabinet unless `fleet`)."
    )
    retention_days: int | None = Field(description="Rows older than this are pruned (by date).")
    tombstone_grace_days: int = Field(description="Days a tombstone stays in the feed.")
    high_water_mark: int = Field(description="The last sequence number given out (0: none).")
    low_water_mark: int | None = Field(
        description="The lowest sequence number still in the feed (null: the feed is empty). "
        "Informative: cursors are checked against `low_water`."
    )
    low_water: int = Field(
        description="The feed's low-water mark, as each feed page carries it: the lowest "
        "`after` from which the feed is complete, deletes included (pruned tombstones raise "
        "it); an `after` above 0 below it is 410."
    )
    feed: str = Field(description="The fleet-wide change feed's path.")
    data_schema: dict[str, Any] = Field(description="The JSON Schema of a change's `data`.")


class DatasetsOut(BaseModel):
    """Every dataset this deployment syncs, by name."""

    datasets: list[DatasetOut]


DatasetName = Annotated[str, Path(max_length=100, description="A dataset's name, e.g. stocks.")]


def dataset_out(ds: Dataset, marks: WaterMarks) -> DatasetOut:
    """A dataset's declaration and its feed's marks as the API shows them."""
    return DatasetOut(
        name=ds.name,
        table=ds.table_name,
        owner=DATASETS.owner(ds.name) or "",
        source=ds.source,
        scope=ds.scope,
        kind=ds.kind,
        key=[
            KeyFieldOut(column=k.column, path=k.path, kind=k.kind, missing=k.missing)
            for k in ds.key
        ],
        retention_days=ds.retention_days,
        tombstone_grace_days=ds.tombstone_grace_days,
        high_water_mark=marks.high,
        low_water_mark=marks.low,
        low_water=marks.complete_from,
        feed=f"/api/v1/datasets/{ds.name}/changes",
        data_schema=data_json_schema(ds),
    )


@router.get("/api/v1/datasets", response_model=DatasetsOut)
async def list_datasets(runtime: RuntimeDep) -> DatasetsOut:
    """Every synced dataset: its key, kind, scope, retention, data's schema and feed's ends."""
    declared = [DATASETS[name] for name in sorted(DATASETS)]
    marks = await runtime.store.water_marks(declared)
    return DatasetsOut(datasets=[dataset_out(ds, marks[ds.name]) for ds in declared])


@router.get("/api/v1/datasets/{name}", response_model=DatasetOut, responses=problems(404, 422))
async def get_dataset(runtime: RuntimeDep, name: DatasetName) -> DatasetOut:
    """One synced dataset, as in the list."""
    ds = DATASETS.get(name)
    if ds is None:
        known = ", ".join(sorted(DATASETS))
        raise Problem(404, "not-found", "Not found", f"no dataset {name!r}; known: {known}")
    marks = await runtime.store.water_marks([ds])
    return dataset_out(ds, marks[ds.name])
