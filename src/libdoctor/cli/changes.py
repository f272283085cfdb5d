"""What the commands that change the target share (fix, uninstall, install, restore; plan
predicts).

They pass the same index options through to the target's installer, keep backups and
downloads under one cache directory, ask before writing, and run their steps the same way:
a backup before each step, a rollback on failure, then every check again. The guarded two,
``uninstall`` and ``install``, also share their options and their flow: plan, refuse or show,
run, report. Keeping that here keeps each command module a plain parse, call, render, exit.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from libdoctor.cli import common
from libdoctor.cli import progress as bar

if TYPE_CHECKING:
    from libdoctor.environment.installers import InstallerOptions
    from libdoctor.environment.target import Target
    from libdoctor.findings import Finding
    from libdoctor.loader.extensions import LoaderContext
    from libdoctor.repair.run import RunResult
    from libdoctor.whatif.plan import Plan, Step

# A failed installer's output can be long, and its end says why it failed; --json lists
# every problem of a rollback.
_OUTPUT_TAIL = 10
_PROBLEMS_SHOWN = 10


def add_installer_options(parser: argparse.ArgumentParser, *, hooks: bool = True) -> None:
    group = parser.add_argument_group("installer options (passed through to pip or uv)")
    group.add_argument("--find-links", "-f", action="append", default=[], metavar="DIR|URL")
    group.add_argument("--index-url", "-i", metavar="URL")
    group.add_argument("--extra-index-url", action="append", default=[], metavar="URL")
    group.add_argument("--no-index", action="store_true")
    parser.add_argument(
        "--cache-dir", metavar="DIR", help="backups and downloads (default: user cache dir)"
    )
    bar.add_quiet_option(parser)
    if hooks:
        # Test hook: a command prefix put before every installer command (fault injection).
        parser.add_argument("--installer-cmd", help=argparse.SUPPRESS)


def add_guarded_options(parser: argparse.ArgumentParser, *, verb: str, repair_help: str) -> None:
    """What the guarded ``uninstall`` and ``install`` take besides their items: the target,
    the output, and what to do when the plan shows the change breaks something."""
    common.add_target_options(parser, positional=False)
    common.add_output_options(parser)
    common.add_library_option(parser)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--repair", action="store_true", help=repair_help)
    mode.add_argument("--force", action="store_true", help=f"{verb} even if it breaks things")
    parser.add_argument("--dry-run", action="store_true", help="show the plan, run nothing")
    parser.add_argument(
        "-y", "--yes", action="store_true", help="accepted for pip's sake: nothing is asked"
    )


def installer_options(args: argparse.Namespace) -> InstallerOptions:
    """Local --find-links made absolute: the installer runs in another working directory."""
    from libdoctor.environment.installers import InstallerOptions

    return InstallerOptions(
        find_links=tuple(os.path.abspath(p) if os.path.exists(p) else p for p in args.find_links),
        index_url=args.index_url,
        extra_index_urls=tuple(args.extra_index_url),
        no_index=args.no_index,
    )


def cache_dir(args: argparse.Namespace) -> str:
    from libdoctor.disk.hashing import default_cache_dir

    return os.path.abspath(args.cache_dir or default_cache_dir())


def backups_dir(args: argparse.Namespace) -> str:
    from libdoctor.repair.backup import backup_root

    return backup_root(cache_dir(args))


def confirm(question: str, yes: bool, what: str) -> None:
    """Go on with --yes, or a 'y' on a terminal; otherwise a one-line error (exit 2).

    A script that forgot --yes must fail loudly rather than hang on a prompt or, worse,
    change an environment nobody agreed to change."""
    from libdoctor.errors import LibdoctorError

    if yes:
        return
    if not sys.stdin.isatty():
        raise LibdoctorError(f"not running {what} without --yes (stdin is not a terminal)")
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise LibdoctorError("cancelled: nothing was changed")


def refuse_unwritable(target: Target) -> None:
    """A one-line error (exit 2) for a target no repair may write to: ``/``, ``/usr``, or a
    directory without installed distributions."""
    from libdoctor.errors import LibdoctorError
    from libdoctor.repair.scope import write_refusal

    why = write_refusal(target.prefix, [s.path for s in target.site_dirs if not s.inherited])
    if why is not None:
        raise LibdoctorError(why)


def refuse_unrunnable(target: Target, steps: Sequence[Step]) -> None:
    """A one-line error (exit 2) when a step could not run with the target's own interpreter:
    the plan names a placeholder, never a python PATH would pick, and nothing runs."""
    from libdoctor.environment.installers import unrunnable
    from libdoctor.errors import LibdoctorError

    for step in steps:
        why = unrunnable(step.remedy, target)
        if why is not None:
            raise LibdoctorError(f"refused: {why}")


def python_option(target: Target) -> list[str]:
    """``--python PATH`` when it took one to serve TARGET (a ``pip install --target`` folder)."""
    return ["--python", target.python] if target.target_dir and target.python else []


def say(text: str) -> None:
    """Progress and failures go to stderr, so stdout stays the report (and valid JSON)."""
    from libdoctor.report.text import inert

    print(f"libdoctor: {inert(text)}", file=sys.stderr, flush=True)


def write_plan(args: argparse.Namespace, plan: Plan) -> None:
    """The plan as `libdoctor plan` shows it: uninstall shows the same before it runs."""
    from libdoctor.report.json import target_dict
    from libdoctor.report.plan import plan_json, plan_sarif, plan_text

    if args.format == "sarif":
        common.write(plan_sarif(plan))
    elif args.json:
        common.write(plan_json(plan, target_dict(plan.target)))
    else:
        common.write(plan_text(plan, verbose=args.verbose, color=common.use_color(args)))


def guarded_command(
    args: argparse.Namespace, verb: str, items: Sequence[str], target: Target
) -> str:
    """The command line a guarded change's backup journal names: what the user would retype."""
    mode = ["--repair"] if args.repair else ["--force"] if args.force else []
    where = [target.prefix, *python_option(target)]
    return shlex.join(["libdoctor", verb, *items, *where, *mode])


