"""Requirement truth: every Requires-Dist of every installed distribution, held to the disk.

Codes: requirement-missing, requirement-conflict, requirement-phantom, requirement-invalid.

A strict superset of ``pip check``: the requirements it checks (markers evaluated for the
target's Python, pre-releases accepted, as pip compares), plus those of the extras each
distribution is installed with as another installed distribution requests them
(``jax`` requiring ``jax-cuda12-plugin[with-cuda]`` brings the plugin's CUDA wheels in; see
``environment.requirements``), plus what pip cannot see:

- ``requirement-phantom``: the requirement is met by metadata whose every native library is
  gone (the phantom ``missing-files`` reports). pip check, pip show and pip install
  ("already satisfied") all count such a distribution as installed.
- ``requirement-invalid``: a Requires-Dist line that does not parse, or a METADATA that is
  not UTF-8 (pip check fails on either: "Error parsing dependencies"). The requirements of
  the latter are still checked, read as uv reads them.

Only requirements that apply for certain are held to account: extras inferred from what is
installed only decide what the environment uses (``required_by``), never a finding.

One finding per requiring distribution and required name. Its one fix installs a version
that every requirement on that name here accepts (their specifiers joined), through the
installer of the distribution it acts on; a phantom's fix is the reinstall ``missing-files``
names for it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from libdoctor.checks.wording import about, plural, ref, repair_fix, severity_for
from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Environment
from libdoctor.environment.paths import is_native
from libdoctor.environment.requirements import Dependency, RequirementIndex
from libdoctor.external.installers import install_like
from libdoctor.findings import Code, Finding, Fix, Severity

__all__ = ["check_requirements", "missing_requirements", "phantom_natives"]


def phantom_natives(env: Environment, disk: Disk, dist: Distribution) -> int:
    """How many native libraries DIST's RECORD lists, if every one is gone (missing or
    unusable: ``missing-files``'s phantom); 0 when any is there, or it lists none."""
    natives = [c.path for c in env.claims_of(dist) if is_native(c.path)]
    for path in natives:
        state = disk.stat(path)
        if state.exists and not state.error:
            return 0
    return len(natives)


@dataclass(frozen=True, slots=True)
class _Problem:
    """One requirer's requirements on one name, and what is wrong with them."""

    requirer: Distribution
    deps: tuple[Dependency, ...]
    code: Code
    installed: tuple[Distribution, ...]  # the visible copies ((): missing)
    natives: int = 0  # a phantom's native libraries, all gone


def check_requirements(
    env: Environment, disk: Disk, requirements: RequirementIndex | None = None
) -> list[Finding]:
    index = RequirementIndex(env) if requirements is None else requirements
    certain = {dist.metadata_dir: index.dependencies(dist) for dist in env.distributions}
    wanted: dict[str, list[Dependency]] = defaultdict(list)  # every certain requirement
    for deps in certain.values():
        for dep in deps:
            wanted[dep.key].append(dep)
    findings: list[Finding] = []
    phantoms: dict[str, int] = {}
    for dist in env.distributions:
        invalid = index.invalid(dist)
        if invalid:
            findings.append(_invalid_finding(dist, invalid))
        if dist.metadata_problem:
            findings.append(_undecodable_finding(dist, dist.metadata_problem))
        by_key: dict[str, list[Dependency]] = defaultdict(list)
        for dep in certain[dist.metadata_dir]:
            by_key[dep.key].append(dep)
        for key, deps in by_key.items():
            problem = _problem(env, disk, index, dist, deps, phantoms)
            if problem is not None:
                findings.append(_finding(env, index, problem, wanted[key]))
    return findings


def _problem(
    env: Environment,
    disk: Disk,
    index: RequirementIndex,
    requirer: Distribution,
    deps: Sequence[Dependency],
    phantoms: dict[str, int],
) -> _Problem | None:
    installed = index.visible(deps[0].key)
    if not installed:
        return _Problem(requirer, tuple(deps), "requirement-missing", ())
    if any(not dep.accepts(d.version) for dep in deps for d in installed):
        return _Problem(requirer, tuple(deps), "requirement-conflict", installed)
    if any(d.metadata_dir == requirer.metadata_dir for d in installed):
        return None  # foo[all] requiring foo[gpu]: missing-files speaks for it
    counts = []
    for dist in installed:
        if dist.metadata_dir not in phantoms:
            phantoms[dist.metadata_dir] = phantom_natives(env, disk, dist)
        counts.append(phantoms[dist.metadata_dir])
    if all(counts):
        return _Problem(requirer, tuple(deps), "requirement-phantom", installed, counts[0])
    return None


def _stated(index: RequirementIndex, deps: Sequence[Dependency]) -> str:
    """The requirements as read: each with what made it apply, and-joined."""
    parts = []
    for dep in deps:
        why = index.why(dep)
        parts.append(dep.requirement + (f" ({why})" if why else ""))
    return " and ".join(parts)


