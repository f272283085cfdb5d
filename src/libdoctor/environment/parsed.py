"""Parsed files kept between runs: the cache of ``check``'s parsing, in one place.

A torch env's 30 RECORDs take ~40 ms to parse and a few to load parsed; its ELF files'
dynamic sections are read again on every run. ``ParsedFiles`` keeps each value by its file's
path and identity, ``(size, mtime_ns, inode, ctime_ns, device)`` from a stat of the open
file, and hands it out only while the file still has that identity: any write, rename,
``chmod`` or ``touch`` changes the ctime at least, and then the file is parsed again.

Never trusted for a file changed within ``RACY_NS`` of the run that stored it (git's "racy
clean" problem: a same-size rewrite within the file system's timestamp granularity keeps
the identity): such a file is simply not stored, and parsed again next run. Nothing is
decided from the cache: it holds what the parsers return, the parsers run unchanged on a
miss, and with no cache dir (``--no-cache``) every file is parsed, the reference the tests
compare it with.

The cache file is untrusted input too: bounded (``MAX_CACHE_BYTES``), marshal'd plain values
whose every field is type-checked where it is turned back into a value (``record_of``); a
damaged, foreign or outdated file is ignored, never an error, and so is one that another
user owns or could have written (group- or world-writable). It lives in the user's cache
dir (``$LIBDOCTOR_CACHE_DIR``, ``$XDG_CACHE_HOME/libdoctor``), never inside the target, one
file per target and part (``parsed/<key>.records``), written atomically.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from itertools import repeat
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where RECORDs are turned into values: a reused check needs none
    from libdoctor.environment.record import ParsedRecord

__all__ = [
    "MAX_CACHE_BYTES",
    "RACY_NS",
    "RECORDS",
    "ParsedFiles",
    "cache_file",
    "identity",
    "read_bounded",
    "record_of",
    "record_value",
    "write_atomic",
]

_VERSION = 1
RACY_NS = 2_000_000_000  # the coarsest timestamp granularity in use (FAT: 2 s)
# Far beyond a real one (a torch env's RECORDs: 1.8 MB marshal'd): what a damaged or hostile
# cache file may make libdoctor read.
MAX_CACHE_BYTES = 256 << 20
RECORDS = "records"  # the part holding parsed RECORDs

Identity = tuple[int, int, int, int, int]


def identity(st: os.stat_result) -> Identity:
    """What a cached value is keyed by beside its path: it is the same file while these hold."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_dev)


def cache_file(cache_dir: str, prefix: str, part: str) -> str:
    """Where PART of PREFIX's cache is kept in CACHE_DIR."""
    try:
        from _blake2 import blake2b  # hashlib's own, without OpenSSL's set-up (3 ms)
    except ImportError:
        from hashlib import blake2b
    key = blake2b(os.fsencode(prefix), digest_size=12).hexdigest()
    return os.path.join(cache_dir, "parsed", f"{key}.{part}")


def read_bounded(file: str) -> bytes | None:
    """FILE's bytes if it is a regular file of at most ``MAX_CACHE_BYTES``, owned by this
    user and writable by no one else (``write_atomic`` writes 0600), else None."""
    from libdoctor.bounded import InputRefused, read_file

    try:
        return read_file(file, MAX_CACHE_BYTES, own=True)
    except (OSError, InputRefused):
        return None


