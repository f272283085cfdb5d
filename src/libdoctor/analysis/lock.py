"""One run of ``libdoctor verify --lock``: read the lock, select what applies to the target,
model the environment (hashing with ``--deep``) and compare, returned as a value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor.analysis.run import CheckOptions, compute_digests, model_and_states
from libdoctor.checks.lock import LockCheck, check_lock
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.requirements import marker_environment
from libdoctor.environment.target import Target
from libdoctor.external.lockfile import Lock, Selection, read_lock
from libdoctor.external.lockselect import SyncOptions, select

if TYPE_CHECKING:
    from libdoctor.disk.hashing import ProgressFactory


@dataclass(frozen=True, slots=True)
class LockReport:
    target: Target
    lock: Lock
    selection: Selection
    markers: dict[str, str]  # what the lock's markers were evaluated with
    check: LockCheck
    distributions: int
    files: int
    hashing: dict[str, int] | None = None


def verify_lock(
    target: Target,
    lock_path: str,
    options: CheckOptions,
    progress: ProgressFactory | None = None,
    sync: SyncOptions | None = None,
    allow_includes: Sequence[str] = (),
) -> LockReport:
    """TARGET against the lock at LOCK_PATH, as synced with SYNC (``uv sync``'s flags);
    ``LockfileError`` when it cannot be verified (unreadable, malformed, too large, a lock
    for other Pythons or platforms, options that do not fit it). A requirements lock's
    ``-r`` includes may come from its directory tree and ALLOW_INCLUDES."""
    lock = read_lock(lock_path, allow_includes)
    markers = marker_environment(target)
    selection = select(lock, markers, sync)
    disk = RealDisk()
    env, states = model_and_states(target, disk, deep=options.deep)
    digests, hashing = None, None
    if options.deep:
        digests, stats = compute_digests(env, disk, options, progress, states)
        hashing = stats.as_dict()
    found = check_lock(env, disk, lock, selection, digests)
    return LockReport(
        target=target,
        lock=lock,
        selection=selection,
        markers=markers,
        check=found,
        distributions=len(env.distributions),
        files=len(env.claims),
        hashing=hashing,
    )
