"""The Python API: ``check``, ``plan_uninstall`` and ``snapshot`` as values, never printed;
``fix``, ``uninstall``, ``install`` and ``restore``, the changes, with backup and rollback.

The CLI's commands are thin clients of these. Nothing here prints or exits; a failure is a
``LibdoctorError`` with a one-line message. What a change tells as it goes is handed to the
callables of a ``Progress``, and ``confirm`` (when given) sees a change's plan before anything
runs. ``import libdoctor`` reaches this module lazily (``libdoctor.__getattr__``), so
importing the package stays cheap and the analysis stack loads on the first call.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from libdoctor.environment.target import Target, discover
from libdoctor.errors import LibdoctorError

if TYPE_CHECKING:
    from libdoctor.analysis import run
    from libdoctor.analysis.shown import Diagnosis
    from libdoctor.analysis.snapshot import Snapshot
    from libdoctor.disk.hashing import ProgressFactory
    from libdoctor.findings import Finding
    from libdoctor.loader.extensions import LoaderContext
    from libdoctor.repair.apply import ChangeOptions, FixResult, GuardedResult, Progress
    from libdoctor.repair.journal import BackupInfo
    from libdoctor.repair.rollback import RestoreResult
    from libdoctor.whatif.plan import Plan, Step
    from libdoctor.whatif.request import InstallRequest

TargetLike = str | os.PathLike[str] | Target | None


@dataclass(frozen=True, slots=True)
class Report:
    """One ``check``: the findings shown (as ``check`` shows them), their root causes
    (``diagnosis``, grouped once, as the report is made: every format renders these) and
    what was read."""

    target: Target
    findings: tuple[Finding, ...]
    distributions: int
    files: int
    hashing: Mapping[str, int] | None = None
    run: run.Report | None = field(default=None, compare=False, repr=False)
    diagnosis: Diagnosis = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        from libdoctor.analysis.shown import Diagnosis

        object.__setattr__(self, "diagnosis", Diagnosis.of(self.findings))

    def to_json(self) -> dict[str, Any]:
        """The document ``libdoctor check --json`` prints, as a dict."""
        from libdoctor.analysis.shown import check_document
        from libdoctor.document import target_dict

        if self.run is None:
            raise LibdoctorError("this report holds no run to render (internal error)")
        return check_document(self.run, self.diagnosis, target_dict(self.target))


def resolve_target(
    target: TargetLike = None,
    python: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    root: str | None = None,
    files_are_interpreters: bool = True,
) -> Target:
    """TARGET as the CLI finds it, without argparse: a ``Target`` as it is, an environment
    (or site-packages) directory, or an interpreter (a file); with neither, PYTHON, else
    ``$VIRTUAL_ENV``, ``$CONDA_PREFIX``, the running interpreter. ROOT: TARGET is a path as
    the system mounted there names it (``--root``, read inside it). FILES_ARE_INTERPRETERS
    False: a file TARGET is refused, as the CLI's TARGET is a directory (--python names
    the interpreter)."""
    if isinstance(target, Target):
        return target
    if root is not None:
        from libdoctor.environment.target import under_root

        if python is not None or target is None:
            raise LibdoctorError("--root needs TARGET (the path inside the root), not --python")
        return under_root(root, os.fspath(target))
    environ = os.environ if environ is None else environ
    if files_are_interpreters and target is not None and python is None and Path(target).is_file():
        return discover(None, os.fspath(target), environ)
    return discover(None if target is None else os.fspath(target), python, environ)


def check(
    target: TargetLike = None,
    deep: bool = False,
    *,
    python: str | None = None,
    root: str | None = None,
    select: Iterable[str] | None = None,
    ignore: Iterable[str] = (),
    show_all: bool = False,
    libraries: bool = True,
    cache_dir: str | None = None,
    workers: int | None = None,
    progress: ProgressFactory | None = None,
    reuse: bool = False,
    files_are_interpreters: bool = True,
) -> Report:
    """Every check on TARGET (read only), as ``libdoctor check`` runs it. DEEP: also compare
    file hashes. CACHE_DIR: where digests and parsed RECORDs and ELF files are kept between
    runs (``libdoctor check`` passes the user's cache dir), None for no cache. SELECT, IGNORE
    and SHOW_ALL pick the findings shown as ``--select``, ``--ignore`` and ``--all`` do.
    REUSE (with a CACHE_DIR): the findings of the last such run, if nothing it read has
    changed since (``analysis.reuse``); its ``run`` then holds no model (``environment``).
    TARGET, PYTHON, ROOT and FILES_ARE_INTERPRETERS: as ``resolve_target`` reads them, the
    one place the target is discovered."""
    if reuse and cache_dir is not None:
        from libdoctor.analysis.reuse import run_check
    else:
        from libdoctor.analysis.overlap import run_check
    from libdoctor.analysis.run import CheckOptions, filter_findings, loader_context

    found = resolve_target(target, python, root=root, files_are_interpreters=files_are_interpreters)
    options = CheckOptions(
        deep=deep,
        cache_dir=cache_dir,
        workers=workers,
        libraries=functools.partial(loader_context, dict(os.environ), os.getcwd(), found)
        if libraries
        else None,
        caches=dict(os.environ) if found.root == "/" else None,  # not an image's: the host's
    )
    report = run_check(found, options, progress=progress)
    shown = filter_findings(
        report.findings,
        None if select is None else frozenset(select),
        frozenset(ignore),
        show_all,
    )
    return Report(
        target=found,
        findings=tuple(shown),
        distributions=report.distributions,
        files=report.files,
        hashing=report.hashing,
        run=report,
    )


def plan_uninstall(
    target: TargetLike,
    names: Sequence[str],
    *,
    python: str | None = None,
    libraries: bool = True,
) -> Plan:
    """``pip uninstall NAMES`` on TARGET predicted, nothing written: ``Plan.verdict``
    (``safe`` or ``breaks``), ``Plan.breaks`` (the new errors), the repair steps."""
    from libdoctor.analysis.run import loader_context
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.whatif.plan import plan_uninstall as plan

    if isinstance(names, str):
        names = [names]
    if not names:
        raise LibdoctorError("plan_uninstall: name at least one distribution")
    found = resolve_target(target, python)
    context = loader_context(dict(os.environ), os.getcwd(), found) if libraries else None
    return plan(build_environment(found), RealDisk(), list(names), context)


def snapshot(
    target: TargetLike = None,
    deep: bool = False,
    *,
    python: str | None = None,
    cache_dir: str | None = None,
    node: str | None = None,
    progress: ProgressFactory | None = None,
    reuse: bool = False,
) -> Snapshot:
    """TARGET's distributions, files, libraries and findings as ``libdoctor snapshot``
    records them (``to_document``/``encode`` of ``libdoctor.analysis.snapshot`` give its
    JSON). NODE: the machine's name (default: ``$SLURMD_NODENAME``, else the host name).
    CACHE_DIR: as ``check``'s, where digests (with DEEP) and parsed RECORDs and ELF files
    are kept between runs; None for no cache. REUSE (with a CACHE_DIR): as
    ``encoded_snapshot``'s, read back."""
    from libdoctor.analysis.snapshot import decode, node_name, snapshot_target

    if reuse and cache_dir is not None:
        data = encoded_snapshot(
            target, deep, python=python, cache_dir=cache_dir, node=node, progress=progress
        )
        return decode(data, "the stored snapshot")
    found = resolve_target(target, python)
    return snapshot_target(
        found,
        node=node_name(os.environ) if node is None else node,
        deep=deep,
        cache_dir=cache_dir,
        environ=os.environ,
        progress=progress,
    )


def encoded_snapshot(
    target: TargetLike = None,
    deep: bool = False,
    *,
    python: str | None = None,
    cache_dir: str | None = None,
    node: str | None = None,
    progress: ProgressFactory | None = None,
) -> bytes:
    """``snapshot``'s document as ``libdoctor snapshot`` writes it, plain (``gzipped_document``
    of ``libdoctor.analysis.snapshot`` gives its ``.gz``). With a CACHE_DIR, the bytes the
    last such run gave if nothing it read has changed since (``analysis.reuse``): the same
    bytes a new run would give."""
    from libdoctor.analysis.snapshot import encoded_snapshot as encoded
    from libdoctor.analysis.snapshot import node_name

    return encoded(
        resolve_target(target, python),
        node=node_name(os.environ) if node is None else node,
        deep=deep,
        cache_dir=cache_dir,
        environ=os.environ,
        progress=progress,
    )


# --------------------------------------------------------------------------- changes


def _change_context(
    target: TargetLike, python: str | None, libraries: bool
) -> tuple[Target, LoaderContext | None]:
    """TARGET found and refused unless a change may write there; the loader's inputs (the
    caller's: a change is never made inside another system's root)."""
    from libdoctor.analysis.run import loader_context
    from libdoctor.repair.scope import refuse_unwritable

    found = resolve_target(target, python)
    refuse_unwritable(found)
    return found, loader_context(os.environ, os.getcwd()) if libraries else None


def fix(
    target: TargetLike = None,
    *,
    python: str | None = None,
    dry_run: bool = False,
    remove_leftovers: bool = False,
    libraries: bool = True,
    options: ChangeOptions | None = None,
    confirm: Callable[[FixResult], bool] | None = None,
    progress: Progress | None = None,
) -> FixResult:
    """``libdoctor fix`` on TARGET: plan the reinstalls that repair what ``check`` finds (at
    the installed versions, ``--no-deps``; with REMOVE_LEFTOVERS also the uninstall of
    leftovers the plan proves safe), then, unless DRY_RUN, run them through the target's own
    installer with a backup before each step and a rollback on any failure, and check again.
    OPTIONS: the installer's index options, where backups go, how many are kept. CONFIRM,
    when given, sees the plan before anything runs and returns whether to run it. PROGRESS:
    what the run tells as it goes (nothing by default). ``outcome.ok`` is False when a step
    failed and everything was rolled back; ``outcome.errors_left`` when errors remain."""
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.repair.apply import ChangeOptions, FixResult, apply, command_line, shown
    from libdoctor.repair.fix import plan_fix
    from libdoctor.repair.verify import local_wheels

    options = options or ChangeOptions()
    found, context = _change_context(target, python, libraries)
    plan = plan_fix(
        build_environment(found),
        RealDisk(),
        remove_leftovers=remove_leftovers,
        libraries=context,
        wheels=local_wheels(options.installer.find_links),
    )
    fixed = FixResult(found, plan, dry_run, shown(plan.before), shown(plan.predicted))
    if dry_run or not plan.steps or (confirm is not None and not confirm(fixed)):
        return fixed
    command = command_line("fix", (), found, ())
    outcome = apply(
        found, plan.steps, options, progress, command=command, before=plan.before, libraries=context
    )
    return replace(fixed, outcome=outcome)


def uninstall(
    target: TargetLike,
    names: Sequence[str],
    *,
    python: str | None = None,
    repair: bool = False,
    force: bool = False,
    dry_run: bool = False,
    libraries: bool = True,
    options: ChangeOptions | None = None,
    confirm: Callable[[GuardedResult], bool] | None = None,
    progress: Progress | None = None,
) -> GuardedResult:
    """``pip uninstall NAMES`` on TARGET, guarded: planned first (``plan_uninstall``); when
    the plan breaks something it is refused (``refusal`` says why) unless REPAIR (then also
    reinstall the co-owners whose files it deletes, if the plan proves that safe) or FORCE;
    a deletion outside the target is refused, FORCE or not. Run as ``fix`` runs its steps
    (OPTIONS, CONFIRM and PROGRESS as there); ``outcome.new_errors`` when it left an error
    the environment did not have before."""
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.repair.apply import GuardedResult
    from libdoctor.whatif import plan as whatif

    names = [names] if isinstance(names, str) else list(names)
    if not names:
        raise LibdoctorError("uninstall: name at least one distribution")
    found, context = _change_context(target, python, libraries)
    plan = whatif.plan_uninstall(build_environment(found), RealDisk(), names, context)
    refusal = whatif.guard_refusal(plan, repair=repair, force=force)
    guarded = GuardedResult(plan, plan.steps_to_run(repair=repair), refusal)
    if refusal is not None or dry_run or (confirm is not None and not confirm(guarded)):
        return guarded
    return _run_guarded(guarded, names, context, options, progress, repair=repair, force=force)


def install(
    target: TargetLike,
    items: Sequence[str] | InstallRequest,
    *,
    python: str | None = None,
    repair: bool = False,
    force: bool = False,
    dry_run: bool = False,
    libraries: bool = True,
    options: ChangeOptions | None = None,
    confirm: Callable[[GuardedResult], bool] | None = None,
    progress: Progress | None = None,
) -> GuardedResult:
    """``pip install ITEMS`` (wheel files and requirements, or an ``InstallRequest`` with
    pip's ``-r``/``-c`` files) on TARGET, guarded as ``uninstall`` is: planned first as
    ``libdoctor plan install`` plans it (requirements resolved by the target's own pip, with
    OPTIONS' index options and cache), refused when it overwrites another distribution's
    files with other bytes or breaks anything else, unless REPAIR or FORCE; then run through
    the target's own installer (pip, or uv in a uv-made environment)."""
    from libdoctor.repair.apply import ChangeOptions, GuardedResult, Progress
    from libdoctor.whatif.request import install_refusal, plan_request, with_steps

    options = options or ChangeOptions()
    progress = progress or Progress()
    request = _install_request(items)
    found, context = _change_context(target, python, libraries)
    planned = plan_request(
        found,
        request,
        options=options.installer,
        cache_dir=options.cache,
        environ=options.env,
        libraries=context,
        notify=progress.notify,
        progress=lambda total: progress.count("reading wheel indexes", total, "wheels"),
    )
    plan = with_steps(planned, request, context)
    refusal = install_refusal(plan, repair=repair, force=force)
    guarded = GuardedResult(plan, plan.steps_to_run(repair=repair), refusal)
    if refusal is not None or dry_run or not plan.subjects:
        return guarded
    _refuse_without_uv(guarded.steps, options.env)
    if confirm is not None and not confirm(guarded):
        return guarded
    named = request.argv_items()
    return _run_guarded(guarded, named, context, options, progress, repair=repair, force=force)


def _install_request(items: Sequence[str] | InstallRequest) -> InstallRequest:
    """Wheel files (existing ``.whl`` paths, read as they are) and requirements."""
    from libdoctor.whatif.request import InstallRequest

    if isinstance(items, InstallRequest):
        return items
    named = [items] if isinstance(items, str) else list(items)
    wheels = [i for i in named if i.endswith(".whl") and os.path.isfile(i)]
    return InstallRequest(
        wheels=tuple(wheels), requirements=tuple(i for i in named if i not in wheels)
    )


def _refuse_without_uv(steps: Sequence[Step], environ: Mapping[str, str]) -> None:
    from libdoctor.remedy import program
    from libdoctor.repair.run import require_uv

    if any(program(step.remedy) == "uv" for step in steps):
        require_uv(environ, "the environment was made by uv")


def _run_guarded(
    guarded: GuardedResult,
    items: Sequence[str],
    libraries: LoaderContext | None,
    options: ChangeOptions | None,
    progress: Progress | None,
    *,
    repair: bool,
    force: bool,
) -> GuardedResult:
    """The guarded change run; its journal names the command as the user would retype it."""
    from libdoctor.repair.apply import apply, command_line

    plan = guarded.plan
    mode = ["--repair"] if repair else ["--force"] if force else []
    command = command_line(plan.action, items, plan.target, mode)
    outcome = apply(
        plan.target,
        guarded.steps,
        options,
        progress,
        command=command,
        before=plan.before,
        libraries=libraries,
    )
    return replace(guarded, outcome=outcome)


@dataclass(frozen=True, slots=True)
class Backups:
    """The backups under ROOT (``<cache>/backups``), oldest first, and why each damaged one
    was skipped."""

    root: str
    found: tuple[BackupInfo, ...]
    damaged: tuple[str, ...]


def backups(cache_dir: str | None = None) -> Backups:
    """The backups the changes took, in CACHE_DIR (None: the user cache dir)."""
    from libdoctor.repair.apply import backups_dir
    from libdoctor.repair.journal import scan_backups

    root = backups_dir(cache_dir)
    found, damaged = scan_backups(root)
    return Backups(root, tuple(found), tuple(damaged))


def restore(
    backup: str | None = None,
    *,
    cache_dir: str | None = None,
    dry_run: bool = False,
    yes: bool = False,
) -> RestoreResult:
    """``libdoctor restore``: put back what a change's run changed, byte for byte. BACKUP: an
    id (``backups().found``) or a backup directory; None for the latest backup a killed or
    failed run left to restore. Only the run's own change is undone; what else changed is
    left alone (``left_alone``). When someone changed the run's own paths after it ended,
    nothing is done (``refused``) unless YES. ``RestoreResult.ok``: restored and verified."""
    from libdoctor.repair.apply import backups_dir
    from libdoctor.repair.journal import locate
    from libdoctor.repair.rollback import restore as put_back

    return put_back(locate(backups_dir(cache_dir), backup), dry_run=dry_run, yes=yes)
