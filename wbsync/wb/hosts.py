"""Base URL settings checked against WB's hosts: a host of WB's serves one section only.

Each WB section has its own host, ``https://<prefix>.wildberries.ru`` (and some a ``-sandbox``
twin); any other section's path there answers 404 "path not found". So a base URL naming one
of those hosts may serve only that section: given for every section (``WBSYNC_WB_BASE_URL``)
or for another one (``WBSYNC_WB_BASE_URLS``) it is refused at start, before a request is sent.
A base URL of any other host (the emulator, a proxy) may serve every section.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import urlsplit

from wbsync.wb.endpoints import SECTIONS, Section
from wbsync.wb.options import Hosts

__all__ = ["base_url_problems", "wb_host_prefix"]

_WB_HOST = re.compile(r"^(?P<prefix>[a-z0-9-]+?)(?:-sandbox)?\.wildberries\.ru$")


def wb_host_prefix(url: str) -> str | None:
    """The section host prefix of ``url`` when it names a WB section's host (or its sandbox
    twin), e.g. ``finance-api``; None for any other host."""
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return None
    match = _WB_HOST.match(host.lower().rstrip("."))
    if match is None:
        return None
    prefix = match["prefix"]
    return prefix if any(s.host_prefix == prefix for s in SECTIONS.values()) else None


def base_url_problems(hosts: Hosts) -> list[str]:
    """One line per base URL setting that sends a section to another section's WB host, or
    names a section there is none of."""
    problems = []
    unknown = sorted(set(hosts.base_urls) - set(SECTIONS))
    if unknown:
        problems.append(
            f"WBSYNC_WB_BASE_URLS: no WB section {unknown}; sections: {', '.join(SECTIONS)}"
        )
    if hosts.base_url:
        served = [s for s in SECTIONS.values() if not hosts.base_urls.get(s.name)]
        problem = _shared("WBSYNC_WB_BASE_URL", hosts.base_url, served, _per_section)
        if problem:
            problems.append(problem)
    if hosts.sandbox_base_url:
        served = [s for s in SECTIONS.values() if s.sandbox]
        url = hosts.sandbox_base_url
        problem = _shared("WBSYNC_WB_SANDBOX_BASE_URL", url, served, _sandbox_advice)
        if problem:
            problems.append(problem)
    for name, url in sorted(hosts.base_urls.items()):
        prefix = wb_host_prefix(url)
        section = SECTIONS.get(name)
        if prefix is None or section is None or section.host_prefix == prefix:
            continue
        problems.append(
            f'WBSYNC_WB_BASE_URLS["{name}"]: {url} is WB\'s host of {_owners(prefix)}, not of '
            f'the {name} section (every request there would answer 404 "path not found"); '
            f"the {name} section is at https://{section.host_prefix}.wildberries.ru: fix the "
            "entry or drop it"
        )
    return problems


def _shared(
    setting: str, url: str, served: list[Section], advice: Callable[[str, str], str]
) -> str | None:
    prefix = wb_host_prefix(url)
    if prefix is None:
        return None
    wrong = [s.name for s in served if s.host_prefix != prefix]
    if not wrong:
        return None
    return (
        f"{setting}: {url} is WB's host of {_owners(prefix)} only; it cannot serve "
        f'{", ".join(wrong)} (every request there would answer 404 "path not found"): '
        + advice(url, prefix)
    )


def _per_section(url: str, prefix: str) -> str:
    return (
        "give each section its own base URL in WBSYNC_WB_BASE_URLS (e.g. "
        f'{{"{_first_owner(prefix)}": "{url}"}}) or leave WBSYNC_WB_BASE_URL unset for WB\'s '
        "own hosts"
    )


def _sandbox_advice(url: str, prefix: str) -> str:
    # One setting serves every sandbox host: a WB host there can never be right.
    return (
        "leave WBSYNC_WB_SANDBOX_BASE_URL unset for WB's own -sandbox hosts, or set it to one "
        "URL that serves every section (e.g. the emulator's sandbox URL)"
    )


def _owners(prefix: str) -> str:
    names = [s.name for s in SECTIONS.values() if s.host_prefix == prefix]
    return f"the {', '.join(names)} section" + ("s" if len(names) > 1 else "")


def _first_owner(prefix: str) -> str:
    return next(s.name for s in SECTIONS.values() if s.host_prefix == prefix)
