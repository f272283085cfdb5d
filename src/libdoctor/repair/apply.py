"""A change to a target as one transaction: fix, uninstall and install all run their steps
this way, the CLI and the Python API alike.

Each step is backed up first and journaled (``repair.run``); the first failure rolls
everything back. After a run that went well the oldest backups of the target are pruned
(``repair.retention``) and every check runs again; the findings before and after, as
``check`` shows them, and what changed between them travel on the ``Outcome``. What a run
tells as it goes is handed to callables (``Progress``): this module prints nothing.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from libdoctor.analysis.run import run_checks, shown_by_default
from libdoctor.disk.stat import RealDisk
from libdoctor.environment.model import build_environment
from libdoctor.external.installers import InstallerOptions, Notify
from libdoctor.external.process import checkpoint
from libdoctor.findings import Finding, Severity
from libdoctor.repair.backup import backup_root
from libdoctor.repair.run import RunResult, run_steps
from libdoctor.whatif.plan import FindingDiff, Plan, Step, diff_findings

if TYPE_CHECKING:
    from libdoctor.environment.target import Target
    from libdoctor.loader.extensions import LoaderContext
    from libdoctor.repair.fix import FixPlan
    from libdoctor.repair.journal import BackupInfo

__all__ = [
    "ChangeOptions",
    "FixResult",
    "GuardedResult",
    "Outcome",
    "Progress",
    "Ticks",
    "apply",
    "backups_dir",
    "command_line",
    "shown",
]

# A failed installer's output can be long, and its end says why it failed; a rollback's
# problems are all in the result, the first ones are told.
_OUTPUT_TAIL = 10
_PROBLEMS_TOLD = 10


@dataclass(frozen=True, slots=True)
class ChangeOptions:
    """How a change runs. INSTALLER: the index options every install step gets. CACHE_DIR:
    where backups (``<cache>/backups``) and downloads go; None for the user cache dir.
    WRAPPER: a command put before every installer command (a test hook: fault injection).
    KEEP: the backups of the target kept after a change that went well; None for
    ``$LIBDOCTOR_KEEP_BACKUPS``, else 5. ECHO: the installer's output to stderr as it runs
    (when no bar counts the steps). ENVIRON: the installers' environment (None: ours)."""

    installer: InstallerOptions = field(default_factory=InstallerOptions)
    cache_dir: str | None = None
    wrapper: tuple[str, ...] = ()
    keep: int | None = None
    echo: bool = False
    environ: Mapping[str, str] | None = None

    @property
    def cache(self) -> str:
        return _cache(self.cache_dir)

    @property
    def backups(self) -> str:
        return backups_dir(self.cache_dir)

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ if self.environ is None else self.environ


def _cache(cache_dir: str | None) -> str:
    from libdoctor.disk.hashing import default_cache_dir

    return os.path.abspath(cache_dir or default_cache_dir())


def backups_dir(cache_dir: str | None) -> str:
    """Where the changes keep their backups: ``<CACHE_DIR>/backups``; with None, in the user
    cache dir."""
    return backup_root(_cache(cache_dir))


class Ticks(Protocol):
    """A count of items done (a progress bar): told of each item done, closed when the work
    ends, however it ends."""

    def __call__(self, done: int, /) -> None: ...

    def close(self) -> None: ...


def _silent(_text: str) -> None:
    pass


def _uncounted(_label: str, _total: int, _unit: str) -> Ticks | None:
    return None


@dataclass(frozen=True, slots=True)
class Progress:
    """What a change tells as it goes. NOTIFY gets each line (a backup taken, a step started
    or failed, a rollback, a backup pruned). COUNT, given a label, a number of items and
    their unit (``"installing", 3, "steps"``), returns the ``Ticks`` that count them, or
    None. The default tells nothing."""

    notify: Notify = _silent
    count: Callable[[str, int, str], Ticks | None] = _uncounted


