"""File hashing with a persistent cache outside the target.

What the cache does not hold is read by a pool of workers (``disk.hashpool``). The cache is
keyed by (path, size, mtime_ns, inode, ctime_ns): an unchanged environment re-verifies without
reading a byte. It lives in the user's cache dir, never inside the target. Inside a
``--root`` each file is opened where the system there would find it (``environment.rooted``).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from libdoctor.disk.stat import FileState
from libdoctor.environment.rooted import Rooted

_CACHE_VERSION = 5  # 4: keyed by file identity, digests spelled as in RECORD; 5: ctime too
_RACY_NS = 2_000_000_000
NATIVE_PART = "native"  # the cache's part for shared objects, read by check's forked child


def default_cache_dir(environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    explicit = env.get("LIBDOCTOR_CACHE_DIR")
    if explicit:
        return explicit
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "libdoctor")


# Called once with the count and total bytes of the files to read; returns the function
# called with each chunk of bytes done.
ProgressFactory = Callable[[int, int], Callable[[int], None]]


class HashJob(NamedTuple):
    """One file to digest. A NamedTuple: one per recorded file on every --deep run."""

    path: str
    algorithm: str
    state: FileState


@dataclass(slots=True)
class HashStats:
    files_hashed: int = 0
    cache_hits: int = 0
    bytes_hashed: int = 0
    errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


def _blake2b(chunks: Iterable[bytes]) -> bytes:
    """BLAKE2b-256 of the CHUNKS, consumed one by one, from the module hashlib takes it
    from: importing hashlib sets up OpenSSL (3 ms), more than re-verifying an unchanged env."""
    try:
        from _blake2 import blake2b
    except ImportError:  # an interpreter without it: hashlib's is the same function
        from hashlib import blake2b
    digest = blake2b(digest_size=32)
    for chunk in chunks:
        digest.update(chunk)
    return digest.digest()


def _cache_file(cache_dir: str, prefix: str, kind: str) -> str:
    key = _blake2b([os.fsencode(prefix)]).hex()[:24]
    return os.path.join(cache_dir, "hashes", f"{key}.{kind}")


def _load(cache_dir: str | None, prefix: str, kind: str) -> tuple[str | None, Any]:
    """(the cache file of KIND for PREFIX, its payload or None: missing, damaged, foreign);
    no file without CACHE_DIR."""
    if cache_dir is None:
        return None, None
    import marshal

    from libdoctor.environment.parsed import read_bounded

    file = _cache_file(cache_dir, prefix, kind)
    raw = read_bounded(file)  # bounded, never a FIFO, only this user's and only its writing
    try:
        data = marshal.loads(raw) if raw is not None else None  # load(file): 5x slower
    except Exception:  # our own file, but damaged or foreign: start afresh
        return file, None
    if isinstance(data, tuple) and len(data) == 3 and data[:2] == (_CACHE_VERSION, prefix):
        return file, data[2]
    return file, None


def _save(file: str, prefix: str, payload: Any) -> None:
    """Written atomically, as the parsed-file cache is (``parsed.write_atomic``)."""
    import marshal

    from libdoctor.environment.parsed import write_atomic

    write_atomic(file, marshal.dumps((_CACHE_VERSION, prefix, payload)))


def _identity(st: FileState) -> tuple[int, int, int, int, int]:
    """What the hash cache keys a file by: it is the same bytes while these hold (ctime
    too: an edit in place whose mtime was put back, ``cp -p``, still moves it). The racy
    rule stays on mtime: a ctime cannot be put back, so a file aged by its mtime alone is
    still cached; what is left open is two same-size edits within one ctime tick with the
    mtime put back after each."""
    return (st.device, st.inode, st.size, st.mtime_ns, st.ctime_ns)


@dataclass(slots=True)
class HashCache:
    """Digests keyed by file identity and version: (device, inode, size, mtime_ns, ctime_ns).

    An entry counts only while all five still match; the value is the digest spelled as
    RECORD spells it, algorithm included. No path in the key: a hard link is the same
    bytes, and a cache of 16k (path, ...) rows took 3x longer to load.
    """

    file: str | None
    entries: dict[tuple[int, int, int, int, int], str] = field(default_factory=dict)
    dirty: bool = False

    @classmethod
    def load(cls, cache_dir: str | None, prefix: str, part: str = "marshal") -> HashCache:
        """The cache of PREFIX, or a PART of it (see part()): marshal, read in milliseconds
        (JSON took 3x)."""
        file, entries = _load(cache_dir, prefix, part)
        if isinstance(entries, dict) and set(map(type, entries.values())) <= {str}:
            return cls(file, entries)  # every value a str: what lookups hand out
        return cls(file)

    def get(self, job: HashJob) -> str | None:
        """The cached digest of JOB's file, if the file is still the one hashed."""
        digest = self.entries.get(_identity(job.state))
        if digest is not None and digest.partition("=")[0] == job.algorithm:
            return digest
        return None

    def keep(self, jobs: Iterable[HashJob], digests: Mapping[tuple[str, str], str | None]) -> None:
        """From now on hold exactly the digests of JOBS: files gone or changed drop out."""
        racy = racy_ns()
        entries = {}
        for path, algorithm, st in jobs:
            digest = digests.get((path, algorithm))
            if digest is not None and st.mtime_ns <= racy:
                entries[_identity(st)] = digest
        if entries != self.entries:
            self.entries, self.dirty = entries, True

    def part(self, jobs: Iterable[HashJob], name: str, wanted: Callable[[str], bool]) -> HashCache:
        """The entries of those JOBS whose path is WANTED, as the cache part NAME: a small
        file for a reader that needs only those (a forked child and its shared objects)."""
        entries = {}
        for path, _, st in jobs:
            key = _identity(st)
            if wanted(path) and key in self.entries:
                entries[key] = self.entries[key]
        file = None if self.file is None else self.file.rpartition(".")[0] + "." + name
        return HashCache(file, entries, dirty=True)

    def save(self, prefix: str) -> None:
        if self.file is not None and self.dirty:
            _save(self.file, prefix, self.entries)


