"""``libdoctor fix [TARGET] [--python PATH] [--dry-run] [--yes] [--remove-leftovers]``.

From the current findings, a plan of installer commands (reinstall damaged distributions at
their installed versions with ``--no-deps``, one call per installer and interpreter), shown,
then run through the environment's own installer and interpreter with a backup before each
step and a rollback on any failure; then ``check`` again, before and after. Without ``--yes``
it asks on a terminal and refuses otherwise. A plan it could not run with the target's own
interpreter (a ``pip install --target`` folder without ``--python``) is refused, dry run or not.

Exit codes: 0 nothing left at error level; 1 errors remain (or the plan was not run); 2 libdoctor
could not run (or refused the plan), or a step failed and everything was rolled back.
"""

from __future__ import annotations

import argparse
import functools
from typing import TYPE_CHECKING

from libdoctor.cli import changes, common

if TYPE_CHECKING:
    from libdoctor.external.installers import InstallerOptions
    from libdoctor.repair.apply import FixResult


COMMAND = common.Command(
    help="repair what check finds: reinstall damaged distributions, with backup and rollback",
    description="Plan installer commands from the current findings (reinstall damaged "
    "distributions at their installed versions with --no-deps), show them, run them with a "
    "backup before each step and a rollback on any failure, then check again.",
    options=(
        common.add_target_options,
        common.add_output_options,
        common.add_library_option,
        common.argument("--dry-run", action="store_true", help="show the plan, run nothing"),
        common.argument("-y", "--yes", action="store_true", help="run without asking"),
        common.argument(
            "--remove-leftovers",
            action="store_true",
            help="also uninstall cuda-mixed-major leftovers when the plan proves it safe",
        ),
        changes.add_installer_options,
    ),
)


def run(args: argparse.Namespace) -> int:
    from libdoctor.api import fix

    options, progress = changes.change_options(args), changes.progress(args)
    target = common.discover_target(args)
    fixed = fix(
        target,
        dry_run=args.dry_run,
        remove_leftovers=args.remove_leftovers,
        libraries=not args.no_libraries,
        options=options,
        confirm=functools.partial(_confirm, args, options.installer),
        progress=progress,
    )
    if fixed.outcome is None:  # a dry run, or nothing to repair
        changes.refuse_unrunnable(target, fixed.plan.steps)
    code = _exit_code(fixed)
    _write(args, fixed, options.installer)
    return code


def _exit_code(fixed: FixResult) -> int:
    """Not run: 1 when errors are predicted after the plan. Run: 2 when it was rolled back,
    1 when errors remain, else 0."""
    outcome = fixed.outcome
    if outcome is None:
        return common.exit_code(fixed.predicted, "error")
    if not outcome.ok:
        return common.EXIT_ERROR
    return common.EXIT_FINDINGS if outcome.errors_left else common.EXIT_OK


def _confirm(args: argparse.Namespace, options: InstallerOptions, fixed: FixResult) -> bool:
    """Before the plan runs: refused when a step could not run with the target's own
    interpreter; shown (unless --json); then --yes, or a 'y' on a terminal."""
    from libdoctor.checks.wording import plural

    changes.refuse_unrunnable(fixed.target, fixed.plan.steps)
    if not args.json:
        _write(args, fixed, options)
    n = len(fixed.plan.steps)
    what = "this step" if n == 1 else f"these {n} steps"
    changes.confirm(f"Run {what}?", args.yes, plural(n, "repair step"))
    return True


def _write(args: argparse.Namespace, fixed: FixResult, options: InstallerOptions) -> None:
    """The plan; once it ran, how running it went (the JSON then has both in one document)."""
    from libdoctor.document import target_dict
    from libdoctor.report.fix import fix_json, fix_text

    color = common.use_color(args)
    if args.json:
        common.write(fix_json(target_dict(fixed.target), fixed, options))
    else:
        common.write(fix_text(fixed, options, color=color))
