"""The built-in emulated WB methods: one module per WB section, each a tuple ``EMULATED`` of
its :class:`~wbsync.emulator.emulated.EmulatedMethod` values (WB's documented row with its
limits, the handler, the expectation; the section host's ``/ping``), as a plugin declares its
own (docs/extending.md).

Every module of this package is registered (``wbsync.emulator.wbdocs``), in the order of
their names: a method added to a section's module, or a new section's module, is registered
with nothing else to edit.
"""

from __future__ import annotations

import importlib
import pkgutil

from wbsync.emulator.emulated import EmulatedMethod

__all__ = ["builtin"]


def builtin() -> list[EmulatedMethod]:
    """Every module's ``EMULATED``, modules in name order; a module without one is an error
    that names it."""
    found: list[EmulatedMethod] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        declared = getattr(module, "EMULATED", None)
        if not isinstance(declared, tuple) or not all(
            isinstance(m, EmulatedMethod) for m in declared
        ):
            raise TypeError(
                f"{module.__name__} must define EMULATED, a tuple of EmulatedMethod values"
            )
        found.extend(declared)
    return found
