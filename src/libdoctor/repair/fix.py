"""Repairs that cannot make things worse, planned from the findings: reinstall damaged
distributions at their installed versions through the environment's own installer, one
installer call per installer and interpreter, each plan verified on a simulation of its result
before anything runs (``repair.run`` runs it).

Where a reinstall's wheel is at hand offline, the simulation writes what that wheel holds, and
each reinstall is checked to put the missing paths back (``repair.verify``); otherwise it is
"not verified". In a ``pip install --target`` folder the call also reinstalls every
distribution whose files pip replaces with the damaged one's (``repair.targetdir``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from libdoctor.analysis.run import run_checks
from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.model import Environment
from libdoctor.environment.record import RecordEntry
from libdoctor.environment.target import Target
from libdoctor.environment.wheel import read_wheel, wheel_distribution
from libdoctor.external.installers import reinstall
from libdoctor.findings import Finding, Severity
from libdoctor.remedy import Reinstall, Uninstall
from libdoctor.repair.targetdir import plan_folder_reinstall, shared_entries
from libdoctor.repair.verify import Verification, verify_reinstall
from libdoctor.whatif.plan import Step, diff_findings, merged_reinstall, plan_uninstall
from libdoctor.whatif.simulation import Simulation

if TYPE_CHECKING:
    from libdoctor.loader.extensions import LoaderContext

__all__ = ["FixPlan", "plan_fix"]


# --------------------------------------------------------------------------- fix planning


@dataclass(frozen=True, slots=True)
class FixPlan:
    target: Target
    before: tuple[Finding, ...]
    steps: tuple[Step, ...]
    addressed: tuple[Finding, ...]  # findings a step is meant to repair
    not_handled: tuple[tuple[Finding, str], ...]  # (finding, why fix leaves it)
    predicted: tuple[Finding, ...]  # every finding of the simulated result
    new: tuple[Finding, ...]  # in the simulated result, not now: a step would break something
    notes: tuple[str, ...] = ()
    verification: tuple[Verification, ...] = ()  # one per reinstalled distribution
    verified: tuple[tuple[Verification, ...], ...] = ()  # each step's, in step order


def _by_step(
    steps: Sequence[Step], verification: Sequence[Verification]
) -> tuple[tuple[Verification, ...], ...]:
    """Each step's verifications: those of the distributions it acts on."""
    out = []
    for step in steps:
        dirs = {d.metadata_dir for d in step.dists}
        out.append(tuple(v for v in verification if v.dist.metadata_dir in dirs))
    return tuple(out)


_NOT_AUTOMATIC = {
    "shared-path": "two distributions own these paths with different bytes: choose which to "
    "keep (`libdoctor uninstall NAME --repair`); fix only reinstalls",
    "duplicate-distribution": "a stale metadata directory must be deleted by hand",
}
_DAMAGED = "its files are missing or altered"


_Own = tuple[Distribution, Reinstall]  # a distribution and its own reinstall


def _own_reinstalls(env: Environment) -> dict[str, Reinstall]:
    """Each distribution fix may reinstall, with its own reinstall, by metadata dir: made
    here once, and every step is made from these values."""
    return {
        d.metadata_dir: reinstall(d, env.target)
        for d in env.distributions
        if not (d.external or d.site.inherited)
    }


def _reinstallable(env: Environment, own: Mapping[str, Reinstall]) -> dict[Reinstall, _Own]:
    """Each distribution fix may reinstall, by its own reinstall."""
    out: dict[Reinstall, _Own] = {}
    for dist in env.distributions:
        if dist.metadata_dir in own:
            out.setdefault(own[dist.metadata_dir], (dist, own[dist.metadata_dir]))
    return out


def _reinstall_targets(
    finding: Finding, reinstallable: Mapping[Reinstall, _Own]
) -> list[_Own] | None:
    """The distributions (with their own reinstalls) whose reinstall is FINDING's fix, or
    None if its fix is otherwise."""
    if finding.fix is None:
        return None
    found: list[_Own] = []
    for remedy in finding.fix.remedies:
        if not isinstance(remedy, Reinstall):
            return None
        for pin in remedy.dists:
            own = reinstallable.get(replace(remedy, dists=(pin,)))
            if own is None:
                return None
            found.append(own)
    return found or None