def _finding(
    env: Environment, index: RequirementIndex, problem: _Problem, wanted: Sequence[Dependency]
) -> Finding:
    requirer, installed = problem.requirer, problem.installed
    name = problem.deps[0].name
    stated = f"{requirer.display} requires {_stated(index, problem.deps)}"
    evidence: dict[str, Any] = {
        "name": problem.deps[0].key,
        "requirer": {"name": requirer.name, "version": requirer.version},
        "requirements": [
            {
                "requirement": dep.requirement,
                "marker": dep.marker,
                "extra": dep.extra,
                "why": index.why(dep) or None,
            }
            for dep in problem.deps
        ],
        "installed": [{"name": d.name, "version": d.version} for d in installed],
    }
    if problem.code == "requirement-phantom":
        return _phantom_finding(env, problem, stated, evidence)
    if problem.code == "requirement-missing":
        message = f"{stated}, but {name} is not installed."
    else:
        versions = ", ".join(d.version for d in installed)
        are = "is" if len(installed) == 1 else "are"
        message = f"{stated}, but {name} {versions} {are} installed."
    # Where the fix installs: beside the installed copy, else beside the requirer; into the
    # environment's own site-packages rather than the base interpreter's it inherits.
    return Finding(
        code=problem.code,
        severity=severity_for([requirer], Severity.ERROR),
        message=about(requirer, message),
        distribution=ref(requirer),
        evidence=evidence,
        fix=None if requirer.external else _install_fix(env, wanted, *installed[:1], requirer),
    )


def missing_requirements(
    env: Environment, index: RequirementIndex, requirers: Sequence[Distribution]
) -> dict[str, Fix | None]:
    """Names REQUIRERS require for certain that nothing installed provides -> the fix
    ``requirement-missing`` gives for each (the same command, so a finding that adopts it
    groups with that one under one cause)."""
    wanted: dict[str, list[Dependency]] = defaultdict(list)
    for dist in env.distributions:
        for dep in index.dependencies(dist):
            wanted[dep.key].append(dep)
    out: dict[str, Fix | None] = {}
    for requirer in requirers:
        for dep in index.dependencies(requirer):
            if dep.key in out or index.visible(dep.key):
                continue
            out[dep.key] = (
                None if requirer.external else _install_fix(env, wanted[dep.key], requirer)
            )
    return out


def _own(env: Environment, *candidates: Distribution) -> Distribution:
    """The first candidate installed in the target's own site dirs, else any distribution
    that is, else the first candidate."""
    own = [d for d in candidates if not d.site.inherited]
    own += [d for d in env.distributions if not d.site.inherited and not d.external]
    return own[0] if own else candidates[0]


def _phantom_finding(
    env: Environment, problem: _Problem, stated: str, evidence: dict[str, Any]
) -> Finding:
    phantom = problem.installed[0]
    message = (
        f"{stated}. {phantom.display} meets it in its metadata only: every native library "
        f"it ships ({problem.natives}) is gone from disk, the phantom missing-files "
        'reports. pip check, pip show and pip install ("already satisfied") all count it '
        "as installed."
    )
    evidence["phantom"] = {
        "name": phantom.name,
        "version": phantom.version,
        "native_libraries": problem.natives,
        "see": "missing-files",
    }
    return Finding(
        code="requirement-phantom",
        severity=severity_for([problem.requirer, phantom], Severity.ERROR),
        message=about(phantom, message),
        distribution=ref(problem.requirer),
        evidence=evidence,
        fix=repair_fix(phantom, env, note=f"the reinstall missing-files names for {phantom.name}"),
    )


def _install_fix(env: Environment, wanted: Sequence[Dependency], *beside: Distribution) -> Fix:
    """Install what every certain requirement on this name here accepts, at once, with the
    installer of the first of BESIDE in the target's own site dirs (see ``_own``)."""
    like = _own(env, *beside)
    requirement = _joined(wanted)
    who = sorted({f"{d.requirer.name} ({d.requirement})" for d in wanted})
    note = f"meets every requirement on {wanted[0].name} here: " + ", ".join(who)
    return Fix((install_like(requirement, like, env.target),), note=note)


def _joined(wanted: Sequence[Dependency]) -> str:
    """One requirement meaning all of WANTED: their extras united, specifiers joined."""
    first = wanted[0]
    extras = sorted({e for d in wanted for e in d.extras})
    extra_text = f"[{','.join(extras)}]" if extras else ""
    url = next((d.url for d in wanted if d.url), None)
    if url is not None:
        return f"{first.name}{extra_text} @ {url}"
    specs = sorted({s.strip() for d in wanted for s in d.specifier.split(",") if s.strip()})
    return f"{first.name}{extra_text}{','.join(specs)}"


def _undecodable_finding(dist: Distribution, problem: str) -> Finding:
    return _invalid(
        dist,
        f"{dist.display}: {problem}. pip cannot read it: pip check fails on it "
        '("Error parsing dependencies"), pip list, show and uninstall stop with a '
        "traceback. libdoctor checks its requirements as uv reads them.",
        {"reason": problem},
        paths=(dist.metadata_dir,),
    )


def _invalid_finding(dist: Distribution, invalid: Sequence[tuple[str, str]]) -> Finding:
    text, why = invalid[0]
    return _invalid(
        dist,
        f"{dist.display} has {plural(len(invalid), 'Requires-Dist line')} that "
        f"{'does' if len(invalid) == 1 else 'do'} not parse (first: {text!r}: {why}). "
        "pip check fails on it, no installer can honour it, and libdoctor cannot "
        "check it.",
        {"lines": [{"line": t, "reason": r} for t, r in invalid]},
    )


def _invalid(
    dist: Distribution, message: str, evidence: dict[str, Any], paths: tuple[str, ...] = ()
) -> Finding:
    """A ``requirement-invalid`` finding about DIST's metadata."""
    return Finding(
        code="requirement-invalid",
        severity=severity_for([dist], Severity.WARNING),
        message=about(dist, message),
        distribution=ref(dist),
        paths=paths,
        evidence=evidence,
    )
