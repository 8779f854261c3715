"""What a 404 means, and the sections a process stopped because their URL does not exist.

WB's 404 has kinds (``docs/failures.md``): "method is disabled" and "This method is deprecated"
are WB switching a method off (``WbMethodDisabledError``: the job comes back much later), while
WB's gateway answers "path not found" to a path no host of its serves: a base URL that sends a
section to another section's host, a wrong path. That is our configuration, not WB's state, and
every other request to that base URL would get the same answer: the first one stops the section
in the process (``SectionStops``), and later calls fail at once without sending.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wbsync.errors import WbPathNotFoundError
from wbsync.wb.endpoints import Endpoint

__all__ = ["SectionStops", "is_path_not_found"]

# WB's gateway says "path not found"; a web server that is not WB (a wrong base URL pointing
# elsewhere) says "Not Found", "404 page not found" or the like, and nothing else.
_PATH_NOT_FOUND = re.compile(r"(?i)\bpath not found\b")
_BARE_NOT_FOUND = re.compile(r"(?i)^(?:\W*(?:404|page|file|not\s+found|nginx)\b)+\W*$")


def is_path_not_found(words: str | None) -> bool:
    """True when a 404's words say the path does not exist (WB's "path not found", a bare
    "Not Found" page); False for WB switching a method off, or words we do not know."""
    if not words:
        return False
    bare = _BARE_NOT_FOUND.match(words) and "not found" in words.lower()
    return bool(_PATH_NOT_FOUND.search(words) or bare)


@dataclass(frozen=True, slots=True)
class _Key:
    section: str
    base_url: str


class SectionStops:
    """The sections (each at one base URL) whose requests this process stopped.

    One per process (``wbsync.shared.runtime`` hands it to every client), so one "path not found"
    stops every cabinet's requests to that section, not only the caller's.
    """

    def __init__(self) -> None:
        self._stopped: dict[_Key, WbPathNotFoundError] = {}

    def misrouted(
        self, ep: Endpoint, base_url: str, setting: str, request_id: str | None, words: str | None
    ) -> WbPathNotFoundError:
        """The error of a 404 "path not found" on ``ep`` at ``base_url`` (``setting`` to fix);
        ``ep``'s section at ``base_url`` stops (the first stop is the one kept)."""
        url, section, method = base_url + ep.path, ep.section.name, ep.name
        error = WbPathNotFoundError(
            f"{url} was not found (404 path not found): the {section} section's base URL "
            f"{base_url} is wrong; fix {setting}; the section's requests stop in this process",
            url=url,
            section=section,
            setting=setting,
            method=method,
            status=404,
            request_id=request_id,
            words=words,
        )
        self._stopped.setdefault(_Key(section, base_url), error)
        return error

    def check(self, section: str, base_url: str, *, method: str) -> None:
        """Raise ``WbPathNotFoundError`` (nothing sent) when ``section`` at ``base_url`` is
        stopped."""
        first = self._stopped.get(_Key(section, base_url))
        if first is None:
            return
        raise WbPathNotFoundError(
            f"nothing sent: the {section} section is stopped in this process since "
            f"{first.url} was not found (404 path not found); fix {first.setting} and restart",
            url=first.url,
            section=section,
            setting=first.setting,
            method=method,
            words=first.words,
        )

    def stopped(self) -> list[str]:
        """The stopped sections, each as ``section at base URL``."""
        return [f"{key.section} at {key.base_url}" for key in self._stopped]
