"""What a ``WbClient`` follows, as small frozen values: where WB lives and the bounds of a call.

The client never reads the environment nor takes the whole ``Settings``: whoever composes the
application (``wbsync.shared.runtime``, a benchmark, a test) builds a ``ClientOptions`` once,
usually with ``wbsync.shared.runtime.client_options(settings)``, and hands the same value to every
client; like the limiter's options, nothing here imports the configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from wbsync.values.limit_overrides import LimitOverride
from wbsync.wb.retry import RetryPolicy

__all__ = ["READ_TIMEOUT_S", "ClientOptions", "Hosts"]

#: The longest wait for one read (or the connection) of an exchange, real seconds; the whole
#: exchange is bounded by ``ClientOptions.request_deadline_s`` on top of it.
READ_TIMEOUT_S = 60.0

_NO_URLS: Mapping[str, str] = MappingProxyType({})
_NO_OVERRIDES: Mapping[str, Mapping[str, LimitOverride]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Hosts:
    """Where WB's sections live: ``base_urls[section]``, else ``base_url``, else WB's own host;
    Test tokens go to ``sandbox_base_url``, else WB's ``-sandbox`` hosts."""

    base_url: str | None = None
    base_urls: Mapping[str, str] = field(default_factory=lambda: _NO_URLS)
    sandbox_base_url: str | None = None


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """Everything one ``WbClient.call`` follows besides the token and the limiter.

    ``time_scale`` multiplies WB periods and waits (backoff, rate-limit headers' ceiling);
    ``request_deadline_s`` bounds one exchange, connect to last body byte (real seconds), on
    top of ``read_timeout_s`` per read; ``max_body_bytes`` bounds a reply body (decoded);
    ``rate_wait_max_s`` is the longest wait a rate-limit header may impose (WB seconds);
    ``finance_page_rows`` is the finance report's page size; ``limit_overrides`` replace the
    table's limits by group; a method of ``disabled_methods`` is refused without a request;
    ``max_unzipped_bytes`` and ``max_csv_rows`` bound a ZIP-of-CSV reply's CSV (uncompressed
    size, rows; ``zipcsv.py``).
    """

    time_scale: float
    request_deadline_s: float
    max_body_bytes: int
    rate_wait_max_s: float
    finance_page_rows: int
    max_unzipped_bytes: int
    max_csv_rows: int
    hosts: Hosts = Hosts()
    limit_overrides: Mapping[str, Mapping[str, LimitOverride]] = field(
        default_factory=lambda: _NO_OVERRIDES
    )
    disabled_methods: frozenset[str] = frozenset()
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    read_timeout_s: float = READ_TIMEOUT_S
