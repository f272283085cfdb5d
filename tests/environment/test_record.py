from __future__ import annotations

import base64
import hashlib

import pytest

from libdoctor.environment.record import (
    Hash,
    RecordEntry,
    normalize_hash,
    parse_installed_files,
    parse_record,
)


def _sha(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_parses_rows_as_pip_writes_them() -> None:
    good = _sha(b"x")
    record = parse_record(
        f'pkg/__init__.py,{good},1\npkg-1.0.dist-info/RECORD,,\n"pkg/a,b.py",{{good}},1\n'.replace(
            "{good}", good
        ).encode()
    )
    assert record.problems == ()
    assert record.entries == (
        RecordEntry("pkg/__init__.py", good, 1),
        RecordEntry("pkg-1.0.dist-info/RECORD", None, None),
        RecordEntry("pkg/a,b.py", good, 1),
    )


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ("a.py,sha256=x", "2 columns"),
        ("a.py,sha256=abc,1,extra", "4 columns"),
        ("a.py,nohash,1", "not ALGORITHM=DIGEST"),
        ("a.py,whirlpool=abcd,1", "unknown hash algorithm"),
        ("a.py,sha256=abc,1", "digest has"),
        ("a.py,,12x", "not an integer"),
        ("a.py,,-1", "not an integer"),
        (",,", "empty path"),
    ],
)
def test_malformed_rows_are_problems_not_exceptions(row: str, reason: str) -> None:
    record = parse_record(f"ok.py,,\n{row}\n".encode())
    assert record.entries == (RecordEntry("ok.py", None, None),)
    assert len(record.problems) == 1
    assert record.problems[0].line == 2
    assert reason in record.problems[0].reason


def test_hash_normalisation_accepts_padding_and_case() -> None:
    digest = hashlib.sha256(b"y").digest()
    plain = base64.urlsafe_b64encode(digest).decode()
    assert normalize_hash("SHA256=" + plain) == "sha256=" + plain.rstrip("=")
    assert Hash.parse(normalize_hash("sha256=" + plain)).digest == digest
    sha512 = "sha512=" + base64.urlsafe_b64encode(hashlib.sha512(b"y").digest()).decode()
    assert normalize_hash(sha512) == sha512.rstrip("=")


def test_non_utf8_and_blank_lines() -> None:
    record = parse_record(b"caf\xe9.py,,\n\n   \n")
    assert record.entries[0].path == "caf\udce9.py"
    assert record.problems == ()


def test_installed_files_txt() -> None:
    record = parse_installed_files(b"../pkg/__init__.py\n\n../pkg/mod.py\n")
    assert [e.path for e in record.entries] == ["../pkg/__init__.py", "../pkg/mod.py"]


# --------------------------------------------------------------------------- differential


def test_every_real_record_reads_as_the_csv_module_reads_it() -> None:
    from support.readers import real_dist_infos, record_from_csv

    records = [d / "RECORD" for d in real_dist_infos() if (d / "RECORD").is_file()]
    assert len(records) >= 10
    for path in records:
        data = path.read_bytes()
        record = parse_record(data)
        text = data.decode("utf-8", "surrogateescape")
        assert (list(record.entries), len(record.problems)) == record_from_csv(text), path


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ('"a\nb.py",,1\nc.py,,\n', ["a\nb.py", "c.py"]),  # a line end inside quotes
        ('"a\r\nb.py",,1\r\nc.py,,\r\n', ["a\r\nb.py", "c.py"]),
        ("a.py,,\rb.py,,\r", ["a.py", "b.py"]),  # bare CR ends a row, as in csv
        ("a\u2028b.py,,\nc\x85d.py,,\ne\x0cf.py,,\n", ["a\u2028b.py", "c\x85d.py", "e\x0cf.py"]),
        ('"a,b.py",,\n"q""uote.py",,\n', ["a,b.py", 'q"uote.py']),
    ],
    ids=["LF in quotes", "CRLF in quotes", "bare CR", "splitlines chars", "comma and quote"],
)
def test_rows_split_where_csv_splits_them(text: str, paths: list[str]) -> None:
    record = parse_record(text.encode())
    assert record.problems == ()
    assert [e.path for e in record.entries] == paths


def test_only_containing_reads_quoted_rows_too() -> None:
    record = parse_record(b'"a\nb.so",,1\nc.py,,\n"d,e.so",,\n', ".so")
    assert [e.path for e in record.entries] == ["a\nb.so", "d,e.so"]


def test_installed_files_txt_splits_lines_as_pip_does() -> None:
    data = b"../pkg/a.py\r\n../pkg/b.py\r../pkg/c.py\n  \n../pkg/ d.py\n"
    record = parse_installed_files(data)
    expected = [p for p in data.decode().splitlines() if p.strip()]  # pip: splitlines, as is
    assert [e.path for e in record.entries] == expected