def _why_not(finding: Finding) -> str:
    if finding.fix is None:
        return "no installer command repairs it"
    if len(finding.fix.remedies) > 1:
        return "its repair involves an uninstall: a choice for you to make"
    return "its fix is not a reinstall of a distribution installed here"


def _blocker(dist: Distribution, remedy: Reinstall) -> str | None:
    if not remedy.via.runnable:
        installer = remedy.via.recorded
        return f"{dist.display} was installed by {installer}: run its fix with {installer}"
    if dist.record is None:
        return f"{dist.display} has no RECORD: pip refuses to reinstall it over itself"
    return None


@dataclass(slots=True)
class _Decisions:
    """What plan_fix decided about each finding, in the order it decided."""

    reinstalls: list[tuple[Finding, list[Distribution]]] = field(default_factory=list)
    addressed: list[Finding] = field(default_factory=list)  # by an uninstall of leftovers
    not_handled: list[tuple[Finding, str]] = field(default_factory=list)
    leftovers: list[tuple[list[Distribution], Finding]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)  # metadata dir -> why it is reinstalled
    own: dict[str, Reinstall] = field(default_factory=dict)  # metadata dir -> its reinstall

    def drop(self, dists: set[str], reason: str) -> None:
        """Findings that needed any of DISTS are left to the user, for REASON."""
        kept = []
        for finding, needs in self.reinstalls:
            if any(d.metadata_dir in dists for d in needs):
                self.not_handled.append((finding, reason))
            else:
                kept.append((finding, needs))
        self.reinstalls = kept


def plan_fix(
    env: Environment,
    disk: Disk,
    findings: Sequence[Finding] | None = None,
    *,
    remove_leftovers: bool = False,
    libraries: LoaderContext | None = None,
    wheels: Sequence[str] = (),
) -> FixPlan:
    """Installer commands that repair the current findings, verified on the simulated result.

    Damaged distributions (a finding whose fix is their reinstall) are reinstalled at their
    installed version with ``--no-deps``, all those of one installer and interpreter in one
    call. With REMOVE_LEFTOVERS, a distribution a ``cuda-mixed-major`` finding names is
    uninstalled when ``plan_uninstall`` proves that safe, or safe once its co-owners are
    reinstalled. WHEELS are the wheel files the installer finds offline (its local
    ``--find-links``): each reinstall is checked against them.
    """
    before = list(run_checks(env, disk, None, libraries) if findings is None else findings)
    decided = _sort_findings(env, before, remove_leftovers)
    leftover = _leftover_steps(env, disk, libraries, decided)
    repairing = [d for s in leftover if s.action == "reinstall" for d in s.dists]
    steps = [s for s in leftover if s.action != "reinstall"]
    steps += _reinstall_steps(env, decided, repairing)
    verification = tuple(
        verify_reinstall(d, env, disk, wheels)
        for s in steps
        if s.action == "reinstall"
        for d in s.dists
    )
    verified = _by_step(steps, verification)
    predicted = _simulate(env, disk, libraries, steps, verification) if steps else tuple(before)
    addressed = {id(f) for f in [*decided.addressed, *(f for f, _ in decided.reinstalls)]}
    return FixPlan(
        target=env.target,
        before=tuple(before),
        steps=tuple(steps),
        addressed=tuple(f for f in before if id(f) in addressed),
        not_handled=tuple(decided.not_handled),
        predicted=predicted,
        new=diff_findings(before, predicted).new,
        notes=tuple(decided.notes),
        verification=verification,
        verified=verified,
    )


