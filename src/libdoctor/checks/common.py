"""What the file checks share: does the disk hold a claim's bytes, and how findings say so.

``judge`` compares a claim's size and (with --deep digests) hash with the disk. ``ref``,
``_severity``, ``_about`` and ``_repair`` word and repair a finding about a distribution,
informing only (and naming the system package manager) for distro-managed ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from libdoctor.disk.stat import Disk, FileState
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.installers import reinstall_fix
from libdoctor.environment.model import Claim, Environment
from libdoctor.findings import DistRef, Fix, Severity

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


def ref(dist: Distribution) -> DistRef:
    return DistRef(dist.name, dist.version)


_EXTERNAL = (
    " It was not installed by pip, uv or conda (no INSTALLER file): a system package "
    "manager owns it and may patch its files on purpose; repair it through that manager."
)


def _severity(dists: Sequence[Distribution], severity: Severity) -> Severity:
    """Findings about distro-managed distributions only inform: their state is the distro's."""
    return Severity.INFO if all(d.external for d in dists) else severity


def _repair(dist: Distribution, env: Environment, note: str = "") -> Fix | None:
    return None if dist.external else reinstall_fix(dist, env.target, note=note)


def _about(dist: Distribution, message: str) -> str:
    return message + _EXTERNAL if dist.external else message


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def _are(n: int) -> str:
    return "is" if n == 1 else "are"


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
