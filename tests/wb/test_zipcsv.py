"""A reply declared a ZIP archive of a CSV file (``Endpoint(reply="zip-csv")``): read into rows
of text with its header's names, within its two bounds (the CSV's declared size, its rows), and
refused with what was wrong, as an unusable reply naming the method and the setting."""

from __future__ import annotations

import dataclasses
import io
import struct
import zipfile

import pytest

from wbsync.errors import WbBadResponseError
from wbsync.wb.http import HttpReply
from wbsync.wb.methods import PROMOTION_ADVERTS
from wbsync.wb.replies import success
from wbsync.wb.zipcsv import ZipCsvError, read_zip_csv

MB = 1024 * 1024
FILE = dataclasses.replace(PROMOTION_ADVERTS, name="test.report_file", reply="zip-csv")


def zipped(files: dict[str, bytes]) -> bytes:
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return packed.getvalue()


def csv_of(rows: int, *, bom: bool = False) -> bytes:
    text = "nmID,dt,name\n" + "".join(
        f'{i},2026-12-0{1 + i % 9},"a, ""{i}"""\n' for i in range(rows)
    )
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode()


def test_rows_are_the_headers_names_to_the_cells_text() -> None:
    rows = read_zip_csv(zipped({"r.csv": csv_of(3, bom=True) + b"\n"}), max_bytes=MB, max_rows=3)
    assert rows == [
        {"nmID": "0", "dt": "2026-12-01", "name": 'a, "0"'},
        {"nmID": "1", "dt": "2026-12-02", "name": 'a, "1"'},
        {"nmID": "2", "dt": "2026-12-03", "name": 'a, "2"'},
    ]
    assert read_zip_csv(zipped({"r.csv": b""}), max_bytes=MB, max_rows=1) == []


def test_rows_past_the_bound_are_refused_naming_it() -> None:
    body = zipped({"r.csv": csv_of(4)})
    assert len(read_zip_csv(body, max_bytes=MB, max_rows=4)) == 4
    with pytest.raises(ZipCsvError, match=r"holds more than WBSYNC_WB_MAX_CSV_ROWS \(3\) rows"):
        read_zip_csv(body, max_bytes=MB, max_rows=3)


def test_a_csv_inflating_past_the_bound_is_refused_unread() -> None:
    # 8 MB of rows compress to a few kilobytes: the declared size is refused before inflating.
    big = b"nmID,dt\n" + b"123456789,2026-12-01\n" * (8 * MB // 20)
    body = zipped({"r.csv": big})
    assert len(body) < len(big) // 100
    with pytest.raises(ZipCsvError, match=r"uncompressed, past WBSYNC_WB_MAX_UNZIPPED_BYTES"):
        read_zip_csv(body, max_bytes=MB, max_rows=10**9)
    assert len(read_zip_csv(body, max_bytes=len(big), max_rows=10**9)) == 8 * MB // 20


def test_an_archive_that_understates_its_size_is_broken_not_read_past_it() -> None:
    big = b"nmID\n" + b"1\n" * MB
    body = bytearray(zipped({"r.csv": big}))
    # The central directory's uncompressed size (offset 24 of its entry) says 100 bytes.
    entry = body.rindex(b"PK\x01\x02")
    struct.pack_into("<I", body, entry + 24, 100)
    with pytest.raises(ZipCsvError, match="broken"):
        read_zip_csv(bytes(body), max_bytes=1000, max_rows=10**9)


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"data": []}', "not a ZIP archive"),
        (zipped({"a.txt": b"x"}), "expected one CSV file in WB's ZIP archive, found 'a.txt'"),
        (zipped({"a.csv": b"x\n", "b.csv": b"y\n"}), "found 'a.csv', 'b.csv'"),
        (zipped({"r.csv": b"a,a\n1,2\n"}), "empty or repeated column name"),
        (zipped({"r.csv": b"a,b\n1,2\n3\n"}), "line 3 of the CSV file 'r.csv' has 1 cells"),
        (zipped({"r.csv": b"a\n\xff\n"}), "is not UTF-8"),
    ],
)
def test_what_is_no_zip_of_one_csv_is_refused_saying_what(body: bytes, said: str) -> None:
    with pytest.raises(ZipCsvError, match=said):
        read_zip_csv(body, max_bytes=MB, max_rows=100)


def test_the_client_reads_a_declared_zip_reply_and_refuses_one_past_its_bounds() -> None:
    reply = HttpReply(200, "OK", {"Content-Type": "application/zip"}, zipped({"r.csv": csv_of(2)}))
    assert len(success(FILE, reply, csv_bounds=(MB, 2)).data) == 2
    with pytest.raises(WbBadResponseError) as refused:
        success(FILE, reply, csv_bounds=(MB, 1))
    assert "WBSYNC_WB_MAX_CSV_ROWS (1)" in str(refused.value)
    assert "method=test.report_file" in str(refused.value)
    # A JSON method reading the same body: not JSON.
    with pytest.raises(WbBadResponseError, match="not JSON"):
        success(PROMOTION_ADVERTS, reply, csv_bounds=(MB, 2))
    # No other kind of reply can be declared.
    with pytest.raises(ValueError, match="reply must be one of json, zip-csv"):
        dataclasses.replace(PROMOTION_ADVERTS, reply="xml")  # type: ignore[arg-type]