def _sort_findings(
    env: Environment, findings: Sequence[Finding], remove_leftovers: bool
) -> _Decisions:
    """Which findings a reinstall repairs, which name leftovers to uninstall, which stay."""
    decided = _Decisions(own=_own_reinstalls(env))
    reinstallable = _reinstallable(env, decided.own)
    for finding in findings:
        if finding.severity < Severity.WARNING:
            continue
        if finding.code == "cuda-mixed-major":
            dists = _leftovers(env, finding)
            if remove_leftovers and dists:
                decided.leftovers.append((dists, finding))
            else:
                why = "pass --remove-leftovers to uninstall them" if dists else _why_not(finding)
                decided.not_handled.append((finding, why))
            continue
        if finding.code in _NOT_AUTOMATIC:
            decided.not_handled.append((finding, _NOT_AUTOMATIC[finding.code]))
            continue
        targets = _reinstall_targets(finding, reinstallable)
        if targets is None:
            decided.not_handled.append((finding, _why_not(finding)))
            continue
        blocked = [b for b in (_blocker(d, r) for d, r in targets) if b]
        if blocked:
            decided.not_handled.append((finding, "; ".join(blocked)))
            continue
        decided.reinstalls.append((finding, [d for d, _ in targets]))
    return decided


def _leftover_steps(
    env: Environment, disk: Disk, libraries: LoaderContext | None, decided: _Decisions
) -> list[Step]:
    """The uninstalls (and the reinstalls that make them safe) of DECIDED's leftovers."""
    steps: list[Step] = []
    for dists, finding in decided.leftovers:
        plan = plan_uninstall(env, disk, [d.name for d in dists], libraries)
        names = ", ".join(plan.subjects)
        if any(isinstance(s.remedy, Uninstall) and s.remedy.impossible for s in plan.steps):
            decided.not_handled.append(
                (finding, f"pip cannot uninstall {names} from a `pip install --target` folder")
            )
            continue
        if plan.verdict == "breaks" and not plan.repair_is_safe:
            decided.notes.append(
                f"{names} stay: uninstalling them breaks {len(plan.breaks)} thing(s) that "
                "no reinstall repairs (see `libdoctor plan uninstall`)"
            )
            decided.not_handled.append(
                (finding, "uninstalling the leftovers would break something")
            )
            continue
        steps += plan.steps
        if plan.verdict == "breaks":
            steps += plan.repair
            decided.why.update((s.dist.metadata_dir, s.reason) for s in plan.repair if s.dist)
        decided.addressed.append(finding)
    return steps


def _reinstall_steps(
    env: Environment, decided: _Decisions, repairing: Sequence[Distribution]
) -> list[Step]:
    """One reinstall call per installer and interpreter, for REPAIRING (the co-owners a
    leftover's uninstall damages) and every damaged distribution; the calls the leftovers'
    plans had are replaced by these."""
    dists: dict[str, Distribution] = {d.metadata_dir: d for d in repairing}
    damaged = {d.metadata_dir: d for _, needs in decided.reinstalls for d in needs}
    for key in sorted(damaged, key=lambda k: damaged[k].key):
        dists.setdefault(key, damaged[key])
        decided.why.setdefault(key, _DAMAGED)
    groups: dict[Reinstall, list[Distribution]] = {}
    for dist in dists.values():
        groups.setdefault(replace(decided.own[dist.metadata_dir], dists=()), []).append(dist)
    steps: list[Step] = []
    folder = env.target.target_dir
    for base, members in groups.items():
        along: list[Distribution] = []
        if folder and base.via.upgrades_folder:
            members, along = _through_folder(env, folder, members, decided)
        if members:
            together = [*members, *along]
            remedies = [decided.own[d.metadata_dir] for d in together]
            why = _reason(members, along, decided)
            steps.append(merged_reinstall(together, remedies, why))
    return steps


