"""What an uninstall, an install or a repair would do, predicted from the files alone.

Nothing here writes anything. A plan is the same checks as ``libdoctor check`` (``run_checks``)
run twice: on the environment as it is, and on the environment as it *would be* — the model
without the removed distributions (or with the new ones) over a disk view (``Overlay``) in which
the removed paths are gone and the written ones hold the bytes their RECORD describes. The
findings the second run has and the first has not are what the change breaks.

The disk view, pip's removal set and the step-by-step ``Simulation`` are ``whatif.py``; reading
a wheel and placing its files is ``wheelfile.py``. Both are re-exported here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from libdoctor.analysis.run import run_checks
from libdoctor.checks.wording import file_list
from libdoctor.digests import spell_hash
from libdoctor.disk.hashing import hash_file
from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.model import Environment
from libdoctor.environment.paths import display
from libdoctor.environment.record import RecordEntry
from libdoctor.environment.target import Target
from libdoctor.environment.wheel import WheelFile, misplaced_members, wheel_distribution
from libdoctor.errors import LibdoctorError
from libdoctor.external.installers import reinstall, uninstall
from libdoctor.findings import DistRef, Finding, Severity
from libdoctor.remedy import Reinstall, Remedy, merge_reinstalls
from libdoctor.remedy import argv as argv_of
from libdoctor.whatif.simulation import Removal, Simulation

if TYPE_CHECKING:
    from libdoctor.loader.extensions import LoaderContext

__all__ = [
    "CoOwned",
    "FindingDiff",
    "Overwrite",
    "Plan",
    "Step",
    "diff_findings",
    "find_distribution",
    "finding_key",
    "merged_reinstall",
    "plan_install",
    "plan_uninstall",
    "reinstall_step",
    "reinstall_together",
    "uninstall_step",
]

StepAction = Literal["uninstall", "reinstall", "install"]
# Evidence keys that name *what* a finding is about beyond its paths (a soname, a library).
_SUBJECT_KEYS = ("soname", "needed", "library", "name")
# Installers whose steps libdoctor can back up and roll back (conda also rewrites conda-meta).


# --------------------------------------------------------------------------- distributions


def _exists(disk: Disk, path: str) -> bool:
    """``os.path.exists`` as pip calls it: false for dangling links and unreadable paths."""
    state = disk.stat(path)
    return state.exists and state.error is None


def find_distribution(env: Environment, name: str) -> Distribution:
    """The distribution ``pip uninstall NAME`` would act on, or a one-line error."""
    key = canonicalize_name(name)
    found = [d for d in env.distributions if d.key == key]
    local = [d for d in found if not d.site.inherited]
    if local:
        return local[0]
    if found:
        raise LibdoctorError(
            f"{found[0].display} is installed in the base interpreter's site-packages "
            f"({found[0].site.path}), outside {env.target.prefix}: pip will not uninstall it here"
        )
    raise LibdoctorError(f"{name} is not installed in {env.target.prefix}")


# --------------------------------------------------------------------------- comparing findings


def finding_key(finding: Finding) -> tuple[Any, ...]:
    """What makes two findings the same problem: code, distribution, paths, subject."""
    dist = (
        (canonicalize_name(finding.distribution.name), finding.distribution.version)
        if finding.distribution
        else None
    )
    subject = tuple(
        (k, finding.evidence[k]) for k in _SUBJECT_KEYS if isinstance(finding.evidence.get(k), str)
    )
    return (finding.code, dist, tuple(sorted(finding.paths)), subject)


@dataclass(frozen=True, slots=True)
class FindingDiff:
    new: tuple[Finding, ...]  # in after, not in before (or worse: it gained paths)
    resolved: tuple[Finding, ...]  # in before, nothing left of it in after
    kept: tuple[Finding, ...]  # in both, no worse (as after has them; maybe fewer paths)


def _same_problem(a: Finding, b: Finding) -> bool:
    """One problem seen twice: same code, distribution and subject, overlapping paths."""
    ka, kb = finding_key(a), finding_key(b)
    if (ka[0], ka[1], ka[3]) != (kb[0], kb[1], kb[3]):
        return False
    return bool(set(a.paths) & set(b.paths)) or (not a.paths and not b.paths)


def diff_findings(before: Sequence[Finding], after: Sequence[Finding]) -> FindingDiff:
    """A finding that lost paths is the same problem, smaller: kept, not resolved + new."""

    def no_worse(f: Finding) -> bool:
        return any(_same_problem(f, b) and set(f.paths) <= set(b.paths) for b in before)

    return FindingDiff(
        new=tuple(f for f in after if not no_worse(f)),
        resolved=tuple(b for b in before if not any(_same_problem(f, b) for f in after)),
        kept=tuple(f for f in after if no_worse(f)),
    )


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True, slots=True)
class Step:
    """One installer command: its ``remedy``, and ``argv`` the command line made from it.
    ``dist`` names the distribution it acts on (by metadata dir), ``also`` the others a
    reinstall of several in one call acts on; ``wheel`` the wheel file it installs;
    ``writes`` the paths an install writes over (backed up first). ``name`` and ``version``
    are ``dist``'s."""

    action: StepAction
    remedy: Remedy
    name: str
    version: str
    dist: Distribution | None = None
    wheel: str | None = None
    reason: str = ""
    also: tuple[Distribution, ...] = ()
    writes: tuple[str, ...] = ()

    @property
    def argv(self) -> tuple[str, ...]:
        return argv_of(self.remedy)

    @property
    def installer(self) -> str:
        return (self.dist.installer if self.dist and self.dist.installer else "pip").lower()

    @property
    def dists(self) -> tuple[Distribution, ...]:
        """Every distribution the step acts on, ``dist`` first."""
        return ((self.dist,) if self.dist is not None else ()) + self.also


