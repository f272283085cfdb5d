"""An install as asked for (wheel files, requirements, ``-r``/``-c`` files and other pip
install options) -> the ``Plan`` of what it does, the step that runs it, and the reinstalls
that would undo its damage.

``plan install``, the guarded ``install`` and the guard's wrappers all plan through
``plan_request``: the one place that asks the target's pip what a requirement resolves to
(``external.resolve``) and hands the wheels to ``plan_install``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from libdoctor.disk.stat import RealDisk
from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.model import Environment, build_environment
from libdoctor.environment.paths import is_native
from libdoctor.environment.target import Target
from libdoctor.environment.wheel import (
    WheelFile,
    misplaced_members,
    read_wheel,
    wheel_distribution,
)
from libdoctor.external.installers import (
    InstallerOptions,
    Notify,
    env_installer,
    request_install,
)
from libdoctor.external.resolve import WheelProgress, resolve_requirements
from libdoctor.findings import Finding, Severity
from libdoctor.stack.cuda import is_cuda_package_name
from libdoctor.stack.frameworks import framework_spec
from libdoctor.whatif.plan import Plan, Step, diff_findings, plan_install, reinstall_together
from libdoctor.whatif.simulation import Simulation

if TYPE_CHECKING:
    from libdoctor.loader.extensions import LoaderContext

__all__ = [
    "InstallRequest",
    "PlannedInstall",
    "conflicts",
    "install_refusal",
    "plan_request",
    "proven_harmless",
    "with_steps",
]

# pip install options whose value names what to install: with one, pip must resolve.
_SOURCES = ("-r", "--requirement", "-e", "--editable", "--group", "--requirements-from-script")


@dataclass(frozen=True, slots=True)
class InstallRequest:
    """What the user asked pip to install. WHEELS are local wheel files (read as they are);
    REQUIREMENTS and the ``-r``/``-e`` sources among PIP_ARGS are resolved by the target's
    pip with PIP_ARGS (``-c FILE``, ``-U``, ``--pre``...) and the index options."""

    wheels: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    pip_args: tuple[str, ...] = ()

    @property
    def resolves(self) -> bool:
        return bool(self.requirements) or any(
            a in _SOURCES or a.startswith(tuple(f"{s}=" for s in _SOURCES)) or a[:2] in ("-r", "-e")
            for a in self.pip_args
        )

    def argv_items(self) -> tuple[str, ...]:
        """The request as the installer's arguments: options, then wheel files, then
        requirements."""
        return (*self.pip_args, *(os.path.abspath(w) for w in self.wheels), *self.requirements)


@dataclass(frozen=True, slots=True)
class PlannedInstall:
    plan: Plan
    env: Environment  # the environment as it was planned against
    wheels: tuple[WheelFile, ...]


def plan_request(
    target: Target,
    request: InstallRequest,
    *,
    options: InstallerOptions,
    cache_dir: str,
    environ: Mapping[str, str],
    libraries: LoaderContext | Callable[[], LoaderContext] | None,
    echo: bool = False,
    notify: Notify | None = None,
    quick: bool = False,
    progress: WheelProgress | None = None,
) -> PlannedInstall:
    """``pip install`` of REQUEST predicted: requirements resolved by the target's own pip
    (or libdoctor's, aimed at it with ``--python``), wheel files read as they are.

    QUICK (the guard, which only needs the verdict): an install ``proven_harmless`` is
    "safe" without running the checks, and the plan has no ``before``."""
    wheels = [read_wheel(os.path.abspath(p)) for p in request.wheels]
    notes: tuple[str, ...] = ()
    unknown: tuple[str, ...] = ()
    if request.resolves:
        resolved = resolve_requirements(
            target,
            [*request.pip_args, *request.requirements],
            options=options,
            cache_dir=cache_dir,
            environ=environ,
            echo=echo,
            notify=notify,
            progress=progress,
        )
        wheels += resolved.wheels
        notes, unknown = resolved.notes, resolved.unknown
    env = build_environment(target)
    if quick and not unknown and proven_harmless(env, wheels):
        plan = Plan(
            action="install",
            target=target,
            subjects=tuple(w.display for w in wheels),
            steps=(),
            notes=(*notes, HARMLESS),
            distributions=len(env.distributions),
            files=len(env.claims),
        )
        return PlannedInstall(plan, env, tuple(wheels))
    if callable(libraries):  # the loader probed only when the checks run
        libraries = libraries()
    plan = plan_install(env, RealDisk(), wheels, libraries)
    plan = replace(plan, notes=(*notes, *plan.notes), unknown=unknown)
    return PlannedInstall(plan, env, tuple(wheels))


HARMLESS = (
    "proven harmless without running the checks: it writes no path that exists or that "
    "another distribution claims, replaces nothing, ships no shared library, is no CUDA or "
    "framework package, and nothing installed requires it"
)
# The leading name of a Requires-Dist line.
_REQUIRED_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def proven_harmless(env: Environment, wheels: Sequence[WheelFile]) -> bool:
    """An install no check can find anything new in, by what the wheels hold alone: every
    check would report the environment as it is plus a new, whole distribution. (Its own
    unmet requirements are pip's to install, as ``plan_install`` says.) Conservative: a
    requirement on the name under any marker counts."""
    keys = {w.key for w in wheels}
    if any(d.key in keys for d in env.distributions):
        return False
    required = {
        canonicalize_name(m.group(1))
        for d in env.distributions
        for line in d.requires_dist
        if (m := _REQUIRED_NAME.match(line))
    }
    if keys & required:
        return False
    for wheel in wheels:
        if is_cuda_package_name(wheel.key) or framework_spec(wheel.name) is not None:
            return False
        if misplaced_members(wheel, env.target):
            return False
        _, files = wheel_distribution(wheel, env.target)
        for path in files:
            if is_native(path) or f"{os.sep}nvidia{os.sep}" in path:
                return False
            if path in env.claims or os.path.lexists(path):
                return False
    return True


def with_steps(
    planned: PlannedInstall, request: InstallRequest, libraries: LoaderContext | None
) -> Plan:
    """The plan with the step that runs the install through the environment's own installer
    and, when it breaks something, the reinstalls that undo it (checked in a simulation)."""
    plan, env = planned.plan, planned.env
    installer = env_installer(env.target, env.distributions)
    replaced = tuple(r.dist for r in plan.removals)
    first = planned.wheels[0] if planned.wheels else None
    step = Step(
        "install",
        request_install(env.target, installer, request.argv_items()),
        first.name if first else " ".join(request.requirements),
        first.version if first else "",
        reason=f"installs {', '.join(plan.subjects)}" if plan.subjects else "",
        also=replaced,
        writes=tuple(o.path for o in plan.overwrites),
    )
    plan = replace(plan, steps=(step,))
    if not plan.breaks:
        return plan
    owners = _damaged_owners(planned, installer)
    if not owners:
        return plan
    after = _after_repair(planned, owners, installer, libraries)
    reason = "puts back what the install overwrote or deleted of theirs"
    return replace(
        plan, repair=(reinstall_together(owners, env.target, reason),), after_repair=after
    )


def _damaged_owners(planned: PlannedInstall, installer: str) -> list[Distribution]:
    """The distributions that stay whose files the install overwrites with other bytes, or
    deletes (an older version it replaces shared them) without writing them again."""
    plan, env = planned.plan, planned.env
    installing = {w.key for w in planned.wheels}
    leaving = {r.dist.metadata_dir for r in plan.removals}
    written: set[str] = set()
    for wheel in planned.wheels:
        written.update(wheel_distribution(wheel, env.target, installer)[1])
    found: dict[str, Distribution] = {}
    for overwrite in plan.overwrites:
        if not overwrite.identical:
            found.update({o.metadata_dir: o for o in overwrite.owners})
    for removal in plan.removals:
        for path in removal.files:
            if path not in written:
                found.update({c.dist.metadata_dir: c.dist for c in env.claims.get(path, ())})
    return sorted(
        (
            d
            for d in found.values()
            if d.key not in installing
            and d.metadata_dir not in leaving
            and not d.external
            and not d.site.inherited
        ),
        key=lambda d: d.key,
    )


def _after_repair(
    planned: PlannedInstall,
    owners: Sequence[Distribution],
    installer: str,
    libraries: LoaderContext | None,
) -> tuple[Finding, ...]:
    """The new errors left when the install is followed by reinstalling OWNERS: the install
    replayed as ``plan_install`` does, then each owner's RECORD written back."""
    env = planned.env
    sim = Simulation(env, RealDisk(), libraries)
    for wheel in planned.wheels:
        replaced = [d for d in sim.env.distributions if d.key == wheel.key and not d.site.inherited]
        if any(d.version == wheel.version for d in replaced):
            continue
        for old in replaced:
            sim.uninstall(old)
        sim.write(*wheel_distribution(wheel, env.target, installer))
    for owner in owners:
        sim.reinstall(owner)
    installing = {(w.key, w.version) for w in planned.wheels}
    return tuple(
        f
        for f in diff_findings(planned.plan.before, sim.findings()).new
        if f.severity >= Severity.ERROR
        and not (
            f.code in ("requirement-missing", "requirement-conflict")
            and f.distribution is not None
            and (canonicalize_name(f.distribution.name), f.distribution.version) in installing
        )
    )


def conflicts(plan: Plan) -> list[str]:
    """Paths two distributions that both stay installed claim with different bytes: only one
    of them can be whole. One line each, for the refusal."""
    lines = []
    for overwrite in plan.overwrites:
        if overwrite.identical or not overwrite.owners:
            continue
        owners = " and ".join([*(o.display for o in overwrite.owners), overwrite.wheel])
        lines.append(f"{owners} own {overwrite.path} with different bytes")
    return lines


def install_refusal(
    plan: Plan, *, repair: bool, force: bool, unknown_ok: bool = False
) -> str | None:
    """Why a guarded install must not run as asked, or None."""
    if force:
        return None
    if plan.verdict == "unknown" and not unknown_ok:
        return (
            f"refused: {', '.join(plan.unknown)} would be built from source, so what it installs "
            "is unknown (--force to install anyway)"
        )
    if plan.verdict != "breaks":
        return None
    if repair and not plan.repair_is_safe:
        clash = conflicts(plan)
        if clash:
            return (
                "refused: they cannot both be whole: "
                + "; ".join(clash[:3])
                + (f" (and {len(clash) - 3} more)" if len(clash) > 3 else "")
                + " (--force to install anyway)"
            )
        return "refused: no reinstall undoes what this install breaks (--force to do it anyway)"
    if not repair:
        hint = " (--repair does it safely)" if plan.repair_is_safe else ""
        return f"refused: the install breaks {len(plan.breaks)} thing(s){hint}"
    return None
