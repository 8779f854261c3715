"""The one loader of wbsync's Lua scripts: each ships as a ``.lua`` file beside its caller."""

from __future__ import annotations

from functools import cache
from importlib import resources

__all__ = ["lua_script"]


@cache
def lua_script(package: str, name: str) -> str:
    """The text of ``name`` (e.g. ``"bucket.lua"``) in ``package`` (e.g. ``"wbsync.ratelimit"``)."""
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")
