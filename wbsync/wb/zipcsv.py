"""A reply body that is a ZIP archive holding one CSV file, read into rows of text, bounded.

WB serves some reports as files (seller analytics' ``nm-report`` downloads: ``application/zip``
with one CSV inside). An ``Endpoint`` declares it (``reply="zip-csv"``) and the client reads the
body here instead of as JSON: the standard library's ``zipfile`` and ``csv``, the archive's one
``.csv`` member streamed and decoded as UTF-8 (a byte-order mark dropped), comma-separated,
its first line the header. Each row is a dict of the header's names to the cells' text, as WB
wrote them: typing them is the caller's (a report task types them as its dataset declares).

Two bounds on top of the body's own (``WBSYNC_WB_MAX_BODY_BYTES``, the archive as sent): the
CSV's uncompressed size (``max_bytes``, ``WBSYNC_WB_MAX_UNZIPPED_BYTES``, the size the archive
declares, checked before anything is inflated; ``zipfile`` inflates no more than that, and a
member that would inflate further fails its CRC check, so an archive that inflates a
thousandfold is refused unread) and its rows (``max_rows``, ``WBSYNC_WB_MAX_CSV_ROWS``). Past
either, or for anything that is not such an archive (no ZIP, no or several CSV files, an
encrypted one, not UTF-8, a header with an empty or repeated name, a row of another width),
:class:`ZipCsvError` says what was wrong; the client turns it into an unusable reply.
"""

from __future__ import annotations

import csv
import io
import zipfile
import zlib
from collections.abc import Iterator

__all__ = ["ZipCsvError", "read_zip_csv"]

_BYTES_SETTING = "WBSYNC_WB_MAX_UNZIPPED_BYTES"
_ROWS_SETTING = "WBSYNC_WB_MAX_CSV_ROWS"
# What a broken archive or member raises while it is opened or inflated.
_BROKEN = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError)


class ZipCsvError(ValueError):
    """A body that is not a ZIP archive of one CSV file within the bounds; says which."""


def read_zip_csv(content: bytes, *, max_bytes: int, max_rows: int) -> list[dict[str, str]]:
    """The rows of the one CSV file of the ZIP archive ``content``, each the header's names to
    its cells' text; :class:`ZipCsvError` when it is not one or is past a bound."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
    except _BROKEN as exc:
        raise ZipCsvError(f"WB answered a body that is not a ZIP archive ({exc})") from None
    with archive:
        files = [i for i in archive.infolist() if not i.is_dir()]
        found = [i for i in files if i.filename.lower().endswith(".csv")]
        if len(found) != 1:
            names = ", ".join(repr(i.filename) for i in files) or "nothing"
            raise ZipCsvError(f"expected one CSV file in WB's ZIP archive, found {names}")
        [member] = found
        if member.file_size > max_bytes:
            raise ZipCsvError(
                f"the CSV file {member.filename!r} is {member.file_size} bytes uncompressed, "
                f"past {_BYTES_SETTING} ({max_bytes} bytes): ask WB for a shorter period or "
                "raise the maximum"
            )
        if member.flag_bits & 0x1:
            raise ZipCsvError(f"the CSV file {member.filename!r} is encrypted")
        try:
            # zipfile inflates no more than the size the archive declares (a member that would
            # inflate further fails its CRC check): the check above bounds what is read.
            with archive.open(member) as raw:
                text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
                return _rows(csv.reader(text), member.filename, max_rows)
        except _BROKEN as exc:
            raise ZipCsvError(f"WB's ZIP archive is broken ({exc})") from None
        except UnicodeDecodeError:
            raise ZipCsvError(f"the CSV file {member.filename!r} is not UTF-8") from None
        except csv.Error as exc:
            raise ZipCsvError(f"the CSV file {member.filename!r} is malformed ({exc})") from None


def _rows(reader: Iterator[list[str]], name: str, max_rows: int) -> list[dict[str, str]]:
    header = next(reader, None)
    if header is None:
        return []
    if any(not column for column in header) or len(set(header)) != len(header):
        raise ZipCsvError(f"the CSV file {name!r} has an empty or repeated column name: {header}")
    rows: list[dict[str, str]] = []
    for line, cells in enumerate(reader, start=2):
        if not cells:
            continue  # a blank line
        if len(cells) != len(header):
            raise ZipCsvError(
                f"line {line} of the CSV file {name!r} has {len(cells)} cells, its header "
                f"{len(header)}"
            )
        if len(rows) == max_rows:
            raise ZipCsvError(
                f"the CSV file {name!r} holds more than {_ROWS_SETTING} ({max_rows}) rows: ask "
                "WB for a shorter period or raise the maximum"
            )
        rows.append(dict(zip(header, cells, strict=True)))
    return rows
