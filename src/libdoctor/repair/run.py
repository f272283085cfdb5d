"""Running a repair's steps: each backed up first, run through the environment's own
installer, journaled; on the first failure (or an interrupt) everything is rolled back.
Installer output goes to our stderr when asked (progress on a terminal), never to stdout.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from libdoctor.disk.stat import Disk, RealDisk
from libdoctor.environment.model import Environment, build_environment, is_inside
from libdoctor.environment.target import Target
from libdoctor.environment.wheel import read_wheel, wheel_distribution
from libdoctor.errors import LibdoctorError
from libdoctor.external.installers import (
    InstallerOptions,
    Notify,
    find_uv,
    folder_entries,
    installer_env,
    runnable_argv,
    unrunnable,
)
from libdoctor.external.process import (
    Terminated,
    quiet_signals,
    run_installer,
    terminated_by_signal,
)
from libdoctor.remedy import RUNNABLE, Install, Reinstall
from libdoctor.repair.backup import BackupSession
from libdoctor.repair.journal import BackupInfo
from libdoctor.repair.rollback import RestoreResult
from libdoctor.repair.targetdir import replaced_files
from libdoctor.whatif.plan import Step
from libdoctor.whatif.simulation import removal_set

__all__ = [
    "RunResult",
    "StepResult",
    "run_steps",
    "step_argv",
    "touched_paths",
]


def step_argv(step: Step, options: InstallerOptions) -> tuple[str, ...]:
    """The command a step runs: install steps get the index options (uninstall takes none)."""
    return step.argv + options.args() if step.action != "uninstall" else step.argv


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
    by_dir = {d.metadata_dir: d for d in env.distributions}
    for planned in step.dists:
        current = by_dir.get(planned.metadata_dir)
        if current is not None and current.record is not None:
            removal = removal_set(current, env, disk)
            paths += removal.files
            paths += _bytecode_of(removal.files, disk)
    folder = env.target.target_dir
    remedy = step.remedy
    upgrades = isinstance(remedy, (Reinstall, Install)) and remedy.via.upgrades_folder
    if folder and step.action == "reinstall" and upgrades:
        # pip replaces each top-level entry it writes whole, unowned files and all
        entries = {
            e for d in step.dists for e in folder_entries(by_dir.get(d.metadata_dir, d), folder)
        }
        paths += replaced_files(folder, entries)
    if step.wheel is not None:
        wheel = read_wheel(step.wheel)
        for old in env.distributions:
            if old.key == wheel.key and not old.site.inherited and old.record is not None:
                paths += removal_set(old, env, disk).files
        _, files = wheel_distribution(wheel, env.target)
        paths += [p for p in files if disk.stat(p).exists]
    paths += [p for p in step.writes if disk.stat(p).exists]
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


def _check_installers(
    target: Target, steps: Sequence[Step], wrapper: Sequence[str], environ: Mapping[str, str]
) -> None:
    """Refuse before the first step: an interpreter that is a placeholder or not an absolute
    path (PATH never chooses it), an installer libdoctor does not run, uv not found."""
    for step in steps:
        why = unrunnable(step.remedy, target)
        if why is not None:
            raise LibdoctorError(why)
    if wrapper:
        return
    for step in steps:
        if step.installer not in RUNNABLE:
            raise LibdoctorError(f"{step.name} is managed by {step.installer}: not run here")
        if step.installer == "uv":
            require_uv(environ, f"{step.name} was installed by uv")


def require_uv(environ: Mapping[str, str], why: str) -> None:
    """Refuse unless uv is found (``find_uv``); WHY: what needs it."""
    try:
        find_uv(environ)
    except LibdoctorError as exc:
        raise LibdoctorError(f"{why}, and {exc}") from None


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
    step_done: Callable[[int], None] | None = None,
) -> RunResult:
    """Run STEPS in order, each backed up first; on the first failure, roll everything back.

    WRAPPER is a command prefix (a test hook: fault injection around the real installer).
    SIGINT or SIGTERM stops the installer and rolls back like a failure, then is a one-line
    error; any other exception also rolls back, then propagates. A SIGKILL leaves the journal
    ``in-progress`` for ``libdoctor restore`` (the installer dies with libdoctor).
    STEP_DONE is told of each step that finished well (1 each time: a progress bar's tick).
    """
    _check_installers(target, steps, wrapper, environ)
    say = notify or (lambda _text: None)
    with terminated_by_signal():
        try:
            session = BackupSession(backups, target.prefix, command, notify=say)
        except Terminated:
            raise LibdoctorError("interrupted by SIGTERM: nothing was changed") from None
        try:
            say(f"backup {session.info.id} in {session.path}")
            talk = _Talk(echo, say, step_done or (lambda _n: None))
            return _run_each(session, target, steps, options, environ, wrapper, talk)
        except (KeyboardInterrupt, Terminated) as exc:
            name = exc.signal_name if isinstance(exc, Terminated) else "SIGINT"
            raise LibdoctorError(_interrupted(session, name, say)) from None
        except BaseException:
            if session.info.state == "in-progress":
                say("interrupted: rolling back")
                with quiet_signals():
                    session.rollback()
            raise


def _interrupted(session: BackupSession, name: str, say: Notify) -> str:
    """Roll back after signal NAME; what to tell the user, in one line. A signal that arrives
    once the run has ended (done, or already rolled back after a failed step) undoes nothing."""
    if session.info.state != "in-progress":
        return (
            f"interrupted by {name} after the run ended: backup {session.info.id} "
            f"is {session.info.state}"
        )
    say(f"{name}: rolling back")
    with quiet_signals():
        undone = session.rollback()
    if undone.ok:
        return f"interrupted by {name}: rolled back, the target is as before ({undone.backup.id})"
    return (
        f"interrupted by {name}: rollback incomplete ({len(undone.problems)} problems); "
        f"run `libdoctor restore {undone.backup.id}`"
    )


@dataclass(frozen=True, slots=True)
class _Talk:
    """What a run tells the user as it goes: the installer's output (ECHO), lines, steps done."""

    echo: bool
    say: Notify
    step_done: Callable[[int], None]


def _run_each(
    session: BackupSession,
    target: Target,
    steps: Sequence[Step],
    options: InstallerOptions,
    environ: Mapping[str, str],
    wrapper: Sequence[str],
    talk: _Talk,
) -> RunResult:
    say = talk.say
    results: list[StepResult] = []
    for number, step in enumerate(steps, start=1):
        touched = touched_paths(step, build_environment(target), RealDisk())
        saved = session.save(touched)
        # The wrapper (a test hook) runs the installer itself; otherwise `uv` is the one
        # find_uv found, also when it is not on PATH.
        command = step_argv(step, options)
        command = command if wrapper else runnable_argv(command, environ)
        argv = (*wrapper, *command)
        session.begin(argv, saved)
        shown = shlex.join(command)
        say(f"[{number}/{len(steps)}] {shown}  ({saved} files backed up)")
        run_env = installer_env(environ, session.tmpdir)
        code, output = run_installer(argv, run_env, talk.echo, started=session.started)
        session.end(code, output)
        results.append(StepResult(step, argv, code, saved, output))
        if code != 0:
            say(f"step {number} failed (exit {code}): rolling back")
            with quiet_signals():
                rollback = session.rollback()
            return RunResult(rollback.backup, tuple(results), rollback)
        talk.step_done(1)
    return RunResult(session.finish("done"), tuple(results), None)
