"""The public surface of ``wbsync.store``: what it exports exists and is documented."""

from __future__ import annotations

import inspect

import wbsync.store


def test_all_names_exist_and_have_docstrings() -> None:
    for name in wbsync.store.__all__:
        obj = getattr(wbsync.store, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"


def test_public_methods_are_documented() -> None:
    for name in wbsync.store.__all__:
        obj = getattr(wbsync.store, name)
        if not inspect.isclass(obj):
            continue
        for attr, member in vars(obj).items():
            if attr.startswith("_") or not callable(member):
                continue
            assert inspect.getdoc(member), f"{name}.{attr} has no docstring"