@dataclass(frozen=True, slots=True)
class CoOwned:
    """A path in the removal set that another distribution, which stays, also claims."""

    path: str
    removed_with: Distribution
    owners: tuple[Distribution, ...]
    identical: bool  # every claim records the same bytes


@dataclass(frozen=True, slots=True)
class Overwrite:
    """A path a wheel would write over: another distribution's file, or an unowned one."""

    path: str
    wheel: str  # "name version"
    owners: tuple[Distribution, ...]  # () for a file no RECORD claims
    identical: bool


@dataclass(frozen=True, slots=True)
class Plan:
    action: Literal["uninstall", "install"]
    target: Target
    subjects: tuple[str, ...]  # "cudnn-b 9.24.0"
    steps: tuple[Step, ...]
    removals: tuple[Removal, ...] = ()
    co_owned: tuple[CoOwned, ...] = ()
    overwrites: tuple[Overwrite, ...] = ()
    new: tuple[Finding, ...] = ()
    resolved: tuple[Finding, ...] = ()
    repair: tuple[Step, ...] = ()  # after ``steps``, reinstalls that undo the damage
    after_repair: tuple[Finding, ...] | None = None  # new findings left after the repair
    notes: tuple[str, ...] = ()
    distributions: int = 0
    files: int = 0
    before: tuple[Finding, ...] = ()  # every finding of the environment as it is
    unknown: tuple[str, ...] = ()  # what the install would build from source: files unknown

    @property
    def breaks(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.new if f.severity >= Severity.ERROR)

    @property
    def deletes_outside(self) -> tuple[str, ...]:
        """RECORD paths outside the prefix that pip would delete: outside a venv it deletes
        whatever RECORD names, through symlinked directories too. Never allowed."""
        if self.target.is_venv:
            return ()
        return tuple(p for r in self.removals for p in r.outside)

    @property
    def verdict(self) -> Literal["safe", "breaks", "unknown"]:
        """Safe only when proven: an install that builds from source cannot be predicted."""
        if self.breaks or self.deletes_outside:
            return "breaks"
        return "unknown" if self.unknown else "safe"

    @property
    def repair_is_safe(self) -> bool:
        if self.deletes_outside:
            return False
        return bool(self.repair) and not any(
            f.severity >= Severity.ERROR for f in (self.after_repair or ())
        )

    def steps_to_run(self, *, repair: bool) -> tuple[Step, ...]:
        """The uninstall, followed with REPAIR by the reinstalls that undo its damage, when
        the plan proved them safe."""
        if repair and self.verdict == "breaks" and self.repair_is_safe:
            return (*self.steps, *self.repair)
        return self.steps