def fingerprint(states: Sequence[FileState], records: Sequence[tuple[str, FileState]]) -> bytes:
    """BLAKE2b-256 of file identities: every claimed file's state, in order, and each RECORD's
    (as ``(metadata dir, state)``), which decides what is claimed with which hash. Their
    contents are what the identities vouch for, as in HashCache. Marshal version 2 of
    plain tuples, 4 ms for a torch env, in slices: one 2 MB serialisation would cost more
    in fresh memory than in CPU."""
    import marshal

    def chunks(step: int = 2048) -> Iterator[bytes]:
        yield marshal.dumps([(meta, tuple(state)) for meta, state in records], 2)
        for start in range(0, len(states), step):
            yield marshal.dumps(list(map(tuple, states[start : start + step])), 2)

    return _blake2b(chunks())


def modified_since(racy_ns: int, states: Iterable[FileState]) -> bool:
    return any(state.mtime_ns > racy_ns for state in states)


def racy_ns() -> int:
    """Files modified after this are never trusted from a cache: a same-size rewrite within
    the file system's timestamp granularity would keep the file's identity and fool it
    (git's "racy clean" problem). Such a file is simply hashed again next time."""
    return time.time_ns() - _RACY_NS


@dataclass(slots=True)
class Unchanged:
    """The hash cache's shortcut for an environment unchanged since the last --deep run.

    It holds that run's fingerprint and the digests that differed from RECORD then. The
    same fingerprint now means the same RECORD files and the same files at the same
    identities: every other digest is its RECORD hash, without a per-file lookup.
    """

    file: str | None
    fingerprint: bytes = b""
    differing: dict[tuple[str, str], str] = field(default_factory=dict)
    files: int = 0  # how many digests that makes

    @classmethod
    def load(cls, cache_dir: str | None, prefix: str) -> Unchanged:
        file, data = _load(cache_dir, prefix, "unchanged")
        if (
            isinstance(data, tuple)
            and len(data) == 3
            and isinstance(data[0], bytes)
            and isinstance(data[1], dict)
            and set(map(type, data[1].values())) <= {str}
            and isinstance(data[2], int)
        ):
            return cls(file, data[0], data[1], data[2])
        return cls(file)

    def holds(self, fingerprint: bytes) -> bool:
        """The environment fingerprints as at the last run: every digest is its RECORD
        hash, but for ``differing``."""
        return bool(self.file and self.fingerprint) and fingerprint == self.fingerprint

    def save(self, prefix: str) -> None:
        if self.file is not None:
            _save(self.file, prefix, (self.fingerprint, self.differing, self.files))


def hash_file(path: str, algorithm: str) -> bytes:
    """The digest of PATH, one file (many: ``hashpool``, which reuses its buffer)."""
    from libdoctor.disk.hashpool import CHUNK, digest_file

    buffer = bytearray(CHUNK)
    return digest_file(path, algorithm, buffer, memoryview(buffer))


def hash_many(
    jobs: Sequence[HashJob],
    cache: HashCache,
    stats: HashStats,
    *,
    workers: int | None = None,
    progress: ProgressFactory | None = None,
    root: str = "/",
) -> dict[tuple[str, str], str | None]:
    """Digest every job's file, spelled as RECORD spells it; None: it could not be read.

    Keys are (path, algorithm). What the cache does not hold is read by WORKERS workers
    (default: the cores this process may use; 1: one by one, in this thread), largest file
    first (``disk.hashpool``). PROGRESS is started only when some file must be read. ROOT:
    the system the paths are read in (``--root``)."""
    from libdoctor.disk import hashpool

    results: dict[tuple[str, str], str | None] = {}
    entries = cache.entries
    if entries:
        todo: list[HashJob] = []
        for job in jobs:
            path, algorithm, st = job
            # HashCache.get and _identity, inlined: one lookup per recorded file (16k here)
            digest = entries.get((st.device, st.inode, st.size, st.mtime_ns, st.ctime_ns))
            if digest is not None and digest.partition("=")[0] == algorithm:
                results[(path, algorithm)] = digest
            else:
                todo.append(job)
    else:  # a cold run (or --no-cache): nothing to look up
        todo = list(jobs)
    stats.cache_hits += len(results)
    hashpool.largest_first(todo)
    sizes = [job.state.size for job in todo]
    start = None
    if progress and todo:
        factory = progress

        def start() -> Callable[[int], None]:
            return factory(len(todo), sum(sizes))

    threads = min(workers or hashpool.available_cores(), len(todo))
    rooted = Rooted(root)
    host = None if rooted.is_host else rooted.host
    if threads > 1:
        values = hashpool.digest_in_pool(todo, threads, start, host)
    else:
        values = hashpool.digest_one_by_one(todo, start, host)
    results.update(zip(map(hashpool.KEY, todo), values, strict=True))
    errors = values.count(None)
    stats.errors += errors
    stats.files_hashed += len(todo) - errors
    stats.bytes_hashed += sum(s for s, v in zip(sizes, values, strict=True) if v is not None)
    if cache.file is not None and (todo or len(entries) != len(results)):
        cache.keep(jobs, results)
    return results
