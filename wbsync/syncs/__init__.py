"""The built-in syncs: one module each, pulling a cabinet's data page by page through the
client, registered in ``SYNCS`` through the same registrar a plugin gets (``wbsync.extend``).

Each module declares its sync as a plugin would (``SYNC``): the WB methods it alone calls (with
their limits), the datasets it stores and the sync itself; methods several callers share are in
``wb/methods.py``, WB's sections in ``wb/sections.py``. Importing this package registers every
module's ``SYNC``, so a new built-in sync is one new module (``wbsync plugins`` lists them;
docs/design.md, "The queues", describes each).

Long syncs (multi-page) are wrapped by the reschedule service in the job layer; short ones
(pricing-bulk, booking-slot-monitor) are not.
"""

import importlib
import pkgutil
from types import ModuleType

from wbsync.catalog.registry import BUILTIN, Registrar
from wbsync.errors import TokenError
from wbsync.syncs.base import SYNCS, BidRule, Sync, SyncInput, SyncOptions, SyncPage
from wbsync.syncs.runner import SyncTotals, run_sync
from wbsync.wb.endpoints import check_token
from wbsync.wb.tokens import WbToken

#: The status page's queue order, by module; a built-in sync's module not named here follows
#: them, in the order of its name.
_ORDER = (
    "finance",
    "sections",
    "ads",
    "digitization",
    "inventory",
    "autobidder",
    "catalog",
    "pricing",
    "booking",
)


def _sync_modules() -> list[ModuleType]:
    """Every module of this package that declares a ``SYNC``, in the status page's order."""
    names = sorted(
        (info.name for info in pkgutil.iter_modules(__path__)),
        key=lambda name: (_ORDER.index(name) if name in _ORDER else len(_ORDER), name),
    )
    modules = [importlib.import_module(f"{__name__}.{name}") for name in names]
    return [module for module in modules if isinstance(getattr(module, "SYNC", None), Sync)]


_builtin = Registrar(BUILTIN)
_builtin.declare(*(module.SYNC for module in _sync_modules()))
_builtin.commit()


def unserved_queues(token: WbToken) -> dict[str, str]:
    """The queues ``token`` cannot serve, each with why (the first of its methods it may not
    call: a category it lacks, a token type WB refuses, read-only for a write)."""
    out: dict[str, str] = {}
    for name, sync in SYNCS.items():
        for ep in sync.calls:
            try:
                check_token(token, ep)
            except TokenError as exc:
                out[name] = str(exc)
                break
    return out


__all__ = [
    "SYNCS",
    "BidRule",
    "Sync",
    "SyncInput",
    "SyncOptions",
    "SyncPage",
    "SyncTotals",
    "run_sync",
    "unserved_queues",
]