@dataclass(frozen=True, slots=True)
class Outcome:
    """A change that ran. BEFORE and AFTER: the findings as ``check`` shows them (AFTER is
    None when it was rolled back); DIFF: what the change resolved, added and kept of them.
    NEW_ERRORS: the change left an error (shown or not) the findings before did not have.
    PRUNED: the older backups of the target removed after it."""

    run: RunResult
    before: tuple[Finding, ...]
    after: tuple[Finding, ...] | None
    diff: FindingDiff | None
    new_errors: bool
    pruned: tuple[BackupInfo, ...] = ()

    @property
    def ok(self) -> bool:
        """Every step ran and exited 0 (nothing was rolled back)."""
        return self.run.ok

    @property
    def errors_left(self) -> bool:
        """An error is shown after the run (``fix``'s verdict)."""
        return any(f.severity >= Severity.ERROR for f in self.after or ())

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The findings of now: after the run, or (rolled back) those of before."""
        return self.after if self.after is not None else self.before


@dataclass(frozen=True, slots=True)
class FixResult:
    """One ``fix``: its plan and, once it ran, how it went (``outcome``; None when nothing
    ran: a dry run, nothing to repair, or not confirmed). BEFORE and PREDICTED: the plan's
    findings before and as simulated after, as ``check`` shows them."""

    target: Target
    plan: FixPlan
    dry_run: bool
    before: tuple[Finding, ...]
    predicted: tuple[Finding, ...]
    outcome: Outcome | None = None

    @property
    def findings(self) -> tuple[Finding, ...]:
        """The findings of now: after the run, else (not run, rolled back) those before."""
        return self.outcome.findings if self.outcome is not None else self.before


@dataclass(frozen=True, slots=True)
class GuardedResult:
    """One guarded ``uninstall`` or ``install``: its plan, the steps it runs (with REPAIR the
    reinstalls that undo its damage), why it was refused (None: it was not), and how the run
    went (``outcome``; None when nothing ran: refused, a dry run, nothing to install, or not
    confirmed)."""

    plan: Plan
    steps: tuple[Step, ...]
    refusal: str | None
    outcome: Outcome | None = None


def shown(findings: Sequence[Finding]) -> tuple[Finding, ...]:
    """The findings ``check`` shows without ``--all`` (``analysis.run.shown_by_default``),
    as the value a change's result keeps."""
    return tuple(shown_by_default(findings))


def command_line(verb: str, items: Sequence[str], target: Target, flags: Sequence[str]) -> str:
    """The command a change's backup journal names: what the user would retype. ``--python``
    when it took one to serve the target (a ``pip install --target`` folder)."""
    python = ["--python", target.python] if target.target_dir and target.python else []
    return shlex.join(["libdoctor", verb, *items, target.prefix, *python, *flags])


def apply(
    target: Target,
    steps: Sequence[Step],
    options: ChangeOptions | None = None,
    progress: Progress | None = None,
    *,
    command: str,
    before: Sequence[Finding],
    libraries: LoaderContext | None,
) -> Outcome:
    """Run STEPS on TARGET with backup, journal and rollback (``run_steps``); after a run that
    went well, prune the older backups and check again. BEFORE: the findings the plan started
    from (all of them); COMMAND: what the journal says ran; LIBRARIES: the loader's inputs for
    the check after (None: no library checks). OPTIONS and PROGRESS: the defaults run with
    the user cache dir and tell nothing."""
    options = options or ChangeOptions()
    progress = progress or Progress()
    ticks = progress.count("installing", len(steps), "steps")
    try:
        result = run_steps(
            target,
            steps,
            backups=options.backups,
            command=command,
            options=options.installer,
            environ=options.env,
            wrapper=options.wrapper,
            echo=options.echo and ticks is None,
            notify=progress.notify,
            step_done=ticks,
        )
    finally:
        if ticks is not None:
            ticks.close()
    if not result.ok:
        _tell_failure(result, progress.notify)
        return Outcome(result, shown(before), None, None, new_errors=False)
    from libdoctor.repair.retention import keep_count, prune  # after a run only

    keep = keep_count(options.env, options.keep)
    pruned = tuple(prune(options.backups, target.prefix, keep))
    for info in pruned:
        progress.notify(f"pruned backup {info.id} (the newest {keep} are kept)")
    checkpoint("recheck")
    after = run_checks(build_environment(target), RealDisk(), None, libraries)
    return _compared(result, before, after, pruned)


def _compared(
    result: RunResult,
    before: Sequence[Finding],
    after: Sequence[Finding],
    pruned: tuple[BackupInfo, ...],
) -> Outcome:
    """The findings before and after, shown and diffed once, for every report of the run."""
    seen_before, seen_after = shown(before), shown(after)
    errors = [f for f in after if f.severity >= Severity.ERROR]
    return Outcome(
        result,
        seen_before,
        seen_after,
        diff_findings(seen_before, seen_after),
        new_errors=bool(diff_findings(before, errors).new),
        pruned=pruned,
    )


def _tell_failure(result: RunResult, notify: Notify) -> None:
    """Which step failed and how it ended: the target's state decides what the user does next."""
    failed = next(r for r in result.results if r.returncode != 0)
    notify(f"{shlex.join(failed.argv)} failed with exit {failed.returncode}")
    for line in failed.output.splitlines()[-_OUTPUT_TAIL:]:
        notify(f"  | {line}")
    rollback = result.rollback
    if rollback is not None and rollback.ok:
        notify(f"rolled back: the target is as before (backup {result.backup.id})")
    elif rollback is not None:
        notify(
            f"rollback incomplete ({len(rollback.problems)} problems); backup {result.backup.id}"
        )
        for path, why in rollback.problems[:_PROBLEMS_TOLD]:
            notify(f"  {path}: {why}")
