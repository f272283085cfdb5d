"""RECORD files (and egg-info installed-files.txt) parsed into values.

Pure: bytes in, values out. A malformed row is kept as a ``RecordProblem`` so the
caller can report it; it never raises for bad content.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from libdoctor.digests import spell_hash

# Hash algorithms a RECORD may use that hashlib always has.
_ALGORITHMS = frozenset(
    {
        "md5",
        "sha1",
        "sha224",
        "sha256",
        "sha384",
        "sha512",
        "sha3_224",
        "sha3_256",
        "sha3_384",
        "sha3_512",
        "blake2b",
        "blake2s",
    }
)
# Unpadded urlsafe-base64 length of the common digests: the fast path of validation.
_B64_LENGTH = {"sha256": 43, "sha384": 64, "sha512": 86, "sha1": 27, "md5": 22}
_B64 = re.compile(r"[A-Za-z0-9_-]+")
_HEX = re.compile(r"[0-9a-fA-F]+")
_HEX_LENGTH = {"sha256": 64, "sha384": 96, "sha512": 128, "sha1": 40, "md5": 32}


def normalize_hash(text: str) -> str:
    """``ALGO=DIGEST`` validated and normalised (lower-case algorithm, no padding).

    Raises ValueError for anything else. Only the rare unusual hash pays for a decode.
    """
    algorithm, sep, encoded = text.partition("=")
    algorithm = algorithm.lower()
    encoded = encoded.rstrip("=")
    if sep and _B64_LENGTH.get(algorithm) == len(encoded) and _B64.fullmatch(encoded):
        return f"{algorithm}={encoded}"
    if sep and _HEX.fullmatch(encoded) and _HEX_LENGTH.get(algorithm) == len(encoded):
        # Debian's dh_python writes hex digests into RECORD; same digest, other spelling.
        return str(Hash(algorithm, bytes.fromhex(encoded)))
    return str(Hash.parse(text))


@dataclass(frozen=True, slots=True)
class Hash:
    """``sha256=<urlsafe base64, no padding>`` as written in RECORD."""

    algorithm: str
    digest: bytes

    @classmethod
    def parse(cls, text: str) -> Hash:
        algorithm, sep, encoded = text.partition("=")
        if not sep or not encoded:
            raise ValueError(f"hash {text!r} is not ALGORITHM=DIGEST")
        algorithm = algorithm.lower()
        if algorithm not in _ALGORITHMS:
            raise ValueError(f"unknown hash algorithm {algorithm!r}")
        from base64 import urlsafe_b64decode

        try:
            digest = urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
        except ValueError as exc:  # binascii.Error is a ValueError
            raise ValueError(f"hash digest {encoded!r} is not base64: {exc}") from None
        import hashlib

        expected = hashlib.new(algorithm).digest_size
        if len(digest) != expected:
            raise ValueError(f"{algorithm} digest has {len(digest)} bytes, expected {expected}")
        return cls(algorithm, digest)

    def __str__(self) -> str:
        return spell_hash(self.algorithm, self.digest)


class RecordEntry(NamedTuple):
    """One row: a path relative to the directory holding the metadata dir (or absolute).

    A NamedTuple rather than a frozen dataclass: a torch env has 22k of these and building
    them is on the hot path of every ``check`` (3x cheaper to create).
    """

    path: str
    hash: str | None  # normalised "algo=urlsafe-b64" (see normalize_hash); Hash.parse decodes
    size: int | None

    @property
    def algorithm(self) -> str | None:
        return self.hash.partition("=")[0] if self.hash else None


@dataclass(frozen=True, slots=True)
class RecordProblem:
    line: int  # 1-based row number
    text: str
    reason: str


@dataclass(frozen=True, slots=True)
class ParsedRecord:
    entries: tuple[RecordEntry, ...]
    problems: tuple[RecordProblem, ...]
    # The paths that are not plain (see model.is_plain), when known; None: test each.
    unplain: frozenset[str] | None = None


# A path segment model.is_plain() accepts: not empty, no leading ".", no "\\" or NUL.
_SEGMENT = r'[^,"\r\n/\\.\0][^,"\r\n/\\\0]*'
# A row as pip and uv write it: unquoted path, normal sha256 or nothing, size or nothing.
# The path lands in group 1 when it is plain (segments joined by single "/"), else group 2.
_COMMON_ROW = re.compile(
    rf'^(?:({_SEGMENT}(?:/{_SEGMENT})*)|([^,"\r\n]+)),(sha256=[A-Za-z0-9_-]{{43}}|),([0-9]*)\r?$',
    re.MULTILINE,
)


def _parse_common(text: str) -> ParsedRecord | None:
    """The whole file in one regex pass when every row is a common one, else None."""
    rows = _COMMON_ROW.findall(text)
    if len(rows) != text.count("\n") + (not text.endswith("\n")):
        return None  # a blank, quoted or unusual row: the general parser decides
    new = tuple.__new__  # RecordEntry(...) without the Python-level __new__ frame
    entries = tuple(
        [
            new(RecordEntry, (plain or other, digest or None, int(size) if size else None))
            for plain, other, digest, size in rows
        ]
    )
    unplain = frozenset(row[1] for row in rows if row[1]) if os.sep == "/" else None
    return ParsedRecord(entries, (), unplain)


def parse_record(data: bytes, only_containing: str | None = None) -> ParsedRecord:
    """Parse RECORD bytes: CSV rows of path, hash, size, as the csv module reads the file
    (``csv.reader(open(RECORD, newline=""))``, the spec's reader).

    Rows split at CR LF, CR or LF outside quotes, never at the other characters
    str.splitlines() breaks on (U+2028, U+0085 and friends are legal in file names; pip's
    uninstall, reading ``csv.reader(text.splitlines())``, would split such a name in two).
    A file with no quote and no bare CR, which is every RECORD pip or uv writes, is the
    same rows split at LF: the fast paths below, which a differential test holds to csv.

    ONLY_CONTAINING: parse just the rows whose text contains it (e.g. ".so" for a model of
    the native files alone); other rows are skipped unread, problems in them unreported.
    """
    text = data.decode("utf-8", "surrogateescape")
    if '"' in text or ("\r" in text and text.count("\r") != text.count("\r\n")):
        return _parse_csv(text, only_containing)  # quoted fields or bare CR: csv decides
    if only_containing is None:
        common = _parse_common(text)
        if common is not None:
            return common
    return _parse_rows(text, only_containing)


def _lines_containing(text: str, needle: str) -> Iterator[tuple[int, str]]:
    """(1-based number, line) of each line of TEXT holding NEEDLE, found with str.find: a
    tenth of a torch RECORD's lines, without visiting the rest. Lines split on "\n" only."""
    number, counted = 1, 0
    at = text.find(needle)
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        number += text.count("\n", counted, start)
        counted = start
        yield number, text[start:end]
        at = text.find(needle, end)


class _Rows:
    """Entries and problems, one row at a time."""

    def __init__(self) -> None:
        self.entries: list[RecordEntry] = []
        self.problems: list[RecordProblem] = []

    def add(self, number: int, line: str, row: list[str]) -> None:
        if len(row) != 3:
            if len(row) > 1 or (row and row[0].strip()):  # else a blank line
                self.problems.append(RecordProblem(number, line, f"{len(row)} columns, expected 3"))
            return
        path, hash_text, size_text = row
        if not path:
            self.problems.append(RecordProblem(number, line, "empty path"))
            return
        digest: str | None = None
        if hash_text:
            # Fast path: an already-normal sha256, as pip and uv write it.
            if len(hash_text) == 50 and hash_text[:7] == "sha256=" and _B64.fullmatch(hash_text, 7):
                digest = hash_text
            else:
                try:
                    digest = normalize_hash(hash_text)
                except ValueError as exc:
                    self.problems.append(RecordProblem(number, line, str(exc)))
                    return
        size: int | None = None
        if size_text:
            if not (size_text.isdigit() and size_text.isascii()):
                reason = f"size {size_text!r} is not an integer"
                self.problems.append(RecordProblem(number, line, reason))
                return
            size = int(size_text)
        # RecordEntry(...) without the Python-level __new__ frame
        self.entries.append(tuple.__new__(RecordEntry, (path, digest, size)))

    def parsed(self) -> ParsedRecord:
        return ParsedRecord(tuple(self.entries), tuple(self.problems))


def _parse_rows(text: str, only_containing: str | None) -> ParsedRecord:
    """The rows of a RECORD without quotes or bare CR: each line, split at commas."""
    rows = _Rows()
    lines: Iterable[tuple[int, str]]
    if only_containing is None:
        lines = enumerate(text.split("\n"), start=1)
    else:
        lines = _lines_containing(text, only_containing)
    for number, raw_line in lines:
        line = raw_line[:-1] if raw_line.endswith("\r") else raw_line
        rows.add(number, line, line.split(","))
    return rows.parsed()


def _parse_csv(text: str, only_containing: str | None) -> ParsedRecord:
    """Any RECORD, by the csv module itself (a quoted field may hold commas and line ends)."""
    import csv  # here only: every RECORD pip or uv writes takes the fast path

    lines = io.StringIO(text, newline="").readlines()  # csv's own line ends: CR LF, CR, LF
    reader = csv.reader(lines)
    rows = _Rows()
    start = 1
    while True:
        try:
            row = next(reader, None)
        except csv.Error as exc:  # a field over csv's size limit
            line = "".join(lines[start - 1 : reader.line_num]).rstrip("\r\n")
            rows.problems.append(RecordProblem(start, line[:200], f"not CSV: {exc}"))
            start = reader.line_num + 1
            continue
        if row is None:
            return rows.parsed()
        line = "".join(lines[start - 1 : reader.line_num]).rstrip("\r\n")
        if only_containing is None or only_containing in line:
            rows.add(start, line, row)
        start = reader.line_num + 1


def parse_installed_files(data: bytes, only_containing: str | None = None) -> ParsedRecord:
    """Parse egg-info ``installed-files.txt``: one path per line, relative to the egg-info
    dir, as pip reads it (``str.splitlines()``, the lines kept as written); a blank line
    names nothing."""
    text = data.decode("utf-8", "surrogateescape")
    entries = tuple(
        RecordEntry(line, None, None)
        for line in text.splitlines()
        if line.strip() and (only_containing is None or only_containing in line)
    )
    return ParsedRecord(entries, ())
