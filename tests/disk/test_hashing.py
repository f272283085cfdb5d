"""The --deep hash cache on real files: keyed by file identity, pruned, never trusted blindly."""

from __future__ import annotations

import hashlib
import marshal
import os
from pathlib import Path

from libdoctor.digests import spell_hash
from libdoctor.disk.hashing import HashCache, HashJob, HashStats, hash_many
from libdoctor.disk.stat import RealDisk


def _jobs(*paths: Path, algorithm: str = "sha256") -> list[HashJob]:
    disk = RealDisk()
    return [HashJob(str(p), algorithm, disk.stat(str(p))) for p in paths]


def _aged(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    os.utime(path, ns=(10**18, 10**18))  # long ago: a just-written file is never cached
    return path


def _run(
    cache_dir: Path, prefix: str, jobs: list[HashJob]
) -> tuple[dict[tuple[str, str], str | None], HashStats]:
    cache = HashCache.load(str(cache_dir), prefix)
    stats = HashStats()
    digests = hash_many(jobs, cache, stats)
    cache.save(prefix)
    return digests, stats


def test_digests_are_spelled_as_record_spells_them(tmp_path: Path) -> None:
    a = _aged(tmp_path / "a", b"hello")
    digests, stats = _run(tmp_path / "cache", str(tmp_path), _jobs(a))
    expected = spell_hash("sha256", hashlib.sha256(b"hello").digest())
    assert digests == {(str(a), "sha256"): expected}
    assert stats.files_hashed == 1 and stats.bytes_hashed == 5


def test_a_hard_link_is_the_same_file_and_is_not_read_again(tmp_path: Path) -> None:
    a = _aged(tmp_path / "a", b"shared bytes")
    b = tmp_path / "b"
    os.link(a, b)
    _, first = _run(tmp_path / "cache", str(tmp_path), _jobs(a))
    digests, second = _run(tmp_path / "cache", str(tmp_path), _jobs(a, b))
    assert first.files_hashed == 1
    assert second.files_hashed == 0 and second.cache_hits == 2
    assert digests[(str(a), "sha256")] == digests[(str(b), "sha256")]


def test_entries_of_files_gone_are_pruned(tmp_path: Path) -> None:
    a = _aged(tmp_path / "a", b"a")
    b = _aged(tmp_path / "b", b"b")
    _run(tmp_path / "cache", str(tmp_path), _jobs(a, b))
    assert len(HashCache.load(str(tmp_path / "cache"), str(tmp_path)).entries) == 2
    b.unlink()
    _, stats = _run(tmp_path / "cache", str(tmp_path), _jobs(a))
    assert stats.cache_hits == 1
    assert len(HashCache.load(str(tmp_path / "cache"), str(tmp_path)).entries) == 1


def test_a_rewrite_that_puts_the_size_and_mtime_back_is_hashed_again(tmp_path: Path) -> None:
    """Same size, same inode, the mtime put back (``touch -r``, ``cp -p`` into the file):
    what --deep is for. The ctime moved, so the cached digest is not served."""
    a = _aged(tmp_path / "a", b"the bytes installed")
    _run(tmp_path / "cache", str(tmp_path), _jobs(a))
    before = os.stat(a)
    while os.stat(a).st_ctime_ns == before.st_ctime_ns:  # a coarse clock: the next tick
        with open(a, "r+b") as handle:
            handle.write(b"THE BYTES ALTERED!!")
        os.utime(a, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(a)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino, before.st_size, before.st_mtime_ns
    )  # fmt: skip
    digests, stats = _run(tmp_path / "cache", str(tmp_path), _jobs(a))
    assert stats.cache_hits == 0 and stats.files_hashed == 1
    altered = spell_hash("sha256", hashlib.sha256(b"THE BYTES ALTERED!!").digest())
    assert digests[(str(a), "sha256")] == altered


def test_another_algorithm_is_not_served_from_the_cache(tmp_path: Path) -> None:
    a = _aged(tmp_path / "a", b"a")
    _run(tmp_path / "cache", str(tmp_path), _jobs(a))
    digests, stats = _run(tmp_path / "cache", str(tmp_path), _jobs(a, algorithm="sha512"))
    assert stats.files_hashed == 1 and stats.cache_hits == 0
    assert digests[(str(a), "sha512")] == spell_hash("sha512", hashlib.sha512(b"a").digest())


def test_a_damaged_or_foreign_cache_file_is_ignored(tmp_path: Path) -> None:
    a = _aged(tmp_path / "a", b"a")
    cache_dir = tmp_path / "cache"
    _run(cache_dir, str(tmp_path), _jobs(a))
    (file,) = (cache_dir / "hashes").iterdir()
    version, prefix, entries = marshal.loads(file.read_bytes())
    poisoned = {key: b"not a spelled digest" for key in entries}
    for damaged in (b"\x00garbage", marshal.dumps((version, prefix, poisoned))):
        file.write_bytes(damaged)
        assert HashCache.load(str(cache_dir), str(tmp_path)).entries == {}
        digests, stats = _run(cache_dir, str(tmp_path), _jobs(a))
        assert stats.files_hashed == 1
        assert digests[(str(a), "sha256")] == spell_hash("sha256", hashlib.sha256(b"a").digest())


def test_an_unreadable_file_is_none_and_counted(tmp_path: Path) -> None:
    a = _aged(tmp_path / "a", b"a")
    jobs = _jobs(a)
    a.unlink()  # gone between the stat and the read
    digests, stats = _run(tmp_path / "cache", str(tmp_path), jobs)
    assert digests == {(str(a), "sha256"): None}
    assert stats.errors == 1 and stats.files_hashed == 0


def test_a_cache_file_another_user_could_write_is_ignored(tmp_path: Path) -> None:
    """In a shared ``--cache-dir`` a digest another user wrote could say an altered file
    is intact: a file this user does not own, or that others may write, is not read."""
    a = _aged(tmp_path / "a", b"a")
    cache_dir = tmp_path / "cache"
    _run(cache_dir, str(tmp_path), _jobs(a))
    (file,) = (cache_dir / "hashes").iterdir()
    file.chmod(0o666)
    assert HashCache.load(str(cache_dir), str(tmp_path)).entries == {}
    _, stats = _run(cache_dir, str(tmp_path), _jobs(a))
    assert stats.files_hashed == 1
    file.unlink()
    os.mkfifo(file)  # never blocks on it
    assert HashCache.load(str(cache_dir), str(tmp_path)).entries == {}
