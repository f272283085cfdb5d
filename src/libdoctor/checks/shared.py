"""Paths claimed by more than one distribution: who owns the bytes on disk, what to keep.

Codes: shared-path (different contents: an install overwrote another's files, and uninstalling
either deletes them for both), shared-path-identical (same contents; info only).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from libdoctor.checks.verdict import Digests, judge
from libdoctor.checks.wording import are, plural, severity_for
from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution, required_names
from libdoctor.environment.installers import reinstall_argv, steps_fix, uninstall_argv
from libdoctor.environment.model import Claim, Environment
from libdoctor.environment.paths import display, is_bytecode
from libdoctor.findings import Finding, Fix, Severity


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


def _requirers(env: Environment) -> dict[str, list[Distribution]]:
    """canonical name -> installed distributions that require it (markers evaluated here)."""
    required: dict[str, list[Distribution]] = defaultdict(list)
    for dist in env.distributions:
        for name in required_names(dist):
            required[name].append(dist)
    return required


def shared_paths(
    env: Environment, disk: Disk, digests: Digests | None
) -> tuple[list[Finding], set[str]]:
    """Findings for multiply-claimed paths, and the paths whose bytes are a claimant's."""
    groups: dict[tuple[str, ...], _SharedGroup] = {}
    identical: dict[tuple[str, ...], list[str]] = defaultdict(list)
    identical_claimants: dict[tuple[str, ...], tuple[Distribution, ...]] = {}
    covered: set[str] = set()
    for path, claims in env.claims.items():
        if len(claims) < 2 or is_bytecode(path):
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
    findings = [_shared_finding(env, g) for g in groups.values()]
    findings += [
        _identical_finding(identical_claimants[key], paths) for key, paths in identical.items()
    ]
    return findings, covered


def _shared_finding(env: Environment, group: _SharedGroup) -> Finding:
    n = len(group.paths)
    owner = _bytes_owner(group)
    decided_by = "hash" if "hash" in group.decided_by else ("size" if group.decided_by else None)
    required = _requirers(env)
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
                    "required_by": sorted({r.name for r in required.get(d.key, [])}),
                }
                for d in group.claimants
            ],
            "on_disk_owner": owner.name if owner else None,
            "decided_by": decided_by,
            "undecided": [display(p) for p in group.undecided],
            "match_no_claimant": [display(p) for p in group.foreign],
            "absent": [display(p) for p in group.absent],
            "uninstall_would_delete": {d.name: n for d in group.claimants},
        },
        fix=_keep_one_fix(env, group.claimants, owner, required),
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
    env: Environment,
    claimants: Sequence[Distribution],
    owner: Distribution | None,
    required: Mapping[str, list[Distribution]],
) -> Fix | None:
    """Uninstall every claimant but one, then reinstall that one to restore its files."""
    keep, why = _choose_keeper(claimants, owner, required)
    if keep is None:
        return None
    removed = [d for d in claimants if d is not keep]
    return steps_fix(
        *(uninstall_argv(d, env.target) for d in removed),
        reinstall_argv(keep, env.target),
        note=f"keeps {keep.name} ({why}); to keep another instead, swap the names",
    )


def _choose_keeper(
    claimants: Sequence[Distribution],
    owner: Distribution | None,
    required: Mapping[str, list[Distribution]],
) -> tuple[Distribution | None, str]:
    wanted = [d for d in claimants if required.get(d.key)]
    if len(wanted) == 1:
        users = ", ".join(sorted({r.name for r in required[wanted[0].key]}))
        return wanted[0], f"required by {users}"
    if owner is not None:
        return owner, "its bytes are on disk"
    return None, ""


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
