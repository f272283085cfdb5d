"""RECORD files (and egg-info installed-files.txt) parsed into values.

Pure: bytes in, values out. A malformed row is kept as a ``RecordProblem`` so the
caller can report it; it never raises for bad content.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

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


def spell_hash(algorithm: str, digest: bytes) -> str:
    """DIGEST as RECORD writes it: ``sha256=<urlsafe base64, no padding>``."""
    from base64 import urlsafe_b64encode

    return f"{algorithm}={urlsafe_b64encode(digest).rstrip(b'=').decode('ascii')}"


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
    """Parse RECORD bytes (CSV: path, hash, size).

    ONLY_CONTAINING: parse just the rows whose text contains it (e.g. ".so" for a model of
    the native files alone); other rows are skipped unread, problems in them unreported.
    """
    text = data.decode("utf-8", "surrogateescape")
    if only_containing is None and '"' not in text:
        common = _parse_common(text)
        if common is not None:
            return common
    return _parse_rows(text, only_containing)


def _lines_containing(text: str, needle: str) -> Iterator[tuple[int, str]]:
    """(1-based number, line) of each line of TEXT holding NEEDLE, found with str.find: a
    tenth of a torch RECORD's lines, without visiting the rest. Lines split on "\n" only:
    str.splitlines() also breaks on U+2028, U+0085 and friends, legal in file names."""
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


def _parse_rows(text: str, only_containing: str | None) -> ParsedRecord:
    """The general parser, row by row: quoting, odd hashes, malformed rows."""
    entries: list[RecordEntry] = []
    problems: list[RecordProblem] = []
    fullmatch = _B64.fullmatch
    new = tuple.__new__  # RecordEntry(...) without the Python-level __new__ frame
    rows: Iterable[tuple[int, str]]
    if only_containing is None:
        rows = enumerate(text.split("\n"), start=1)  # "\n" only: see _lines_containing
    else:
        rows = _lines_containing(text, only_containing)
    for number, raw_line in rows:
        line = raw_line[:-1] if raw_line.endswith("\r") else raw_line
        if '"' in line:  # quoted fields (commas in names): the csv module's job
            try:
                import csv  # here only: every RECORD pip or uv writes takes the fast path

                row = next(csv.reader([line]), [])
            except csv.Error as exc:
                problems.append(RecordProblem(number, line, f"not CSV: {exc}"))
                continue
        else:
            row = line.split(",")
        if len(row) != 3:
            if line.strip():
                problems.append(RecordProblem(number, line, f"{len(row)} columns, expected 3"))
            continue
        path, hash_text, size_text = row
        if not path:
            problems.append(RecordProblem(number, line, "empty path"))
            continue
        digest: str | None = None
        if hash_text:
            # Fast path: an already-normal sha256, as pip and uv write it.
            if len(hash_text) == 50 and hash_text[:7] == "sha256=" and fullmatch(hash_text, 7):
                digest = hash_text
            else:
                try:
                    digest = normalize_hash(hash_text)
                except ValueError as exc:
                    problems.append(RecordProblem(number, line, str(exc)))
                    continue
        size: int | None = None
        if size_text:
            if not (size_text.isdigit() and size_text.isascii()):
                problems.append(
                    RecordProblem(number, line, f"size {size_text!r} is not an integer")
                )
                continue
            size = int(size_text)
        entries.append(new(RecordEntry, (path, digest, size)))
    return ParsedRecord(tuple(entries), tuple(problems))


def parse_installed_files(data: bytes, only_containing: str | None = None) -> ParsedRecord:
    """Parse egg-info ``installed-files.txt``: one path per line, relative to the egg-info dir."""
    text = data.decode("utf-8", "surrogateescape")
    entries = tuple(
        RecordEntry(line.strip(), None, None)
        for line in text.split("\n")
        if line.strip() and (only_containing is None or only_containing in line)
    )
    return ParsedRecord(entries, ())
