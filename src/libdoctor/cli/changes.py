"""What the commands that change the target share (fix, uninstall, install, restore; plan
predicts).

They pass the same index options through to the target's installer, keep backups and
downloads under one cache directory (``change_options``), show the run's progress on stderr
(``progress``) and ask before writing; the run itself (a backup before each step, a rollback
on failure, then every check again) is the core's, through the API (``repair.apply``). The
guarded two, ``uninstall`` and ``install``, also share their flow: plan, refuse or show, run,
report (``ready``, ``answer``). Keeping that here keeps each command module a plain parse,
call, render, exit.
"""

from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from libdoctor.cli import common
from libdoctor.cli import progress as bar

if TYPE_CHECKING:
    from libdoctor.environment.target import Target
    from libdoctor.external.installers import InstallerOptions
    from libdoctor.repair.apply import ChangeOptions, GuardedResult, Outcome, Progress
    from libdoctor.whatif.plan import Plan, Step
    from libdoctor.whatif.request import InstallRequest


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
    from libdoctor.external.installers import InstallerOptions

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


def change_options(args: argparse.Namespace) -> ChangeOptions:
    """How a change runs, from the command's installer options, --cache-dir and hooks. The
    installer's own output goes to a terminal only when no bar counts the steps."""
    from libdoctor.repair.apply import ChangeOptions

    return ChangeOptions(
        installer=installer_options(args),
        cache_dir=args.cache_dir,
        wrapper=tuple(shlex.split(args.installer_cmd)) if args.installer_cmd else (),
        echo=sys.stderr.isatty() and not args.json and not args.quiet,
    )


def progress(args: argparse.Namespace) -> Progress:
    """Lines as ``say`` writes them; on a terminal, a bar for what is counted (--quiet: none)."""
    from libdoctor.repair.apply import Progress

    return Progress(
        notify=say, count=functools.partial(bar.counter, bar.wanted(args) and not args.json)
    )


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


def refuse_unrunnable(target: Target, steps: Sequence[Step]) -> None:
    """A one-line error (exit 2) when a step could not run with the target's own interpreter:
    the plan names a placeholder, never a python PATH would pick, and nothing runs."""
    from libdoctor.errors import LibdoctorError
    from libdoctor.external.installers import unrunnable

    for step in steps:
        why = unrunnable(step.remedy, target)
        if why is not None:
            raise LibdoctorError(f"refused: {why}")


def say(text: str) -> None:
    """Progress and failures go to stderr, so stdout stays the report (and valid JSON)."""
    from libdoctor.report.text import inert

    print(f"libdoctor: {inert(text)}", file=sys.stderr, flush=True)


def write_plan(args: argparse.Namespace, plan: Plan) -> None:
    """The plan as `libdoctor plan` shows it: uninstall shows the same before it runs."""
    from libdoctor.document import target_dict
    from libdoctor.report.plan import plan_json, plan_sarif, plan_text

    if args.format == "sarif":
        common.write(plan_sarif(plan))
    elif args.json:
        common.write(plan_json(plan, target_dict(plan.target)))
    else:
        common.write(plan_text(plan, verbose=args.verbose, color=common.use_color(args)))


def ready(args: argparse.Namespace) -> Callable[[GuardedResult], bool]:
    """What a guarded change does before it runs: refused (exit 2) when a step could not run
    with the target's own interpreter; the plan shown, unless --json (it then comes with the
    run in one document)."""

    def go(guarded: GuardedResult) -> bool:
        refuse_unrunnable(guarded.plan.target, guarded.steps)
        if not args.json:
            write_plan(args, guarded.plan)
        return True

    return go


def guarded_change(
    args: argparse.Namespace,
    change: Callable[..., GuardedResult],
    items: Sequence[str] | InstallRequest,
    target: Target,
) -> int:
    """A guarded command's run: CHANGE (``api.install`` or ``api.uninstall``) of ITEMS on
    TARGET with the options both commands take, then its ``answer``."""
    guarded = change(
        target,
        items,
        repair=args.repair,
        force=args.force,
        dry_run=args.dry_run,
        libraries=not args.no_libraries,
        options=change_options(args),
        confirm=ready(args),
        progress=progress(args),
    )
    return answer(args, guarded)


def answer(args: argparse.Namespace, guarded: GuardedResult) -> int:
    """A guarded change's report and exit code. Not run: its plan shown, and refused (1), or
    a dry run or nothing to do (0); a plan it could not run is refused (2), dry run or not.
    Run: 2 when it was rolled back, 1 when it left an error the plan's "before" did not have,
    else 0."""
    outcome = guarded.outcome
    if outcome is None:
        refuse_unrunnable(guarded.plan.target, guarded.steps)
        write_plan(args, guarded.plan)
        if guarded.refusal is not None:
            say(guarded.refusal)
            return common.EXIT_FINDINGS
        return common.EXIT_OK
    _write_run(args, guarded.plan, outcome)
    if not outcome.ok:
        return common.EXIT_ERROR
    return common.EXIT_FINDINGS if outcome.new_errors else common.EXIT_OK


def _write_run(args: argparse.Namespace, plan: Plan, outcome: Outcome) -> None:
    from libdoctor.document import target_dict
    from libdoctor.report.uninstall import uninstall_json, uninstall_text

    if args.json:
        common.write(uninstall_json(plan, target_dict(plan.target), outcome))
    else:
        common.write(uninstall_text(outcome, color=common.use_color(args)))
