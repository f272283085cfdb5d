"""What a set of wheels installed together would do to each other, before any is installed:
the findings of ``plan lock``.

The input is the environment-to-be as a model (``Environment``, every locked wheel placed
where the installer puts it) and the lock's packages. Pure: nothing is read here.

- ``lock-path-conflict``: two locked wheels install one path. Different bytes (the RECORD
  hashes differ, or one is not recorded) are an error: which copy is left depends on the
  install order, and uv installs wheels in parallel. The same bytes are an info.
- ``lock-cuda-mixed-major``: a framework built for one CUDA major beside CUDA wheels of
  another (error); CUDA wheels of several majors and no framework (warning).
- ``lock-requirement-unmet``: a locked wheel requires (for this platform, and the extras it
  is installed with) a name the lock does not hold here, or a version of it the lock does
  not pin.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.model import Environment
from libdoctor.external.lockfile import LockedPackage
from libdoctor.findings import DistRef, Finding, Fix, Severity
from libdoctor.remedy import LockRemove
from libdoctor.stack.cuda import CudaPackage, cuda_major_of
from libdoctor.stack.frameworks import FrameworkBuild

if TYPE_CHECKING:
    from packaging.requirements import Requirement

__all__ = ["LockFix", "cuda_majors", "path_conflicts", "unmet_requirements"]


@dataclass(frozen=True, slots=True)
class LockFix:
    """How a lock of this format is changed: the command that removes a requirement (uv's
    ``uv remove``; a pylock.toml or requirements file is edited and locked again)."""

    format: str  # "uv.lock", "pylock.toml", "requirements.txt"
    path: str
    required: frozenset[str] = frozenset()  # keys some other locked wheel requires

    def removal(self, names: Sequence[str]) -> Fix | None:
        if self.format != "uv.lock" or not names:
            return None
        return Fix(
            (LockRemove(tuple(names)),), "beside the project's pyproject.toml; uv locks again"
        )

    def stray(self, a: Distribution, b: Distribution) -> Distribution:
        """Of A and B, the one to drop: the one no other locked wheel requires."""
        return a if a.key not in self.required and b.key in self.required else b


# --------------------------------------------------------------------------- shared paths


def path_conflicts(env: Environment, fix: LockFix) -> list[Finding]:
    """One error per pair of locked wheels that install a path with different bytes; one
    info for every path shared only with the same bytes (``nvidia/__init__.py``)."""
    pairs: dict[tuple[str, str], tuple[list[str], list[str]]] = {}
    dists: dict[str, Distribution] = {}
    for path, claims in env.shared_claims().items():
        first = claims[0]
        for other in claims[1:]:
            a, b = sorted((first.dist, other.dist), key=lambda d: d.key)
            dists[a.key], dists[b.key] = a, b
            same = first.entry.hash is not None and first.entry.hash == other.entry.hash
            differ, identical = pairs.setdefault((a.key, b.key), ([], []))
            rel = os.path.relpath(path, a.base_dir)
            (identical if same else differ).append(rel)
    found = [
        _conflict(dists[a], dists[b], sorted(differ), sorted(same), fix)
        for (a, b), (differ, same) in sorted(pairs.items())
        if differ
    ]
    shared: dict[str, set[str]] = {}
    for (one, two), (unlike, alike) in pairs.items():
        for path in alike if not unlike else []:
            shared.setdefault(path, set()).update((dists[one].display, dists[two].display))
    if shared:
        found.append(_identical(shared))
    return found


def _identical(shared: Mapping[str, set[str]]) -> Finding:
    paths = sorted(shared)
    owners = sorted({d for ds in shared.values() for d in ds})
    message = (
        f"{len(paths)} path(s) are installed by several locked wheels with the same bytes "
        f"({len(owners)} wheels): whichever is written last, the bytes are the same."
    )
    evidence = {"shared_by": {p: sorted(shared[p]) for p in paths}}
    return Finding("lock-path-conflict", Severity.INFO, message, None, tuple(paths), evidence)


def _grouped(paths: Sequence[str]) -> dict[str, int]:
    """How many of PATHS lie under each directory (three levels deep at most), in order."""
    groups: dict[str, int] = {}
    for path in paths:
        head = "/".join(os.path.dirname(path).split("/")[:3]) or "."
        groups[head] = groups.get(head, 0) + 1
    return groups


def _conflict(
    a: Distribution, b: Distribution, differ: list[str], same: list[str], fix: LockFix
) -> Finding:
    groups = _grouped(differ or same)
    where = ", ".join(f"{d}/ ({n})" for d, n in groups.items())
    both = f"{a.display} and {b.display}"
    evidence = {"distributions": [a.display, b.display], "groups": groups, "identical": len(same)}
    stray = fix.stray(a, b)
    alone = stray.key not in fix.required
    also = f" ({len(same)} more with the same bytes)" if same else ""
    which = f" ({stray.name} is the one nothing else in the lock requires)" if alone else ""
    message = (
        f"{both} both install {len(differ)} path(s) with different bytes{also}: {where}. "
        "Which copy is left depends on the install order, and uv installs wheels in "
        "parallel: it can differ from one machine or run to the next; uninstalling either "
        f"deletes the files of both. Lock only one of them{which}."
    )
    evidence |= {"differing": len(differ)}
    return Finding(
        "lock-path-conflict", Severity.ERROR, message, DistRef(stray.name, stray.version),
        tuple(differ), evidence, fix.removal([stray.name] if alone else []),
    )  # fmt: skip


# --------------------------------------------------------------------------- CUDA majors


def cuda_majors(
    env: Environment, frameworks: Sequence[FrameworkBuild], fix: LockFix
) -> list[Finding]:
    """A framework beside CUDA wheels of another major; or CUDA wheels of several majors."""
    packages = [p for d in env.distributions if (p := cuda_major_of(d)) is not None]
    by_major: dict[int, list[CudaPackage]] = {}
    for package in packages:
        by_major.setdefault(package.major, []).append(package)
    built = [f for f in frameworks if f.cuda_major is not None]
    found = []
    for framework in built:
        other = {m: p for m, p in by_major.items() if m != framework.cuda_major}
        if other:
            found.append(_framework_mixed(framework, other, by_major, fix))
    if not built and len(by_major) > 1:
        found.append(_packages_mixed(by_major))
    return found


def _names(packages: Sequence[CudaPackage]) -> str:
    return ", ".join(p.dist.display for p in packages)


def _framework_mixed(
    framework: FrameworkBuild,
    other: Mapping[int, list[CudaPackage]],
    by_major: Mapping[int, list[CudaPackage]],
    fix: LockFix,
) -> Finding:
    strays = [p for packages in other.values() for p in packages]
    majors = " and ".join(f"CUDA {m}: {_names(p)}" for m, p in sorted(other.items()))
    message = (
        f"{framework.dist.display} is built for CUDA {framework.cuda} (its {framework.source}), "
        f"and the lock also holds CUDA wheels of another major ({majors}): they are not what "
        f"{framework.dist.name} loads, and where they install the same paths as its own "
        "CUDA wheels they replace them."
    )
    evidence = {
        "framework": framework.dist.display,
        "build": framework.cuda,
        "source": framework.source,
        "majors": {str(m): [p.dist.display for p in ps] for m, ps in sorted(by_major.items())},
        "why": {p.dist.display: p.evidence for p in strays},
    }
    return Finding(
        "lock-cuda-mixed-major", Severity.ERROR, message,
        DistRef(framework.dist.name, framework.dist.version), (), evidence,
        fix.removal([p.dist.name for p in strays]),
    )  # fmt: skip


def _packages_mixed(by_major: Mapping[int, list[CudaPackage]]) -> Finding:
    majors = "; ".join(f"CUDA {m}: {_names(p)}" for m, p in sorted(by_major.items()))
    message = (
        f"The lock holds CUDA wheels of {len(by_major)} majors ({majors}). No locked framework "
        "says which one it loads; a process loads one of each library."
    )
    evidence = {"majors": {str(m): [p.dist.display for p in ps] for m, ps in by_major.items()}}
    return Finding("lock-cuda-mixed-major", Severity.WARNING, message, evidence=evidence)


# --------------------------------------------------------------------------- requirements


def unmet_requirements(
    env: Environment,
    held: Sequence[LockedPackage],
    markers: Mapping[str, str],
    extras: Mapping[str, frozenset[str]] | None = None,
) -> list[Finding]:
    """Each locked wheel's requirements the lock does not hold: those whose marker holds
    for MARKERS with no extra or with one of the extras the wheel is installed with, as pip
    and uv evaluate them. Those extras: EXTRAS (by key, what the lock says), and every
    ``name[x]`` a wheel installed here requires (``_installed_extras``)."""
    versions = {p.key: p.version for p in held}
    requirements = {d.key: _requirements(d) for d in env.distributions}
    installed = _installed_extras(requirements, markers, extras or {})
    found = []
    for dist in env.distributions:
        for line, req in requirements[dist.key]:
            if not _applies(req, markers, installed[dist.key]):
                continue
            key = canonicalize_name(req.name)
            if key not in versions:
                found.append(_unmet(dist, line, None))
            elif (v := versions[key]) is not None and not req.specifier.contains(v, True):
                found.append(_unmet(dist, line, v))
    return found


def _requirements(dist: Distribution) -> list[tuple[str, Requirement]]:
    from packaging.requirements import InvalidRequirement, Requirement

    parsed = []
    for line in dist.requires_dist:
        try:
            parsed.append((line, Requirement(line)))
        except InvalidRequirement:
            continue
    return parsed


def _applies(req: Requirement, markers: Mapping[str, str], extras: set[str]) -> bool:
    """REQ's marker holds with no extra or one of EXTRAS."""
    return req.marker is None or any(_holds(req.marker, markers, x) for x in ("", *sorted(extras)))


