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
import shlex
from typing import TYPE_CHECKING

from libdoctor.cli import changes, common

if TYPE_CHECKING:
    from libdoctor.environment.installers import InstallerOptions
    from libdoctor.environment.target import Target
    from libdoctor.findings import Finding
    from libdoctor.repair.fix import FixPlan
    from libdoctor.repair.run import RunResult


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
    from libdoctor.checks.wording import plural
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.repair.fix import plan_fix
    from libdoctor.repair.verify import local_wheels
    from libdoctor.report.shown import shown

    target = common.discover_target(args)
    changes.refuse_unwritable(target)
    libs = common.libraries(args)
    options = changes.installer_options(args)
    fix = plan_fix(
        build_environment(target),
        RealDisk(),
        remove_leftovers=args.remove_leftovers,
        libraries=libs,
        wheels=local_wheels(options.find_links),
    )
    changes.refuse_unrunnable(target, fix.steps)
    if args.dry_run or not fix.steps:
        _write(args, target, fix, options)
        return common.exit_code(shown(fix.predicted), "error")
    if not args.json:
        _write(args, target, fix, options)
    n = len(fix.steps)
    what = "this step" if n == 1 else f"these {n} steps"
    changes.confirm(f"Run {what}?", args.yes, plural(n, "repair step"))
    command = shlex.join(["libdoctor", "fix", target.prefix, *changes.python_option(target)])
    result, after = changes.execute(args, target, fix.steps, libs, command)
    _write(args, target, fix, options, result, after)
    if not result.ok:
        return common.EXIT_ERROR
    return common.exit_code(shown(after or ()), "error")


def _write(
    args: argparse.Namespace,
    target: Target,
    fix: FixPlan,
    options: InstallerOptions,
    result: RunResult | None = None,
    after: list[Finding] | None = None,
) -> None:
    """The plan; with RESULT, how running it went (the JSON then has both in one document)."""
    from libdoctor.report.fix import fix_json, fix_text
    from libdoctor.report.json import target_dict

    if args.json:
        document = fix_json(target_dict(target), fix, options, result, after, dry_run=args.dry_run)
        common.write(document)
    else:
        common.write(fix_text(target, fix, options, result, after, color=common.use_color(args)))