@dataclass(slots=True)
class ParsedFiles:
    """One part of the cache: path -> (identity, value), values as the part's reader wrote
    them (plain marshal-able data). Only what this run looked up or stored is saved, so
    files gone from the target drop out."""

    file: str | None  # None: no cache (nothing read, nothing written)
    prefix: str = ""
    entries: dict[str, tuple[Identity, Any]] = field(default_factory=dict)
    settled_ns: int = 0  # files changed after this are not stored (racy)
    used: dict[str, tuple[Identity, Any]] = field(default_factory=dict)
    dirty: bool = False

    @classmethod
    def load(
        cls, cache_dir: str | None, prefix: str, part: str, *, settled_ns: int | None = None
    ) -> ParsedFiles:
        """PART of PREFIX's cache in CACHE_DIR (None: a cache that holds nothing). SETTLED_NS:
        files changed after it are not stored (default: ``RACY_NS`` before now)."""
        settled = time.time_ns() - RACY_NS if settled_ns is None else settled_ns
        if cache_dir is None:
            return cls(None, prefix, settled_ns=settled)
        file = cache_file(cache_dir, prefix, part)
        return cls(file, prefix, _entries(read_bounded(file), prefix), settled)

    def get(self, path: str, st: os.stat_result) -> Any:
        """The value stored for PATH if the file is still the one parsed, else None."""
        found = self.entries.get(path)
        if found is None or found[0] != identity(st):
            return None
        self.used[path] = found
        return found[1]

    def put(self, path: str, st: os.stat_result, value: Any) -> None:
        """Keep VALUE, parsed from PATH as it was at ST (taken before it was read), unless
        the file changed too recently to be told apart from a later change (or its file
        system keeps no times: a zero would never move)."""
        if self.file is None or max(st.st_mtime_ns, st.st_ctime_ns) > self.settled_ns:
            return
        if st.st_mtime_ns <= 0 or st.st_ctime_ns <= 0:
            return
        self.used[path] = (identity(st), value)
        self.dirty = True

    def save(self) -> None:
        """Write what this run used, if it differs from what was loaded; atomically (a
        temp file renamed), so a concurrent reader sees the old file or the new."""
        if self.file is None or not (self.dirty or self.used.keys() != self.entries.keys()):
            return
        import marshal

        write_atomic(self.file, marshal.dumps((_VERSION, self.prefix, self.used)))


def write_atomic(file: str, data: bytes) -> None:
    """DATA as FILE, atomically (a temp file renamed, mode 0600), so a concurrent reader
    sees the old file or the new; a cache that cannot be written only costs time."""
    import contextlib
    import tempfile

    directory = os.path.dirname(file)
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".parsed-", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, file)
    except (OSError, ValueError):
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _entries(data: bytes | None, prefix: str) -> dict[str, tuple[Identity, Any]]:
    """The entries of a cache file's bytes; {} for anything but this version's, PREFIX's."""
    if not data:
        return {}
    import marshal

    try:
        loaded = marshal.loads(data)
    except Exception:  # damaged or foreign: start afresh
        return {}
    if not (
        isinstance(loaded, tuple)
        and len(loaded) == 3
        and loaded[0] == _VERSION
        and loaded[1] == prefix
        and isinstance(loaded[2], dict)
    ):
        return {}
    return {
        path: entry
        for path, entry in loaded[2].items()
        if type(path) is str
        and type(entry) is tuple
        and len(entry) == 2
        and type(entry[0]) is tuple
        and len(entry[0]) == 5
        and all(type(n) is int for n in entry[0])
    }


# ------------------------------------------------------------------------------- RECORDs


def record_value(parsed: ParsedRecord) -> tuple[Any, ...]:
    """PARSED as the cache keeps it: columns of plain values (marshal'd in milliseconds)."""
    entries = parsed.entries
    return (
        tuple([e[0] for e in entries]),
        tuple([e[1] for e in entries]),
        tuple([e[2] for e in entries]),
        tuple((p.line, p.text, p.reason) for p in parsed.problems),
        None if parsed.unplain is None else tuple(parsed.unplain),
    )


def record_of(value: Any) -> ParsedRecord | None:
    """The ParsedRecord a cached VALUE holds; None unless every field has its type."""
    from libdoctor.environment.record import ParsedRecord, RecordEntry, RecordProblem

    if not (type(value) is tuple and len(value) == 5):
        return None
    paths, hashes, sizes, problems, unplain = value
    if not (
        type(paths) is tuple
        and type(hashes) is tuple
        and type(sizes) is tuple
        and len(paths) == len(hashes) == len(sizes)
        and set(map(type, paths)) <= {str}
        and set(map(type, hashes)) <= {str, type(None)}
        and set(map(type, sizes)) <= {int, type(None)}
        and type(problems) is tuple
        and all(_is_problem(p) for p in problems)
        and (unplain is None or (type(unplain) is tuple and set(map(type, unplain)) <= {str}))
    ):
        return None
    # RecordEntry(...) per row without the Python-level __new__ frame: 22k rows here
    entries = tuple(map(tuple.__new__, repeat(RecordEntry), zip(paths, hashes, sizes, strict=True)))
    return ParsedRecord(
        entries,
        tuple(RecordProblem(*p) for p in problems),
        None if unplain is None else frozenset(unplain),
    )


def _is_problem(value: Any) -> bool:
    return (
        type(value) is tuple
        and len(value) == 3
        and type(value[0]) is int
        and type(value[1]) is str
        and type(value[2]) is str
    )