def answer_without_running(
    args: argparse.Namespace, plan: Plan, refusal: str | None, *, idle: bool = False
) -> int | None:
    """The exit code of a guarded change that does not run, its plan shown: refused (1), a
    dry run or IDLE, nothing to do (0). None when it is to run."""
    if refusal is None and not args.dry_run and not idle:
        return None
    write_plan(args, plan)
    if refusal is not None:
        say(refusal)
        return common.EXIT_FINDINGS
    return common.EXIT_OK


def run_guarded(
    args: argparse.Namespace,
    target: Target,
    plan: Plan,
    steps: Sequence[Step],
    libs: LoaderContext | None,
    command: str,
) -> int:
    """Run a guarded change's STEPS (``execute``) and report them with the plan: exit 2 when
    it was rolled back, 1 when it left an error the plan's "before" did not have, else 0."""
    from libdoctor.findings import Severity
    from libdoctor.whatif.plan import diff_findings

    if not args.json:
        write_plan(args, plan)
    result, after = execute(args, target, steps, libs, command)
    _write_result(args, plan, result, after)
    if not result.ok:
        return common.EXIT_ERROR
    new = diff_findings(plan.before, after or ()).new
    return (
        common.EXIT_FINDINGS if any(f.severity >= Severity.ERROR for f in new) else common.EXIT_OK
    )


def _write_result(
    args: argparse.Namespace, plan: Plan, result: RunResult, after: list[Finding] | None
) -> None:
    from libdoctor.report.json import target_dict
    from libdoctor.report.uninstall import uninstall_json, uninstall_text

    if args.json:
        common.write(uninstall_json(plan, target_dict(plan.target), result, after))
    else:
        common.write(uninstall_text(plan, result, after, color=common.use_color(args)))


def execute(
    args: argparse.Namespace,
    target: Target,
    steps: Sequence[Step],
    libs: LoaderContext | None,
    command: str,
) -> tuple[RunResult, list[Finding] | None]:
    """Run STEPS with backup and rollback; then check again (None if it was rolled back)."""
    from libdoctor.repair.run import recheck

    # On a terminal a bar counts the steps and the installer's own output is kept for a
    # failure's tail; --quiet shows neither.
    steps_bar = bar.counter(bar.wanted(args) and not args.json, "installing", len(steps), "steps")
    try:
        result = _run(args, target, steps, command, steps_bar)
    finally:
        if steps_bar is not None:
            steps_bar.close()
    if not result.ok:
        _say_failure(result)
        return result, None
    _prune(args, target)
    return result, recheck(target, libs)


def _run(
    args: argparse.Namespace,
    target: Target,
    steps: Sequence[Step],
    command: str,
    steps_bar: bar.Ticker | None,
) -> RunResult:
    from libdoctor.repair.run import run_steps

    wrapper = tuple(shlex.split(args.installer_cmd)) if args.installer_cmd else ()
    return run_steps(
        target,
        steps,
        backups=backups_dir(args),
        command=command,
        options=installer_options(args),
        environ=os.environ,
        wrapper=wrapper,
        echo=sys.stderr.isatty() and not args.json and not args.quiet and steps_bar is None,
        notify=say,
        step_done=steps_bar,
    )


def _prune(args: argparse.Namespace, target: Target) -> None:
    """After a successful change: keep the newest N backups of this target."""
    from libdoctor.repair.retention import keep_count, prune

    keep = keep_count(os.environ)
    for info in prune(backups_dir(args), target.prefix, keep):
        say(f"pruned backup {info.id} (the newest {keep} are kept)")


def _say_failure(result: RunResult) -> None:
    """Which step failed and how it ended: the target's state decides what the user does next."""
    failed = next(r for r in result.results if r.returncode != 0)
    say(f"{shlex.join(failed.argv)} failed with exit {failed.returncode}")
    for line in failed.output.splitlines()[-_OUTPUT_TAIL:]:
        say(f"  | {line}")
    rollback = result.rollback
    if rollback is not None and rollback.ok:
        say(f"rolled back: the target is as before (backup {result.backup.id})")
    elif rollback is not None:
        say(f"rollback incomplete ({len(rollback.problems)} problems); backup {result.backup.id}")
        for path, why in rollback.problems[:_PROBLEMS_SHOWN]:
            say(f"  {path}: {why}")
