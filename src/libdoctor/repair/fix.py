"""Repairs that cannot make things worse: planned from the findings, run step by step through
the environment's own installer (pip, or uv when INSTALLER says uv), each step backed up and
journaled first, everything rolled back on the first failure.

Also the one place that asks the target's pip to resolve requirement strings
(``plan install REQ``): ``pip install --dry-run --report -``, then ``pip download --no-deps``
of the wheels it names into the user cache. Installer output goes to our stderr when asked
(progress on a terminal), never to stdout.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from libdoctor.analysis.run import run_checks
from libdoctor.disk.stat import Disk, RealDisk
from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.installers import reinstall_argv
from libdoctor.environment.model import Environment, build_environment, is_inside
from libdoctor.environment.target import Target
from libdoctor.environment.wheel import read_wheel, wheel_distribution
from libdoctor.errors import LibdoctorError
from libdoctor.findings import Finding, Severity
from libdoctor.repair.backup import BackupSession
from libdoctor.repair.journal import BackupInfo
from libdoctor.repair.rollback import RestoreResult
from libdoctor.whatif.plan import (
    RUNNABLE_INSTALLERS,
    Step,
    diff_findings,
    plan_uninstall,
    reinstall_step,
)
from libdoctor.whatif.simulation import Simulation, removal_set

if TYPE_CHECKING:
    from libdoctor.loader.extensions import LoaderContext

__all__ = [
    "FixPlan",
    "InstallerOptions",
    "ResolvedWheels",
    "RunResult",
    "StepResult",
    "plan_fix",
    "recheck",
    "resolve_requirements",
    "run_steps",
    "touched_paths",
]

_TAIL_LINES = 30


@dataclass(frozen=True, slots=True)
class InstallerOptions:
    """Index options passed through to every install step (pip and uv spell them alike)."""

    find_links: tuple[str, ...] = ()
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    no_index: bool = False

    def args(self) -> tuple[str, ...]:
        out: list[str] = []
        for location in self.find_links:
            out += ["--find-links", location]
        if self.index_url:
            out += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            out += ["--extra-index-url", url]
        if self.no_index:
            out.append("--no-index")
        return tuple(out)


def step_argv(step: Step, options: InstallerOptions) -> tuple[str, ...]:
    """The command a step runs: install steps get the index options (uninstall takes none)."""
    return step.argv + options.args() if step.action != "uninstall" else step.argv


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
    if installer not in RUNNABLE_INSTALLERS:
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


# --------------------------------------------------------------------------- what a step touches


def _bytecode_of(paths: Sequence[str], disk: Disk) -> list[str]:
    """Every ``__pycache__/<stem>.*.pyc`` of the listed ``.py`` files, whatever its tag."""
    found: list[str] = []
    listings: dict[str, tuple[str, ...]] = {}
    for path in paths:
        if not path.endswith(".py"):
            continue
        head, tail = os.path.split(path)
        cache = os.path.join(head, "__pycache__")
        if cache not in listings:
            listings[cache] = disk.listdir(cache)
        stem = tail[:-3] + "."
        found += [
            os.path.join(cache, n)
            for n in listings[cache]
            if n.startswith(stem) and n.endswith(".pyc")
        ]
    return found


def touched_paths(step: Step, env: Environment, disk: Disk) -> tuple[str, ...]:
    """Every existing path STEP may delete or overwrite, on the disk as it is now.

    A superset is harmless (it is only copied); a path missed here could not be restored.
    """
    paths: list[str] = []
    current = None
    if step.dist is not None:
        current = next(
            (d for d in env.distributions if d.metadata_dir == step.dist.metadata_dir), None
        )
    if current is not None and current.record is not None:
        removal = removal_set(current, env, disk)
        paths += removal.files
        paths += _bytecode_of(removal.files, disk)
    if step.wheel is not None:
        wheel = read_wheel(step.wheel)
        for old in env.distributions:
            if old.key == wheel.key and not old.site.inherited and old.record is not None:
                paths += removal_set(old, env, disk).files
        _, files = wheel_distribution(wheel, env.target)
        paths += [p for p in files if disk.stat(p).exists]
    prefix = env.target.prefix
    return tuple(dict.fromkeys(p for p in paths if is_inside(p, prefix)))


# --------------------------------------------------------------------------- running steps


@dataclass(frozen=True, slots=True)
class StepResult:
    step: Step
    argv: tuple[str, ...]
    returncode: int
    saved: int  # files copied into the backup before it ran
    output: str  # the installer's last lines, when captured


@dataclass(frozen=True, slots=True)
class RunResult:
    backup: BackupInfo
    results: tuple[StepResult, ...]
    rollback: RestoreResult | None  # set when a step failed and everything was undone

    @property
    def ok(self) -> bool:
        return self.rollback is None and all(r.returncode == 0 for r in self.results)


Notify = Callable[[str], None]


def _child_env(environ: Mapping[str, str], tmpdir: str) -> dict[str, str]:
    env = dict(environ)
    # Scratch files go into the backup dir; no prompt can hang a non-interactive run; the
    # installer's own imports write no bytecode into the target.
    env.update({"TMPDIR": tmpdir, "PIP_NO_INPUT": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    return env


def _execute(argv: Sequence[str], env: Mapping[str, str], echo: bool) -> tuple[int, str]:
    try:
        if echo:
            done = subprocess.run(
                list(argv), env=dict(env), stdin=subprocess.DEVNULL, stdout=2, check=False
            )
            return done.returncode, ""
        done = subprocess.run(
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
        )
    except OSError as exc:
        return 127, f"cannot run {argv[0]}: {exc.strerror or exc}"
    text = done.stdout.decode("utf-8", "replace")
    return done.returncode, "\n".join(text.splitlines()[-_TAIL_LINES:])


def _check_installers(steps: Sequence[Step], wrapper: Sequence[str]) -> None:
    if wrapper:
        return
    for step in steps:
        if step.installer not in RUNNABLE_INSTALLERS:
            raise LibdoctorError(f"{step.name} is managed by {step.installer}: not run here")
        if step.installer == "uv" and shutil.which("uv") is None:
            raise LibdoctorError(f"{step.name} was installed by uv, and uv is not on PATH")


def run_steps(
    target: Target,
    steps: Sequence[Step],
    *,
    backups: str,
    command: str,
    options: InstallerOptions,
    environ: Mapping[str, str],
    wrapper: Sequence[str] = (),
    echo: bool = False,
    notify: Notify | None = None,
) -> RunResult:
    """Run STEPS in order, each backed up first; on the first failure, roll everything back.

    WRAPPER is a command prefix (a test hook: fault injection around the real installer).
    An exception (Ctrl-C included) also rolls back, then propagates. A SIGKILL leaves the
    journal ``in-progress`` for ``libdoctor restore``.
    """
    _check_installers(steps, wrapper)
    say = notify or (lambda _text: None)
    session = BackupSession(backups, target.prefix, command)
    results: list[StepResult] = []
    try:
        say(f"backup {session.info.id} in {session.path}")
        for number, step in enumerate(steps, start=1):
            env = build_environment(target)
            saved = session.save(touched_paths(step, env, RealDisk()))
            argv = (*wrapper, *step_argv(step, options))
            session.begin(argv, saved)
            shown = shlex.join(step_argv(step, options))
            say(f"[{number}/{len(steps)}] {shown}  ({saved} files backed up)")
            code, output = _execute(argv, _child_env(environ, session.tmpdir), echo)
            session.end(code, output)
            results.append(StepResult(step, argv, code, saved, output))
            if code != 0:
                say(f"step {number} failed (exit {code}): rolling back")
                rollback = session.rollback()
                return RunResult(rollback.backup, tuple(results), rollback)
    except BaseException:
        say("interrupted: rolling back")
        session.rollback()
        raise
    return RunResult(session.finish("done"), tuple(results), None)


def recheck(target: Target, libraries: LoaderContext | None) -> list[Finding]:
    """``check`` on the target as it is now (after a repair)."""
    return run_checks(build_environment(target), RealDisk(), None, libraries)


# --------------------------------------------------------------------------- requirements


@dataclass(frozen=True, slots=True)
class ResolvedWheels:
    wheels: tuple[str, ...]  # local wheel files, in the order pip would install them
    notes: tuple[str, ...]  # what could not be predicted (sdists), or nothing to install


def _pip(target: Target) -> str:
    if target.python is None:
        raise LibdoctorError(f"no interpreter found in {target.prefix}: cannot ask its pip")
    return target.python


def _query_env(environ: Mapping[str, str]) -> dict[str, str]:
    env = dict(environ)
    env.update({"PIP_NO_INPUT": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    return env


def resolve_requirements(
    target: Target,
    requirements: Sequence[str],
    *,
    options: InstallerOptions,
    cache_dir: str,
    environ: Mapping[str, str],
    echo: bool = False,
    notify: Notify | None = None,
) -> ResolvedWheels:
    """The wheels ``pip install REQ...`` would install into TARGET, fetched into the cache.

    Resolved by the target's own pip against what is installed (no ``--ignore-installed``):
    a requirement already satisfied installs nothing, exactly as pip would do.
    """
    say = notify or (lambda _text: None)
    python = _pip(target)
    argv = [python, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-"]
    argv += [*options.args(), *requirements]
    say(f"resolving {' '.join(requirements)} with {python} -m pip")
    done = subprocess.run(
        argv, env=_query_env(environ), stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"]
        reason = next((line for line in lines if "ERROR" in line), lines[-1])
        raise LibdoctorError(f"pip could not resolve {' '.join(requirements)}: {reason.strip()}")
    try:
        report = json.loads(done.stdout)
        items = report["install"]
    except (ValueError, KeyError, TypeError):
        raise LibdoctorError(
            "pip --dry-run --report gave no usable report (needs pip >= 22.2)"
        ) from None
    wheels: list[str] = []
    notes: list[str] = []
    if not items:
        notes.append(f"{' '.join(requirements)}: already satisfied, pip would install nothing")
    for item in items:
        meta = item.get("metadata", {})
        label = f"{meta.get('name', '?')} {meta.get('version', '?')}"
        info = item.get("download_info", {})
        url = str(info.get("url", ""))
        parsed = urllib.parse.urlparse(url)
        filename = urllib.parse.unquote(os.path.basename(parsed.path))
        if not filename.endswith(".whl"):
            notes.append(f"{label} would be built from {filename or url}: its files are unknown")
            continue
        sha256 = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
        if parsed.scheme == "file":
            wheels.append(urllib.request.url2pathname(parsed.path))
            continue
        wheels.append(_fetch(python, url, filename, sha256, options, cache_dir, environ, echo, say))
    return ResolvedWheels(tuple(wheels), tuple(notes))


def _fetch(
    python: str,
    url: str,
    filename: str,
    sha256: str | None,
    options: InstallerOptions,
    cache_dir: str,
    environ: Mapping[str, str],
    echo: bool,
    say: Notify,
) -> str:
    dest_dir = os.path.join(cache_dir, "wheels", hashlib.sha256(url.encode()).hexdigest()[:16])
    dest = os.path.join(dest_dir, filename)
    if os.path.isfile(dest) and (sha256 is None or _file_sha256(dest) == sha256):
        say(f"{filename}: in the cache")
        return dest
    os.makedirs(dest_dir, exist_ok=True)
    say(f"downloading {filename}")
    argv = [python, "-m", "pip", "download", "--no-deps", "--dest", dest_dir, *options.args(), url]
    if not echo:
        argv.insert(3, "--quiet")
    code, output = _execute(argv, _query_env(environ), echo)
    if code != 0 or not os.path.isfile(dest):
        last = (output.strip().splitlines() or [f"exit {code}"])[-1]
        raise LibdoctorError(f"pip download {filename} failed: {last}")
    if sha256 is not None and _file_sha256(dest) != sha256:
        os.unlink(dest)
        raise LibdoctorError(f"{filename}: downloaded file does not match the index's sha256")
    return dest


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
