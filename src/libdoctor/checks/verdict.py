"""Does the disk hold a claim's bytes? Sizes always, hashes when --deep read them.

``judge`` compares a claim's size and (with digests) hash with the disk; ``Digests`` is how
the hashing stage hands its results over, and ``RecordDigests`` answers for an environment
the hash cache vouches is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from libdoctor.disk.stat import Disk, FileState
from libdoctor.environment.model import Claim, Environment

# (path, algorithm) -> the file's digest spelled as RECORD spells it ("sha256=<b64>"), so a
# comparison is one string equality; None: the file could not be read.
Digests = Mapping[tuple[str, str], "str | None"]


class RecordDigests(Mapping[tuple[str, str], "str | None"]):
    """Digests equal to what RECORD says, but for DIFFERING: an environment the hash cache
    vouches is unchanged since a run that read it all (hashing.Unchanged). Answered from
    the claims on demand, instead of a dict of 16k entries that says the same."""

    def __init__(
        self, env: Environment, disk: Disk, differing: Mapping[tuple[str, str], str]
    ) -> None:
        self.env = env
        self.disk = disk
        self.differing = differing

    def __getitem__(self, key: tuple[str, str]) -> str | None:
        found = self.differing.get(key)
        if found is not None:
            return found
        path, algorithm = key
        state = self.disk.stat(path)
        if state.is_file and state.error is None:
            for claim in self.env.claims.get(path, ()):
                expected = claim.entry.hash
                if expected is not None and expected.partition("=")[0] == algorithm:
                    return expected
        raise KeyError(key)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for path, claims in self.env.claims.items():
            algorithms = {c.entry.hash.partition("=")[0] for c in claims if c.entry.hash}
            state = self.disk.stat(path)
            if algorithms and state.is_file and state.error is None:
                yield from ((path, algorithm) for algorithm in sorted(algorithms))

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Does the disk hold the bytes a claim describes? ``matches`` None: cannot tell."""

    matches: bool | None
    decided_by: str | None  # "size" | "hash" | None
    actual_size: int
    actual_hash: str | None = None


def actual_hash(path: str, expected: str, digests: Digests) -> str | None:
    """The disk's digest of PATH spelled like EXPECTED (``algo=b64``), if it was hashed."""
    return digests.get((path, expected[: expected.index("=")]))


def judge(claim: Claim, state: FileState, digests: Digests | None) -> Verdict:
    entry = claim.entry
    if entry.size is not None and state.size != entry.size:
        return Verdict(False, "size", state.size)
    if digests is not None and entry.hash is not None:
        actual = actual_hash(claim.path, entry.hash, digests)
        if actual is not None:
            same = actual == entry.hash
            return Verdict(same, "hash", state.size, None if same else actual)
    if entry.size is not None:
        return Verdict(True, "size", state.size)
    return Verdict(None, None, state.size)
