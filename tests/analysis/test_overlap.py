"""``analysis.overlap``: the small model its forked child checks, and where that child's
--deep digests come from: the hash cache's native part while the file is still the one that
was hashed (no waiting on the parent), else the parent's, once sent.

That the overlapped ``check`` equals the plain one is ``tests/checks/test_stack.py``'s.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from libdoctor.analysis.fork import Later
from libdoctor.analysis.overlap import CacheFirst, native_model
from libdoctor.checks.verdict import Digests
from libdoctor.disk.hashing import NATIVE_PART, HashCache, HashJob, HashStats, hash_many
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.model import build_environment
from libdoctor.environment.paths import NATIVE_ROWS
from support.dists import env_of
from support.libchain import ChainEnv
from support.wheels import record_hash

TARGET = env_of().target


def test_the_native_model_has_every_distribution_and_only_shared_object_rows(
    chain_env: ChainEnv,
) -> None:
    target = chain_env.target
    full, native = build_environment(target), native_model(target)
    assert [d.key for d in native.distributions] == [d.key for d in full.distributions]
    assert set(native.claims) == {p for p in full.claims if NATIVE_ROWS in p}
    assert str(chain_env.libs / "libmid.so.1") in native.claims
    assert len(native.claims) < len(full.claims)


def aged(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    os.utime(path, ns=(10**18, 10**18))  # long ago: a just-written file is never cached
    return path


@pytest.fixture
def cached(tmp_path: Path) -> tuple[str, Path, Path]:
    """(the cache dir, a library hashed into its native part, a file hashed into neither)."""
    lib = aged(tmp_path / "libhashed.so.1", b"hashed before")
    text = aged(tmp_path / "notes.txt", b"not a shared object")
    disk = RealDisk()
    jobs = [HashJob(str(p), "sha256", disk.stat(str(p))) for p in (lib, text)]
    cache_dir = str(tmp_path / "cache")
    cache = HashCache.load(cache_dir, TARGET.prefix)
    hash_many(jobs, cache, HashStats())
    cache.save(TARGET.prefix)
    cache.part(jobs, NATIVE_PART, lambda path: NATIVE_ROWS in path).save(TARGET.prefix)
    return cache_dir, lib, text


def test_a_file_still_as_hashed_is_read_from_the_cache_without_waiting(
    cached: tuple[str, Path, Path],
) -> None:
    cache_dir, lib, _ = cached
    sent: Later[Digests] = Later()
    sent.forked(child=True)  # as the child sees it: nothing was sent, nothing will be
    digests = CacheFirst(cache_dir, TARGET, sent)
    assert digests[(str(lib), "sha256")] == record_hash(b"hashed before")


def test_what_the_native_part_lacks_is_the_parent_s(cached: tuple[str, Path, Path]) -> None:
    """A file not in the part, and one changed since it was hashed: the parent's digests."""
    cache_dir, lib, text = cached
    aged(lib, b"changed after")  # same size and times: the inode's ctime tells
    parents = {(str(lib), "sha256"): "sha256=from-the-parent", (str(text), "sha256"): None}
    sent: Later[Digests] = Later()
    sent.set(parents, {})  # no child: the value is kept here
    digests = CacheFirst(cache_dir, TARGET, sent)
    assert digests[(str(lib), "sha256")] == "sha256=from-the-parent"
    assert digests[(str(text), "sha256")] is None
    assert set(digests) == set(parents) and len(digests) == 2
