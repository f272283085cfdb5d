"""``environment.parsed``: parsed RECORDs kept between runs, trusted only for the same file.

A value comes back only while the file's identity holds, never for a file changed within the
racy window, and a damaged, foreign or oversized cache file is ignored. The whole-check
property (the cache never changes a finding) is ``tests/property/test_check_cache.py``.
"""

from __future__ import annotations

import marshal
import os
import time
from pathlib import Path

import pytest

from libdoctor.environment.distributions import scan_site
from libdoctor.environment.parsed import (
    MAX_CACHE_BYTES,
    RECORDS,
    ParsedFiles,
    record_of,
    record_value,
)
from libdoctor.environment.record import parse_record
from libdoctor.environment.target import SiteDir

RECORD = (
    b"pkg/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n"
    b"pkg/x.py,,\n"
    b"../../bin/tool,,12\n"
    b"pkg/bad.py,sha256=AAAA,0\n"
)


def _site(tmp_path: Path, record: bytes = RECORD) -> SiteDir:
    info = tmp_path / "site" / "pkg-1.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_bytes(b"Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    (info / "RECORD").write_bytes(record)
    return SiteDir(str(tmp_path / "site"), str(tmp_path))


def _load(cache: Path, *, trusting: bool = True) -> ParsedFiles:
    """The cache; TRUSTING: every file written so far counts as settled."""
    settled = time.time_ns() + 10**9 if trusting else None
    return ParsedFiles.load(str(cache), "/prefix", RECORDS, settled_ns=settled)


def _scan(site: SiteDir, records: ParsedFiles | None) -> list[object]:
    found = scan_site(site, records=records)
    if records is not None:
        records.save()
    return list(found)


@pytest.mark.parametrize("data", [RECORD, RECORD.replace(b"pkg/bad.py,sha256=AAAA,0\n", b"")])
def test_a_value_round_trips_exactly(data: bytes) -> None:
    parsed = parse_record(data)
    assert parsed.problems or parsed.unplain, "both kinds: with problems, and the fast path's"
    value = marshal.loads(marshal.dumps(record_value(parsed)))
    assert record_of(value) == parsed


def test_a_stored_record_is_served_while_the_file_holds(tmp_path: Path) -> None:
    site, cache = _site(tmp_path), tmp_path / "cache"
    plain = _scan(site, None)
    assert _scan(site, _load(cache)) == plain
    warm = _load(cache)
    assert list(warm.entries) == [os.path.join(site.path, "pkg-1.0.dist-info", "RECORD")]
    assert _scan(site, warm) == plain
    assert warm.used.keys() == warm.entries.keys() and not warm.dirty


@pytest.mark.parametrize("change", ["same-size", "other-size", "touch", "replaced"])
def test_a_changed_record_is_parsed_again(tmp_path: Path, change: str) -> None:
    site, cache = _site(tmp_path), tmp_path / "cache"
    _scan(site, _load(cache))
    record = Path(site.path) / "pkg-1.0.dist-info" / "RECORD"
    if change == "same-size":
        record.write_bytes(RECORD.replace(b"pkg/x.py", b"pkg/y.py"))
    elif change == "other-size":
        record.write_bytes(RECORD + b"pkg/z.py,,\n")
    elif change == "touch":
        os.utime(record, ns=(1, 1))  # the bytes as they were: the ctime still moves
    else:
        spare = record.with_name("spare")
        spare.write_bytes(RECORD.replace(b"pkg/x.py", b"pkg/w.py"))
        os.replace(spare, record)
    assert _scan(site, _load(cache)) == _scan(site, None)


def test_a_file_changed_within_the_racy_window_is_not_stored(tmp_path: Path) -> None:
    site, cache = _site(tmp_path), tmp_path / "cache"
    records = _load(cache, trusting=False)  # the real rule: RACY_NS before now
    _scan(site, records)
    assert not records.used and not (cache / "parsed").exists()


def _cache_file(tmp_path: Path) -> Path:
    site, cache = _site(tmp_path), tmp_path / "cache"
    _scan(site, _load(cache))
    (file,) = (cache / "parsed").iterdir()
    return file


def _damaged(file: Path) -> list[bytes]:
    version, prefix, entries = marshal.loads(file.read_bytes())
    ((path, (ident, value)),) = entries.items()
    paths, hashes, sizes, problems, _ = value
    return [
        b"\x00garbage",
        b"",
        marshal.dumps((version + 1, prefix, entries)),
        marshal.dumps((version, "/another/prefix", entries)),
        marshal.dumps((version, prefix, [entries])),
        marshal.dumps((version, prefix, {path: (ident[:4], value)})),
        marshal.dumps((version, prefix, {path: (ident, value[:4])})),
        marshal.dumps((version, prefix, {path: (ident, (paths, hashes, sizes[:-1], (), None))})),
        marshal.dumps(
            (version, prefix, {path: (ident, ((1,) * len(paths), hashes, sizes, (), None))})
        ),
        marshal.dumps(
            (version, prefix, {path: (ident, (paths, hashes, sizes, ((1, 2, 3),), None))})
        ),
        marshal.dumps(
            (version, prefix, {path: (ident, (paths, hashes, sizes, problems, (b"x",)))})
        ),
    ]


def test_a_damaged_or_foreign_cache_file_is_ignored(tmp_path: Path) -> None:
    file = _cache_file(tmp_path)
    site = SiteDir(str(tmp_path / "site"), str(tmp_path))
    plain = _scan(site, None)
    for damaged in _damaged(file):
        file.write_bytes(damaged)
        assert _scan(site, _load(tmp_path / "cache")) == plain


def test_an_oversized_or_odd_cache_file_is_not_read(tmp_path: Path) -> None:
    file = _cache_file(tmp_path)
    site = SiteDir(str(tmp_path / "site"), str(tmp_path))
    with open(file, "r+b") as handle:
        handle.truncate(MAX_CACHE_BYTES + 1)  # sparse: nothing is written
    assert _load(tmp_path / "cache").entries == {}
    file.unlink()
    os.mkfifo(file)  # a FIFO in its place: opened without waiting, refused
    assert _load(tmp_path / "cache").entries == {}
    assert _scan(site, _load(tmp_path / "cache")) == _scan(site, None)


def test_a_cache_that_cannot_be_written_costs_only_time(tmp_path: Path) -> None:
    site = _site(tmp_path)
    blocker = tmp_path / "cache"
    blocker.write_bytes(b"a file where the cache dir would be")
    assert _scan(site, _load(blocker)) == _scan(site, None)
    assert blocker.read_bytes() == b"a file where the cache dir would be"
