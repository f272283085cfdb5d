"""Paths claimed by more than one distribution: who owns the bytes on disk, what to keep.

Codes: shared-path (different contents: an install overwrote another's files, and uninstalling
either deletes them for both), shared-path-identical (same contents; info only).

The fix keeps one claimant, chosen by evidence, in this order: the one the environment
requires (its installed distributions' requirements, through the extras they are installed
with); the one built for the CUDA major of an installed framework; the one conda package
among pip-installed ones (in a conda prefix pip wrote over conda's file: conda puts it back);
the one whose bytes are on disk. Never the last installed for being last: without evidence
there is no fix.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor.checks.verdict import Digests, judge
from libdoctor.checks.wording import are, plural, severity_for
from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Claim, Environment
from libdoctor.environment.paths import display, is_bytecode
from libdoctor.external.installers import reinstall, uninstall
from libdoctor.findings import Finding, Fix, Severity

if TYPE_CHECKING:  # the keeper's evidence is read only for a finding: off check's start-up
    from libdoctor.environment.requirements import RequirementIndex


def _claims_differ(claims: Sequence[Claim]) -> bool:
    first = claims[0].entry
    for claim in claims[1:]:
        entry = claim.entry
        if first.hash and entry.hash and first.hash != entry.hash:
            return True
        if first.size is not None and entry.size is not None and first.size != entry.size:
            return True
    return False


@dataclass(slots=True)
class _SharedGroup:
    claimants: tuple[Distribution, ...]
    paths: list[str]
    on_disk: dict[str, int]  # metadata_dir -> paths whose bytes match that claimant
    undecided: list[str]
    foreign: list[str]  # present, but matching no claimant
    absent: list[str]
    decided_by: set[str]


@dataclass(frozen=True, slots=True)
class Keeper:
    """The claimant a shared-path fix keeps and the evidence that chose it; or, with no
    ``dist``, why no evidence decides."""

    dist: Distribution | None
    evidence: str | None  # "requirement" | "cuda-build" | "conda-package" | "bytes-on-disk"
    reason: str  # "required by torchlike (cudnn-a==9.1.0)"
    unmet: tuple[str, ...] = ()  # requirements the removal of the others leaves unmet


def shared_paths(
    env: Environment, disk: Disk, digests: Digests | None
) -> tuple[list[Finding], set[str]]:
    """Findings for multiply-claimed paths, and the paths whose bytes are a claimant's."""
    groups: dict[tuple[str, ...], _SharedGroup] = {}
    identical: dict[tuple[str, ...], list[str]] = defaultdict(list)
    identical_claimants: dict[tuple[str, ...], tuple[Distribution, ...]] = {}
    covered: set[str] = set()
    from libdoctor.environment.requirements import RequirementIndex

    # What the model says, read first: the shared claims, and the requirement index (lazy:
    # requirements are parsed only for a finding that chooses what to keep).
    shared = env.shared_claims()
    index = RequirementIndex(env)
    for path, claims in shared.items():
        if is_bytecode(path):
            continue
        dists = tuple({c.dist.metadata_dir: c.dist for c in claims}.values())
        if len(dists) < 2:
            continue
        key = tuple(sorted(d.metadata_dir for d in dists))
        if not _claims_differ(claims):
            identical[key].append(path)
            identical_claimants[key] = dists
            continue
        group = groups.get(key)
        if group is None:
            group = groups[key] = _SharedGroup(dists, [], {}, [], [], [], set())
        group.paths.append(path)
        state = disk.stat(path)
        if not state.exists or state.error:
            group.absent.append(path)
            continue
        verdicts = [(c, judge(c, state, digests)) for c in claims]
        matching = [c for c, v in verdicts if v.matches]
        group.decided_by.update(v.decided_by for _, v in verdicts if v.decided_by)
        if len(matching) == 1:
            owner = matching[0].dist.metadata_dir
            group.on_disk[owner] = group.on_disk.get(owner, 0) + 1
            covered.add(path)
        elif matching:
            group.undecided.append(path)
            covered.add(path)
        else:
            group.foreign.append(path)
    findings = [_shared_finding(env, g, index) for g in groups.values()]
    findings += [
        _identical_finding(identical_claimants[key], paths) for key, paths in identical.items()
    ]
    return findings, covered


def _shared_finding(env: Environment, group: _SharedGroup, index: RequirementIndex) -> Finding:
    n = len(group.paths)
    owner = _bytes_owner(group)
    decided_by = "hash" if "hash" in group.decided_by else ("size" if group.decided_by else None)
    keeper = _choose_keeper(env, group.claimants, owner, index)
    return Finding(
        code="shared-path",
        severity=severity_for(group.claimants, Severity.ERROR),
        message=_shared_message(group, owner, decided_by),
        paths=tuple(sorted(group.paths)),
        evidence={
            "claimants": [
                {
                    "name": d.name,
                    "version": d.version,
                    "on_disk": group.on_disk.get(d.metadata_dir, 0),
                    "required_by": sorted({r.name for r in index.required_by(d)}),
                }
                for d in group.claimants
            ],
            "on_disk_owner": owner.name if owner else None,
            "decided_by": decided_by,
            "undecided": [display(p) for p in group.undecided],
            "match_no_claimant": [display(p) for p in group.foreign],
            "absent": [display(p) for p in group.absent],
            "uninstall_would_delete": {d.name: n for d in group.claimants},
            "keep": {
                "name": keeper.dist.name if keeper.dist else None,
                "version": keeper.dist.version if keeper.dist else None,
                "by": keeper.evidence,
                "reason": keeper.reason,
                "leaves_unmet": list(keeper.unmet),
            },
        },
        fix=_keep_one_fix(env, group.claimants, keeper),
    )


