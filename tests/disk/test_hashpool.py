"""The hashing pool against its reference: the same digests as one file after the other."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from libdoctor.disk.hashing import HashCache, HashJob, HashStats, hash_many
from libdoctor.disk.hashpool import (
    CHUNK,
    digest_in_threads,
    digest_one_by_one,
    largest_first,
)
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.record import spell_hash

# Around every boundary the readers have: empty, hashlib's GIL release (2 KiB), the chunk.
SIZES = (0, 1, 2047, 2048, 2049, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 7)
ALGORITHMS = ("sha256", "sha512", "md5", "blake2b")  # the last: through hashlib.new


def _jobs(tmp_path: Path) -> list[HashJob]:
    disk = RealDisk()
    jobs = []
    for number, size in enumerate(SIZES):
        path = tmp_path / f"f{number}"
        path.write_bytes(os.urandom(size))
        for algorithm in ALGORITHMS:
            jobs.append(HashJob(str(path), algorithm, disk.stat(str(path))))
    gone = tmp_path / "gone"
    gone.write_bytes(b"x")
    state = disk.stat(str(gone))
    gone.unlink()  # stat'ed, then gone before it is read
    jobs.append(HashJob(str(gone), "sha256", state))
    jobs.append(HashJob(str(tmp_path), "sha256", disk.stat(str(tmp_path))))  # a directory
    fifo = tmp_path / "fifo"  # swapped in after a stat: fails, never blocks
    os.mkfifo(fifo)
    jobs.append(HashJob(str(fifo), "sha256", state))
    return jobs


def _expected(job: HashJob) -> str | None:
    try:
        data = Path(job.path).read_bytes() if Path(job.path).is_file() else None
    except OSError:
        data = None
    return (
        None
        if data is None
        else spell_hash(job.algorithm, hashlib.new(job.algorithm, data).digest())
    )


@pytest.mark.parametrize("workers", [2, 5])
def test_the_pool_gives_the_reference_digests(tmp_path: Path, workers: int) -> None:
    jobs = _jobs(tmp_path)
    largest_first(jobs)
    done: list[int] = []
    threaded = digest_in_threads(jobs, workers, done.append)
    assert threaded == digest_one_by_one(jobs) == [_expected(job) for job in jobs]
    assert sum(done) == sum(job.state.size for job in jobs)  # the progress bar saw it all
    assert threaded.count(None) == 3


def test_hash_many_on_one_worker_equals_the_pool(tmp_path: Path) -> None:
    """--workers 1 is the reference, in the calling thread: the same digests and counts."""
    jobs = _jobs(tmp_path)
    runs = []
    for workers in (1, 2):
        stats = HashStats()
        runs.append((hash_many(jobs, HashCache(None), stats, workers=workers), stats))
    (one, one_stats), (pool, pool_stats) = runs
    assert one == pool and one_stats == pool_stats
    assert pool_stats.errors == 3 and pool_stats.files_hashed == len(jobs) - 3
    assert pool_stats.bytes_hashed == sum(SIZES) * len(ALGORITHMS)
