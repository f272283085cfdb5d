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