def _bytes_owner(group: _SharedGroup) -> Distribution | None:
    """The claimant whose bytes most of the paths on disk are, if any."""
    if not group.on_disk:
        return None
    best = max(group.on_disk, key=lambda k: group.on_disk[k])
    return next(d for d in group.claimants if d.metadata_dir == best)


def _shared_message(group: _SharedGroup, owner: Distribution | None, decided_by: str | None) -> str:
    names = " and ".join(d.display for d in group.claimants)
    parts = [f"{plural(len(group.paths), 'path')} claimed by {names} with different contents."]
    if owner is not None:
        others = [d.name for d in group.claimants if d is not owner]
        parts.append(
            f"The bytes on disk are {owner.name}'s (by {decided_by}): it overwrote "
            f"{', '.join(others)}'s copy of {plural(group.on_disk[owner.metadata_dir], 'file')}."
        )
    if group.undecided:
        parts.append(
            f"{plural(len(group.undecided), 'file')} could not be told apart by size"
            + ("; run with --deep to compare hashes." if decided_by != "hash" else ".")
        )
    if group.foreign:
        parts.append(f"{plural(len(group.foreign), 'file')} match no claimant.")
    if group.absent:
        gone = len(group.absent)
        parts.append(f"{plural(gone, 'file')} {are(gone)} gone from disk.")
    parts.append(
        "Uninstalling either deletes all of them and leaves the other installed without its files."
    )
    return " ".join(parts)


def _keep_one_fix(
    env: Environment, claimants: Sequence[Distribution], keeper: Keeper
) -> Fix | None:
    """Uninstall every claimant but one, then reinstall that one to restore its files."""
    keep = keeper.dist
    if keep is None:
        return None
    removed = [d for d in claimants if d is not keep]
    note = f"keeps {keep.name}: {keeper.reason}"
    if keeper.unmet:
        note += f"; the uninstall leaves unmet: {', '.join(keeper.unmet)}"
    return Fix(
        (*(uninstall(d, env.target) for d in removed), reinstall(keep, env.target)),
        note=note + "; to keep another instead, swap the names",
    )


def _choose_keeper(
    env: Environment,
    claimants: Sequence[Distribution],
    owner: Distribution | None,
    index: RequirementIndex,
) -> Keeper:
    """The claimant to keep, by evidence: the one the environment requires (through the
    extras it is installed with too); among several (or none), the one built for an
    installed framework's CUDA major; then, if nothing requires more than one, the one whose
    bytes are on disk. Several required and no CUDA build to choose: no keeper, since
    removing any breaks what requires it."""
    wanted = [d for d in claimants if index.required_by(d)]
    if len(wanted) == 1:
        return Keeper(wanted[0], "requirement", f"required by {index.requirers_text(wanted[0])}")
    chosen = _by_cuda_build(env, wanted or claimants)
    if chosen is not None:
        keep, reason = chosen
        unmet = tuple(
            f"{d.name} (required by {index.requirers_text(d)})" for d in wanted if d is not keep
        )
        return Keeper(keep, "cuda-build", reason, unmet)
    if wanted:
        needs = "; ".join(f"{d.name} by {index.requirers_text(d)}" for d in wanted)
        return Keeper(
            None,
            None,
            f"each is required ({needs}): uninstalling any breaks what requires it, and no "
            "installed framework's CUDA build tells which this environment needs",
        )
    conda = [d for d in claimants if d.kind == "conda"]
    if len(conda) == 1:
        return Keeper(
            conda[0],
            "conda-package",
            "the conda package's; the others were installed over it, and conda repairs "
            "its own files",
        )
    if owner is not None:
        return Keeper(owner, "bytes-on-disk", "its bytes are on disk")
    return Keeper(
        None,
        None,
        "nothing installed requires any of them, no installed framework is built for the "
        "CUDA of just one, and the bytes on disk are none of theirs, or not told apart",
    )


def _by_cuda_build(
    env: Environment, candidates: Sequence[Distribution]
) -> tuple[Distribution, str] | None:
    """The one candidate built for the CUDA major of an installed framework, and why."""
    from libdoctor.stack.cuda import cuda_major_of
    from libdoctor.stack.frameworks import detect_frameworks

    builds = [b for b in detect_frameworks(env) if b.cuda_major is not None]
    if not builds:
        return None
    matching = []
    for dist in candidates:
        package = cuda_major_of(dist)
        build = next((b for b in builds if package and b.cuda_major == package.major), None)
        if package is not None and build is not None:
            matching.append((dist, f"built for CUDA {package.major}, as {build.display} is"))
    return matching[0] if len(matching) == 1 else None


def _identical_finding(claimants: Sequence[Distribution], paths: list[str]) -> Finding:
    names = " and ".join(d.display for d in claimants)
    return Finding(
        code="shared-path-identical",
        severity=Severity.INFO,
        message=(
            f"{plural(len(paths), 'path')} claimed by {names} with identical contents "
            "(harmless while both stay; uninstalling one deletes them for both)."
        ),
        paths=tuple(sorted(paths)),
        evidence={"claimants": [{"name": d.name, "version": d.version} for d in claimants]},
    )
