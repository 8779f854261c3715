"""Bulk import of cabinets: CSV or JSON lines in, one transaction, a report of every line.

Input, either:

* CSV with a header naming the columns ``name`` and ``token`` (others are ignored), or
* JSON lines: one object per line with ``"name"`` and ``"token"``.

The first non-blank line decides: ``{`` starts JSON lines. Each line's token is parsed (shape,
expiry) before anything is stored; a line that fails is *refused* with its line number and
reason, and the rest are added in one transaction; a name that already exists (or repeats in
the input) is *skipped*. Tokens never appear in a report or a message.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

from wbsync.errors import ConfigError, TokenError
from wbsync.store import CabinetRepository, NewCabinet
from wbsync.syncs import unserved_queues
from wbsync.wb.tokens import WbToken, parse_token

__all__ = ["IMPORT_MAX_LINES", "ImportReport", "import_cabinets", "parse_lines"]

IMPORT_MAX_LINES = 100_000
"""Lines one import takes at most (more is refused before anything is stored)."""


@dataclass
class ImportReport:
    """What an import did, line by line."""

    added: list[dict[str, Any]] = field(default_factory=list)  # id, name, seller_id, line
    skipped: list[dict[str, Any]] = field(default_factory=list)  # line, name, reason
    refused: list[dict[str, Any]] = field(default_factory=list)  # line, name, reason
    unserved: dict[str, dict[str, str]] = field(default_factory=dict)  # name -> queue -> why

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data."""
        return {
            "added": self.added,
            "skipped": self.skipped,
            "refused": self.refused,
            "unserved": self.unserved,
        }


def _rows(text: str) -> list[tuple[int, dict[str, Any] | None, str]]:
    """(line number, fields or None, why not) for every non-blank data line."""
    lines = text.splitlines()
    first = next((n for n, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return []
    out: list[tuple[int, dict[str, Any] | None, str]] = []
    if lines[first].lstrip().startswith("{"):
        for n, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError:
                out.append((n, None, "not a JSON object"))
                continue
            if not isinstance(value, dict):
                out.append((n, None, "not a JSON object"))
            else:
                out.append((n, value, ""))
        return out
    reader = csv.DictReader(io.StringIO(text))
    columns = {c.strip().lower() for c in reader.fieldnames or []}
    if not {"name", "token"} <= columns:
        raise ConfigError("the CSV header must name the columns 'name' and 'token'")
    for row in reader:
        n = reader.line_num
        fields = {(k or "").strip().lower(): v for k, v in row.items()}
        if not any((v or "").strip() for v in fields.values() if isinstance(v, str)):
            continue
        out.append((n, fields, ""))
    return out


def parse_lines(text: str) -> tuple[list[tuple[int, NewCabinet, WbToken]], list[dict[str, Any]]]:
    """The cabinets the input names (line number, cabinet, parsed token), and the lines refused."""
    rows = _rows(text)
    if len(rows) > IMPORT_MAX_LINES:
        raise ConfigError(
            f"{len(rows)} lines; one import takes at most {IMPORT_MAX_LINES}: split the file"
        )
    good: list[tuple[int, NewCabinet, WbToken]] = []
    refused: list[dict[str, Any]] = []
    for n, fields, why in rows:
        if fields is None:
            refused.append({"line": n, "name": None, "reason": why})
            continue
        name, token = fields.get("name"), fields.get("token")
        if not isinstance(name, str) or not name.strip():
            refused.append({"line": n, "name": None, "reason": "no name"})
            continue
        if not isinstance(token, str) or not token.strip():
            refused.append({"line": n, "name": name, "reason": "no token"})
            continue
        try:
            parsed = parse_token(token.strip())
        except TokenError as exc:  # its message never holds the token
            refused.append({"line": n, "name": name, "reason": str(exc)})
            continue
        good.append(
            (
                n,
                NewCabinet(
                    name.strip(),
                    token.strip(),
                    parsed.seller_id,
                    token_expires_at=parsed.expires_at,
                ),
                parsed,
            )
        )
    return good, refused


async def import_cabinets(cabinets: CabinetRepository, text: str) -> ImportReport:
    """Parse ``text`` and add every good line's cabinet in one transaction."""
    good, refused = parse_lines(text)
    result = await cabinets.add_many([cabinet for _, cabinet, _ in good])
    first_line: dict[str, int] = {}
    report = ImportReport(refused=refused)
    for n, cabinet, _ in good:
        if cabinet.name in first_line:
            reason = f"the name appears earlier in the input (line {first_line[cabinet.name]})"
            report.skipped.append({"line": n, "name": cabinet.name, "reason": reason})
        else:
            first_line[cabinet.name] = n
    for name, reason in result.skipped:
        if "appears twice" not in reason:  # repeats are reported above, with their lines
            report.skipped.append({"line": first_line.get(name), "name": name, "reason": reason})
    token_of = {cabinet.name: token for _, cabinet, token in good}
    for stored in result.added:
        report.added.append(
            {
                "line": first_line.get(stored.name),
                "id": stored.id,
                "name": stored.name,
                "seller_id": stored.seller_id,
            }
        )
        gaps = unserved_queues(token_of[stored.name])
        if gaps:
            report.unserved[stored.name] = gaps
    return report