def _installed_extras(
    requirements: Mapping[str, list[tuple[str, Requirement]]],
    markers: Mapping[str, str],
    given: Mapping[str, frozenset[str]],
) -> dict[str, set[str]]:
    """By key, the extras each wheel is installed with: GIVEN, and those the requirements
    that apply ask for (``b[z]`` of an installed ``a``: b with z, as a resolver takes it),
    to a fixed point (extras only grow, and there are finitely many)."""
    installed = {key: set(given.get(key, ())) for key in requirements}
    changed = True
    while changed:
        changed = False
        for key, reqs in requirements.items():
            for _, req in reqs:
                target = installed.get(canonicalize_name(req.name))
                wanted = {canonicalize_name(e) for e in req.extras}
                if target is None or wanted <= target:
                    continue
                if _applies(req, markers, installed[key]):
                    target |= wanted
                    changed = True
    return installed


def _holds(marker: object, markers: Mapping[str, str], extra: str) -> bool:
    try:
        return bool(marker.evaluate({**markers, "extra": extra}))  # type: ignore[attr-defined]
    except Exception:  # an undefined marker name: counts as holding, as lockselect does
        return True


def _unmet(dist: Distribution, line: str, held: str | None) -> Finding:
    what = "which the lock does not hold here" if held is None else f"the lock pins {held}"
    message = (
        f"{dist.display} requires {line.split(';')[0].strip()}, {what}: an install of this "
        "lock is not what its packages ask for (a lock edited by hand, or from another "
        "resolution)."
    )
    evidence = {"requirement": line, "locked": held}
    return Finding(
        "lock-requirement-unmet", Severity.ERROR, message, DistRef(dist.name, dist.version),
        evidence=evidence,
    )  # fmt: skip
