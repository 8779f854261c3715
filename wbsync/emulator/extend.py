"""What a plugin needs to add an emulated WB method, so its sync is testable offline.

An entry point in the ``wbsync.emulator`` group names a callable that takes a
:class:`Registrar` and declares :class:`EmulatedMethod` values on it (docs/extending.md)::

    [project.entry-points."wbsync.emulator"]
    deductions = "wbsync_deductions.emulated:register"

A method is written from WB's documents, not from the plugin's client: its :class:`Method`
(verb, path, host, token category, :class:`Rate` per token :class:`Kind`, limit group) is
served by the emulator's gateway like the built-in ones (token checks, WB's limits and 429s,
faults, the sandbox host), then its handler answers a :class:`Call` from the seller's generated
:class:`SellerData` (``cached`` builds a seller's rows once; ``seller_data`` builds a seller's
data as the emulator does, for a plugin's tests) and keeps what it changes in the seller's
:class:`SellerState` (``plugins``), which a reset forgets. docs/extending.md documents each.
wbsync's own methods are declared the same way, one WB section per module under
``wbsync.emulator.methods``. Like the rest of the emulator, this module imports nothing of the
client or the syncs.
"""

from __future__ import annotations

from wbsync.catalog.registry import Registrar
from wbsync.emulator.dataset import Product, Row, SellerData, iso_z
from wbsync.emulator.emulated import (
    EMULATED,
    EXPECTED,
    HANDLERS,
    Call,
    EmulatedMethod,
    Expectation,
    Handler,
)
from wbsync.emulator.replies import BadRequest, json_reply
from wbsync.emulator.state import SellerState, cached, seller_data
from wbsync.emulator.tokens import Kind
from wbsync.emulator.wbdocs import METHODS, ROUTES, Method, Rate

__all__ = [
    "EMULATED",
    "EXPECTED",
    "HANDLERS",
    "METHODS",
    "ROUTES",
    "BadRequest",
    "Call",
    "EmulatedMethod",
    "Expectation",
    "Handler",
    "Kind",
    "Method",
    "Product",
    "Rate",
    "Registrar",
    "Row",
    "SellerData",
    "SellerState",
    "cached",
    "iso_z",
    "json_reply",
    "seller_data",
]
