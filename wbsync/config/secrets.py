"""Secrets out of sight: a URL's password masked, a ``SecretStr`` revealed only when asked."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr


def revealed(value: Any) -> Any:
    """``value`` with every ``SecretStr`` in it replaced by its secret."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, list):
        return [revealed(v) for v in value]
    return value


def without_password(value: str) -> str:
    """``value`` with the password of a URL (``scheme://user:password@host``) masked."""
    if "://" not in value or "@" not in value:
        return value
    try:
        netloc = urlsplit(value).netloc
    except ValueError:
        return "**********"
    userinfo, _, _ = netloc.rpartition("@")
    if ":" not in userinfo:
        return value
    user = userinfo.partition(":")[0]
    return value.replace(netloc, f"{user}:**********@{netloc.rpartition('@')[2]}", 1)