def _co_owned(removal: Removal, env: Environment, leaving: set[str]) -> list[CoOwned]:
    out = []
    for path in removal.files:
        claims = env.claims.get(path, ())
        others = [c for c in claims if c.dist.metadata_dir not in leaving]
        if not others:
            continue
        hashes = {(c.entry.hash, c.entry.size) for c in claims}
        owners = tuple({c.dist.metadata_dir: c.dist for c in others}.values())
        out.append(CoOwned(path, removal.dist, owners, identical=len(hashes) == 1))
    return out


def _choose_repairs(co_owned: Sequence[CoOwned], env: Environment) -> list[Distribution]:
    """The fewest co-owners whose reinstall puts every co-owned path back.

    A path with identical claims is restored by any one of them (the empty ``nvidia/__init__.py``
    that every nvidia wheel ships needs one reinstall, not fifteen); a path with differing
    claims needs each of its owners. Greedy set cover, largest first, names breaking ties.
    """
    chosen: dict[str, Distribution] = {}
    uncovered: list[CoOwned] = []
    for item in co_owned:
        if item.identical:
            uncovered.append(item)
        else:
            for owner in item.owners:
                chosen[owner.metadata_dir] = owner
    while True:
        uncovered = [i for i in uncovered if not any(o.metadata_dir in chosen for o in i.owners)]
        if not uncovered:
            break
        counts: dict[str, int] = {}
        by_dir: dict[str, Distribution] = {}
        for item in uncovered:
            for owner in item.owners:
                counts[owner.metadata_dir] = counts.get(owner.metadata_dir, 0) + 1
                by_dir[owner.metadata_dir] = owner
        best = max(counts, key=lambda k: (counts[k], -len(by_dir[k].key), by_dir[k].key))
        chosen[best] = by_dir[best]
    return sorted(
        (d for d in chosen.values() if not d.external and not d.site.inherited),
        key=lambda d: d.key,
    )


def uninstall_step(dist: Distribution, target: Target, reason: str = "") -> Step:
    return Step("uninstall", uninstall(dist, target), dist.name, dist.version, dist, None, reason)


def reinstall_step(dist: Distribution, target: Target, reason: str = "") -> Step:
    return Step("reinstall", reinstall(dist, target), dist.name, dist.version, dist, None, reason)


def reinstall_together(dists: Sequence[Distribution], target: Target, reason: str = "") -> Step:
    """One installer call that reinstalls every one of DISTS (one installer, one interpreter)."""
    return merged_reinstall(dists, [reinstall(d, target) for d in dists], reason)


def merged_reinstall(
    dists: Sequence[Distribution], remedies: Sequence[Reinstall], reason: str = ""
) -> Step:
    """The one installer call of REMEDIES, each the own reinstall of one of DISTS (one
    installer, one interpreter)."""
    (remedy,) = merge_reinstalls(tuple(remedies))
    first = dists[0]
    also = tuple(dists[1:])
    return Step("reinstall", remedy, first.name, first.version, first, None, reason, also)


