"""Repairs that cannot make things worse, planned from the findings: reinstall damaged
distributions at their installed versions through the environment's own installer, each
plan verified on a simulation of its result before anything runs (``repair.run`` runs it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from libdoctor.analysis.run import run_checks
from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.installers import RUNNABLE, reinstall_argv
from libdoctor.environment.model import Environment
from libdoctor.environment.target import Target
from libdoctor.findings import Finding, Severity
from libdoctor.whatif.plan import Step, diff_findings, plan_uninstall, reinstall_step
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


_NOT_AUTOMATIC = {
    "shared-path": "two distributions own these paths with different bytes: choose which to "
    "keep (`libdoctor uninstall NAME --repair`); fix only reinstalls",
    "duplicate-distribution": "a stale metadata directory must be deleted by hand",
}


def _reinstallable(env: Environment) -> dict[tuple[str, ...], Distribution]:
    out: dict[tuple[str, ...], Distribution] = {}
    for dist in env.distributions:
        if not (dist.external or dist.site.inherited):
            out.setdefault(tuple(reinstall_argv(dist, env.target)), dist)
    return out


def _reinstall_targets(
    finding: Finding, reinstallable: Mapping[tuple[str, ...], Distribution]
) -> list[Distribution] | None:
    """The distributions whose reinstall is FINDING's fix, or None if its fix is otherwise."""
    if finding.fix is None:
        return None
    steps = finding.fix.steps or (finding.fix.argv,)
    dists = [reinstallable.get(tuple(step)) for step in steps]
    if not dists or any(d is None for d in dists):
        return None
    return [d for d in dists if d is not None]


def _why_not(finding: Finding) -> str:
    if finding.fix is None:
        return "no installer command repairs it"
    if len(finding.fix.steps) > 1:
        return "its repair involves an uninstall: a choice for you to make"
    return "its fix is not a reinstall of a distribution installed here"


def _blocker(dist: Distribution) -> str | None:
    installer = (dist.installer or "pip").lower()
    if installer not in RUNNABLE:
        return f"{dist.display} was installed by {installer}: run its fix with {installer}"
    if dist.record is None:
        return f"{dist.display} has no RECORD: pip refuses to reinstall it over itself"
    return None


@dataclass(slots=True)
class _Decisions:
    """What plan_fix decided about each finding, in the order it decided."""

    damaged: dict[str, Distribution] = field(default_factory=dict)  # to reinstall
    addressed: list[Finding] = field(default_factory=list)
    not_handled: list[tuple[Finding, str]] = field(default_factory=list)
    leftovers: list[tuple[list[Distribution], Finding]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plan_fix(
    env: Environment,
    disk: Disk,
    findings: Sequence[Finding] | None = None,
    *,
    remove_leftovers: bool = False,
    libraries: LoaderContext | None = None,
) -> FixPlan:
    """Installer commands that repair the current findings, verified on the simulated result.

    Damaged distributions (a finding whose fix is their reinstall) are reinstalled at their
    installed version with ``--no-deps``. With REMOVE_LEFTOVERS, a distribution a
    ``cuda-mixed-major`` finding names is uninstalled when ``plan_uninstall`` proves that safe,
    or safe once its co-owners are reinstalled.
    """
    before = list(run_checks(env, disk, None, libraries) if findings is None else findings)
    decided = _sort_findings(env, before, remove_leftovers)
    steps = _leftover_steps(env, disk, libraries, decided)
    repaired = {s.dist.metadata_dir for s in steps if s.action == "reinstall" and s.dist}
    for dist in sorted(decided.damaged.values(), key=lambda d: d.key):
        if dist.metadata_dir not in repaired:
            steps.append(reinstall_step(dist, env.target, "its files are missing or altered"))
    predicted = _simulate(env, disk, libraries, steps) if steps else tuple(before)
    return FixPlan(
        target=env.target,
        before=tuple(before),
        steps=tuple(steps),
        addressed=tuple(decided.addressed),
        not_handled=tuple(decided.not_handled),
        predicted=predicted,
        new=diff_findings(before, predicted).new,
        notes=tuple(decided.notes),
    )


def _sort_findings(
    env: Environment, findings: Sequence[Finding], remove_leftovers: bool
) -> _Decisions:
    """Which findings a reinstall repairs, which name leftovers to uninstall, which stay."""
    decided = _Decisions()
    reinstallable = _reinstallable(env)
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
        blocked = [b for b in map(_blocker, targets) if b]
        if blocked:
            decided.not_handled.append((finding, "; ".join(blocked)))
            continue
        decided.damaged.update((d.metadata_dir, d) for d in targets)
        decided.addressed.append(finding)
    return decided


def _leftover_steps(
    env: Environment, disk: Disk, libraries: LoaderContext | None, decided: _Decisions
) -> list[Step]:
    """The uninstalls (and the reinstalls that make them safe) of DECIDED's leftovers."""
    steps: list[Step] = []
    for dists, finding in decided.leftovers:
        plan = plan_uninstall(env, disk, [d.name for d in dists], libraries)
        names = ", ".join(plan.subjects)
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
        decided.addressed.append(finding)
    return steps


def _simulate(
    env: Environment, disk: Disk, libraries: LoaderContext | None, steps: Sequence[Step]
) -> tuple[Finding, ...]:
    """Every finding of the environment as it would be after STEPS."""
    sim = Simulation(env, disk, libraries)
    for step in steps:
        if step.dist is not None and step.action == "uninstall":
            sim.uninstall(step.dist)
        elif step.dist is not None:
            sim.reinstall(step.dist)
    return tuple(sim.findings())


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