def _through_folder(
    env: Environment, folder: str, members: list[Distribution], decided: _Decisions
) -> tuple[list[Distribution], list[Distribution]]:
    """(the damaged that one pip call can reinstall into FOLDER, the others it must take
    along); those whose reinstall would lose another's files are left to the user. (A
    leftover's uninstall never runs here: pip cannot uninstall from a --target folder.) The
    distributions findings name go first: a finding's fix already lists what comes along."""
    named = {
        (canonicalize_name(f.distribution.name), f.distribution.version)
        for f, _ in decided.reinstalls
        if f.distribution is not None
    }
    ok: list[Distribution] = []
    along: dict[str, Distribution] = {}
    ordered = sorted(members, key=lambda d: (d.key, d.version) not in named)
    for dist in ordered:
        needed = {d.metadata_dir for _, needs in decided.reinstalls for d in needs}
        if dist.metadata_dir in along or dist.metadata_dir not in needed:
            continue  # comes along already, or only a finding left to the user needed it
        reinstall = plan_folder_reinstall([dist], env, folder)
        if reinstall.blocker is not None:
            decided.drop({dist.metadata_dir}, reinstall.blocker)
            continue
        ok.append(dist)
        for other in reinstall.along:
            along.setdefault(other.metadata_dir, other)
            if (other.key, other.version) not in named:
                shared = shared_entries(other, reinstall, folder)
                decided.why[other.metadata_dir] = f"pip replaces {shared} whole: its files go too"
    chosen = {d.metadata_dir for d in ok}
    return ok, [d for k, d in along.items() if k not in chosen]


def _reason(
    members: Sequence[Distribution], along: Sequence[Distribution], decided: _Decisions
) -> str:
    whys = [decided.why.get(d.metadata_dir, _DAMAGED) for d in [*members, *along]]
    if len(set(whys)) == 1:
        return whys[0] if len(whys) == 1 else whys[0].replace("its files", "their files")
    return "; ".join(f"{d.name}: {w}" for d, w in zip([*members, *along], whys, strict=True))


def _simulate(
    env: Environment,
    disk: Disk,
    libraries: LoaderContext | None,
    steps: Sequence[Step],
    verification: Sequence[Verification],
) -> tuple[Finding, ...]:
    """Every finding of the environment as it would be after STEPS. A reinstall whose wheel
    is at hand writes what that wheel holds; otherwise what the installed RECORD lists."""
    written = _wheels_written(env, steps, verification)
    sim = Simulation(env, disk, libraries)
    for step in steps:
        for dist in step.dists:
            if step.action == "uninstall":
                sim.uninstall(dist)
            elif dist.metadata_dir in written:
                sim.uninstall(dist)
                sim.write(*written[dist.metadata_dir])
            else:
                sim.reinstall(dist)
    return tuple(sim.findings())


def _wheels_written(
    env: Environment, steps: Sequence[Step], verification: Sequence[Verification]
) -> dict[str, tuple[Distribution, dict[str, RecordEntry]]]:
    """What each reinstall whose wheel is at hand writes (the first wheel the installer
    could take), by the reinstalled distribution's metadata dir, read in step order."""
    wheels = {v.dist.metadata_dir: v.wheels[0] for v in verification if v.wheels}
    out: dict[str, tuple[Distribution, dict[str, RecordEntry]]] = {}
    for step in steps:
        for dist in step.dists:
            if step.action != "uninstall" and dist.metadata_dir in wheels:
                wheel = read_wheel(wheels[dist.metadata_dir])
                out[dist.metadata_dir] = wheel_distribution(
                    wheel, env.target, dist.installer or "pip"
                )
    return out


def _leftovers(env: Environment, finding: Finding) -> list[Distribution]:
    """The distributions a ``cuda-mixed-major`` finding proposes to uninstall (those nothing
    else requires), installed in the target's own site-packages."""
    refs = [
        (str(p.get("name")), str(p.get("version")))
        for p in finding.evidence.get("packages", ())
        if isinstance(p, Mapping) and p.get("uninstalled_by_fix", p.get("leftover"))
    ]
    if not refs and finding.distribution is not None and finding.fix is not None:
        refs = [(finding.distribution.name, finding.distribution.version)]
    found = [_by_ref(env, name, version) for name, version in refs]
    return [d for d in found if d is not None and not d.site.inherited and not d.external]


def _by_ref(env: Environment, name: str, version: str) -> Distribution | None:
    key = canonicalize_name(name)
    for dist in env.distributions:
        if dist.key == key and dist.version == version:
            return dist
    return None