def plan_uninstall(
    env: Environment,
    disk: Disk,
    names: Sequence[str],
    libraries: LoaderContext | None = None,
) -> Plan:
    """``pip uninstall NAME...`` predicted: removal set, co-owned files, new findings, repair."""
    dists: list[Distribution] = []
    for name in names:
        dist = find_distribution(env, name)
        if all(d.metadata_dir != dist.metadata_dir for d in dists):
            dists.append(dist)
    leaving = {d.metadata_dir for d in dists}
    steps = tuple(uninstall_step(d, env.target) for d in dists)
    sim = Simulation(env, disk, libraries)
    removals = [sim.uninstall(d) for d in dists]
    co_owned = [c for r in removals for c in _co_owned(r, env, leaving)]
    notes = _uninstall_notes(env, removals)
    after = sim.findings()
    before = run_checks(env, disk, None, libraries)
    diff = diff_findings(before, after)
    diff = replace(diff, new=(*diff.new, *_extras_left_incomplete(env, dists, diff.new)))
    repair: list[Step] = []
    after_repair: tuple[Finding, ...] | None = None
    if any(f.severity >= Severity.ERROR for f in diff.new):
        owners = _choose_repairs(co_owned, env)
        repair = [reinstall_step(o, env.target, _puts_back(o, co_owned)) for o in owners]
        if owners:
            for owner in owners:
                sim.reinstall(owner)
            after_repair = diff_findings(before, sim.findings()).new
    return Plan(
        action="uninstall",
        target=env.target,
        subjects=tuple(d.display for d in dists),
        steps=steps,
        removals=tuple(removals),
        co_owned=tuple(co_owned),
        new=diff.new,
        resolved=_not_deleted_with(diff.resolved, removals),
        repair=tuple(repair),
        after_repair=after_repair,
        notes=tuple(notes),
        distributions=len(env.distributions),
        files=len(env.claims),
        before=tuple(before),
    )


def _puts_back(owner: Distribution, co_owned: Sequence[CoOwned]) -> str:
    paths = sum(1 for c in co_owned if owner in c.owners)
    return f"puts back {paths} co-owned file{'s' if paths != 1 else ''}"


def _extras_left_incomplete(
    env: Environment, removed: Sequence[Distribution], new: Sequence[Finding]
) -> list[Finding]:
    """Requirements through an extra the environment uses that the uninstall removes.

    ``check`` holds an extra to account only when an installed requirement asks for it
    (pip and uv record no extras); but every requirement of jax-cuda12-plugin's
    ``with-cuda`` being installed says the environment uses it, and an uninstall that takes
    one of them away breaks ``jax[cuda12]``: a plan counts that, with the evidence.
    """
    from libdoctor.environment.requirements import RequirementIndex

    index = RequirementIndex(env)
    leaving = {d.metadata_dir for d in removed}
    reported = {
        (f.distribution.name if f.distribution else "", f.evidence.get("name")) for f in new
    }
    found = []
    for dist in removed:
        for dep in index.requirements_on(dist):
            if dep.extra is None or dep.requirer.metadata_dir in leaving:
                continue
            if (dep.requirer.name, dep.name) in reported:
                continue
            reported.add((dep.requirer.name, dep.name))
            found.append(
                Finding(
                    code="requirement-missing",
                    severity=Severity.ERROR,
                    message=(
                        f"{dep.requirer.display} requires {dep.requirement} through its extra "
                        f"{dep.extra}, which the environment uses (every requirement it adds is "
                        f"installed): uninstalling {dist.display} breaks "
                        f"{dep.requirer.name}[{dep.extra}]."
                    ),
                    distribution=DistRef(dep.requirer.name, dep.requirer.version),
                    evidence={
                        "name": dep.name,
                        "requirer": {"name": dep.requirer.name, "version": dep.requirer.version},
                        "requirements": [{"requirement": dep.requirement, "extra": dep.extra}],
                        "removed": {"name": dist.name, "version": dist.version},
                    },
                )
            )
    return found


def _not_deleted_with(
    resolved: Sequence[Finding], removals: Sequence[Removal]
) -> tuple[Finding, ...]:
    """A need whose every requester the uninstall deletes is gone with them, not resolved:
    removing the only library that needed the driver is no repair. (A finding about the
    offending file itself, a shared path or foreign bytes, is resolved when that goes.)"""
    deleted = frozenset().union(*(r.paths for r in removals)) if removals else frozenset()
    return tuple(
        f
        for f in resolved
        if f.code not in _NEEDS or not f.paths or not all(p in deleted for p in f.paths)
    )


