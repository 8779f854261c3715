"""WB's methods as WB's documents state them: every built-in emulated method, registered.

The methods are declared one WB section per module under ``wbsync.emulator.methods`` (WB's
documented row with its limits, the handler, the expectation), with the types of
``wbsync.emulator.method``; importing this module registers them all through the same
:class:`~wbsync.catalog.registry.Registrar` a plugin's go through (``wbsync.emulator.extend``), so
whoever reads :data:`METHODS` from here reads the built-ins.
"""

from __future__ import annotations

from wbsync.catalog.registry import BUILTIN, Registrar
from wbsync.emulator.emulated import EMULATED
from wbsync.emulator.method import METHODS, ROUTES, SANDBOX_HOSTS, Method, Rate, disabled_in_docs
from wbsync.emulator.methods import builtin

__all__ = [
    "METHODS",
    "ROUTES",
    "SANDBOX_HOSTS",
    "Method",
    "Rate",
    "disabled_in_docs",
    "ping_hosts",
]

_builtin = Registrar(BUILTIN)
_builtin.declare(*builtin())
_builtin.commit()


def ping_hosts() -> dict[str, str]:
    """Each emulated host with a ``/ping`` (the built-ins' and the plugins'), and the name of
    its ping method (``<section>.ping``)."""
    return {m.method.host: name for name, m in EMULATED.items() if m.method.path == "/ping"}
