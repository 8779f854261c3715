"""Storage for what syncs declare, without migration code of their own.

* A declared dataset, a built-in sync's or a plugin's, gets its standard table (``wb_<name>``:
  cabinet, key columns, the row, when it last changed, the sequence number of its last write,
  its tombstone; the shape of every dataset table, ``schema.dataset_table``) from
  :func:`create_declared_tables`, which ``Database.migrate`` runs under its migration lock after
  wbsync's own migrations; each table is recorded in ``wb_declared_datasets`` with its key, so
  a sync that later changes a dataset's key is refused with what to do instead of writing into
  a table of another shape. Its change-feed counter (``wb_change_sequences``) is made by its
  first write. The datasets of :data:`MIGRATED_DATASETS` are the exception: their tables were
  made by wbsync's first migrations, which still make them (an existing database upgrades
  through them), so they are neither created nor recorded here; a test proves each equals the
  table its declaration builds (docs/storage.md, "Where the tables come from").
* A plugin that needs more (an index, a table of its own, a changed key) declares an
  :class:`AlembicBranch`: a directory of Alembic revisions (its first has
  ``down_revision = None``), which ``Database.migrate`` upgrades right after wbsync's own, in
  the same transaction and under the same lock, one command. Its revisions are recorded in a
  version table of its own (``alembic_version_<label>``): a process that does not load the
  plugin shares the database and still migrates and starts, never meeting a revision it cannot
  resolve.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Connection, select

from wbsync.catalog.registry import BUILTIN, Claim, Table
from wbsync.errors import StoreError
from wbsync.store.datasets import DATASETS
from wbsync.store.schema import dataset_table, declared_datasets, utcnow

__all__ = ["MIGRATED_DATASETS", "MIGRATION_BRANCHES", "AlembicBranch", "create_declared_tables"]

#: The built-in datasets whose tables wbsync's migrations create (0001) and convert (0005 on):
#: frozen history. A dataset added since gets its table from its declaration.
MIGRATED_DATASETS = frozenset(
    {
        "finance_report",
        "orders",
        "sales",
        "adverts",
        "advert_stats",
        "bids",
        "funnel_history",
        "stocks",
        "cards",
        "prices",
        "acceptance_coefficients",
    }
)

MIGRATION_BRANCHES: Table[AlembicBranch] = Table("migration branch")
"""Every registered Alembic branch, by its label."""


@dataclass(frozen=True, slots=True)
class AlembicBranch:
    """A plugin's own Alembic revisions: ``label`` (its revisions' ``branch_labels``) and the
    directory that holds them."""

    label: str
    directory: Path

    @property
    def version_table(self) -> str:
        """Where the branch's revision is recorded."""
        return f"alembic_version_{self.label}"

    def claims(self) -> Iterator[Claim]:
        """The branch's label."""
        yield Claim(MIGRATION_BRANCHES, self.label, self)


def create_declared_tables(conn: Connection) -> list[str]:
    """Create and record the standard table of each registered dataset not recorded yet (but
    :data:`MIGRATED_DATASETS`); the names of the tables created. ``StoreError`` when a recorded
    key differs from the declared one."""
    recorded = {row.dataset: row for row in conn.execute(select(declared_datasets))}
    created = []
    for name, ds in DATASETS.items():
        owner = DATASETS.owner(name)
        if owner is None or (owner == BUILTIN and name in MIGRATED_DATASETS):
            continue
        key = [[k.column, k.kind] for k in ds.key]
        known = recorded.get(name)
        if known is not None:
            if known.key != key:
                fix = "a migration" if owner == BUILTIN else "an Alembic branch"
                raise StoreError(
                    f"dataset {name!r} ({owner}): its table {known.table_name} was created with "
                    f"key {known.key}, its sync now declares {key}; ship {fix} that changes "
                    "the table (docs/extending.md), or keep the key"
                )
            continue
        table = dataset_table(ds)
        table.create(conn, checkfirst=True)
        conn.execute(
            declared_datasets.insert().values(
                dataset=name,
                table_name=table.name,
                owner=owner,
                key=key,
                created_at=utcnow(),
            )
        )
        created.append(table.name)
    return created