# Findings whose paths are the files that need something (their requesters).
_NEEDS = frozenset({"unresolved-library", "driver-library-absent", "optional-library-missing"})


def _uninstall_notes(env: Environment, removals: Sequence[Removal]) -> list[str]:
    notes = []
    for removal in removals:
        if removal.outside:
            where = (
                "pip refuses to touch them inside a virtual environment"
                if env.target.is_venv
                else "outside a virtual environment pip deletes them"
            )
            notes.append(
                f"{removal.dist.display}: {file_list(removal.dist)} names "
                f"{len(removal.outside)} path(s) outside "
                f"the prefix (first: {removal.outside[0]}); {where}. libdoctor never follows them."
            )
        if removal.absent:
            notes.append(
                f"{removal.dist.display}: {len(removal.absent)} path(s) {file_list(removal.dist)} "
                "lists already gone from disk: nothing to delete there."
            )
        dupes = [
            d
            for d in env.distributions
            if d.key == removal.dist.key and d.metadata_dir != removal.dist.metadata_dir
        ]
        if dupes:
            notes.append(
                f"{removal.dist.name} has {len(dupes) + 1} metadata directories; pip uninstalls "
                f"one per run (planned: {removal.dist.metadata_dir})."
            )
    return notes


def plan_install(
    env: Environment,
    disk: Disk,
    wheels: Sequence[WheelFile],
    libraries: LoaderContext | None = None,
) -> Plan:
    """``pip install WHEEL...`` predicted: overwrites of other distributions' files, and the
    new findings of the environment with the wheels installed."""
    before = run_checks(env, disk, None, libraries)
    sim = Simulation(env, disk, libraries)
    removals: list[Removal] = []
    overwrites: list[Overwrite] = []
    notes: list[str] = []
    installer = _target_installer(env)
    for wheel in wheels:
        replaced = [d for d in sim.env.distributions if d.key == wheel.key and not d.site.inherited]
        if any(d.version == wheel.version for d in replaced):
            notes.append(
                f"{wheel.display} is already installed: pip would do nothing "
                "(--force-reinstall would rewrite its files)"
            )
            continue
        for old in replaced:
            removals.append(sim.uninstall(old))
            notes.append(
                f"{wheel.display} replaces the installed {old.display} (pip uninstalls it first)"
            )
        dist, files = wheel_distribution(wheel, env.target, installer)
        for path, entry in files.items():
            claims = sim.env.claims.get(path, ())
            if claims:
                identical = bool(entry.hash) and (
                    all(c.entry.hash == entry.hash for c in claims) or _holds(sim, path, entry)
                )
                owners = tuple({c.dist.metadata_dir: c.dist for c in claims}.values())
                overwrites.append(Overwrite(path, wheel.display, owners, identical))
            elif _exists(sim.disk, path) and os.path.dirname(path) != dist.metadata_dir:
                overwrites.append(Overwrite(path, wheel.display, (), False))
        sim.write(dist, files)
    diff = diff_findings(before, sim.findings())
    new, resolved_by_pip = _resolved_by_pip(diff.new, wheels)
    notes += resolved_by_pip
    refused = [_misplaced(w, env.target) for w in wheels]
    new = (*(f for f in refused if f is not None), *new)
    return Plan(
        action="install",
        target=env.target,
        subjects=tuple(w.display for w in wheels),
        steps=(),
        removals=tuple(removals),
        overwrites=tuple(overwrites),
        new=new,
        resolved=diff.resolved,
        notes=tuple(notes),
        distributions=len(env.distributions),
        files=len(env.claims),
        before=tuple(before),
    )


def _misplaced(wheel: WheelFile, target: Target) -> Finding | None:
    """The members of WHEEL that no installer puts where it says, as an error: a wheel that
    writes outside the directories it installs into is broken or hostile."""
    misplaced = misplaced_members(wheel, target)
    if not misplaced:
        return None
    member, _, root = misplaced[0]
    more = f" and {len(misplaced) - 1} more" if len(misplaced) > 1 else ""
    where = (
        f"would land outside {display(root)}"
        if root is not None
        else "is in a .data scheme no installer knows"
    )
    refusals = (
        'pip stops part-way ("trying to install outside the target directory"), leaving '
        "the files it wrote until then with no RECORD; uv installs the wheel without them"
        if any(r is not None for _, _, r in misplaced)
        else "pip and uv stop part-way, leaving the files they wrote until then"
    )
    return Finding(
        code="record-invalid",
        severity=Severity.ERROR,
        message=(
            f"{wheel.display}: the member {display(member)}{more} {where}: "
            f"{refusals}. Do not install this wheel."
        ),
        distribution=DistRef(wheel.name, wheel.version),
        paths=tuple(dest for _, dest, _ in misplaced),
        evidence={
            "wheel": display(wheel.path),
            "members": [
                {"member": display(m), "lands": display(dest), "inside": r and display(r)}
                for m, dest, r in misplaced
            ],
        },
    )


def _holds(sim: Simulation, path: str, entry: RecordEntry) -> bool:
    """Whether PATH already holds the bytes ENTRY describes, as the simulated disk has it: a
    file an earlier wheel of the plan writes by its RECORD hash, a file on disk by its digest.
    Only a file of ENTRY's size is read (another size costs one stat), and only a claimed
    path (the model has checked it does not leave the prefix through a symlink)."""
    if not entry.hash or entry.size is None:
        return False
    algorithm = entry.hash.partition("=")[0]
    if path in sim.written:
        return sim.digests.get((path, algorithm)) == entry.hash
    state = sim.disk.stat(path)
    if not (state.exists and state.is_file and state.error is None and state.size == entry.size):
        return False
    try:
        return spell_hash(algorithm, hash_file(path, algorithm)) == entry.hash
    except (OSError, ValueError):
        return False


def _resolved_by_pip(
    new: Sequence[Finding], wheels: Sequence[WheelFile]
) -> tuple[tuple[Finding, ...], list[str]]:
    """A wheel's own unmet requirements are not breakage: pip installs (or changes) what it
    requires along with it. Those findings become notes; the rest stay new."""
    installing = {(w.key, w.version) for w in wheels}
    kept: list[Finding] = []
    notes: list[str] = []
    for finding in new:
        dist = finding.distribution
        if (
            finding.code in ("requirement-missing", "requirement-conflict")
            and dist is not None
            and (canonicalize_name(dist.name), dist.version) in installing
        ):
            notes.append(
                f"{finding.message} pip resolves this itself when it installs "
                f"{dist.name} (not predicted here: plan the requirement, not the wheel file, "
                "to have the target's pip resolve it)"
            )
        else:
            kept.append(finding)
    return tuple(kept), notes


def _target_installer(env: Environment) -> str:
    installers = [d.installer.lower() for d in env.distributions if d.installer]
    return "uv" if installers and installers.count("uv") > len(installers) // 2 else "pip"


def guard_refusal(plan: Plan, *, repair: bool, force: bool) -> str | None:
    """Why a guarded uninstall must not run as asked, or None. FORCE overrides every reason
    but one: deleting outside the target is never allowed."""
    outside = plan.deletes_outside
    if outside:
        return (
            f"refused: pip would delete {len(outside)} path(s) outside the prefix "
            f"(first: {outside[0]}), which is never allowed, --force or not"
        )
    if plan.verdict == "breaks" and repair and not plan.repair_is_safe:
        return "refused: no reinstall undoes what this uninstall breaks (--force to do it anyway)"
    if plan.verdict == "breaks" and not repair and not force:
        hint = " (--repair does it safely)" if plan.repair_is_safe else ""
        return f"refused: the uninstall breaks {len(plan.breaks)} thing(s){hint}"
    return None
