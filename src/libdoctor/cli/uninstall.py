"""``libdoctor uninstall NAME... [TARGET] [--repair|--force]``: a guarded ``pip uninstall``.

The plan runs first. When it breaks something, the uninstall is refused (exit 1, showing what)
unless ``--repair`` (uninstall, then reinstall the damaged co-owners, if the plan proves that
safe) or ``--force``. Every step is backed up and rolled back on failure, like ``fix``.

Every step runs with the target's own interpreter; an uninstall it cannot run so (pip cannot
uninstall from a ``pip install --target`` folder; a folder without ``--python``) is refused
before anything runs, dry run or not.

Exit codes: 0 done and nothing new at error level; 1 refused, or done with new errors (--force);
2 libdoctor could not run (or cannot run this uninstall), or a step failed and everything was
rolled back.
"""

from __future__ import annotations

import argparse
import shlex
from typing import TYPE_CHECKING, Any

from libdoctor.cli import changes, common

if TYPE_CHECKING:
    from libdoctor.findings import Finding
    from libdoctor.repair.run import RunResult
    from libdoctor.whatif.plan import Plan


def register(sub: Any) -> None:
    uninstall = sub.add_parser(
        "uninstall",
        help="pip uninstall, refused when it would break another distribution",
        description="Uninstall distributions with the environment's own installer, after "
        "planning it: refused when the plan shows it breaks something, unless --repair "
        "(also reinstall the damaged co-owners) or --force. TARGET, if given, is the last "
        "argument. Backed up and rolled back on failure.",
    )
    uninstall.add_argument("items", nargs="+", metavar="NAME... [TARGET]")
    common.add_target_options(uninstall, positional=False)
    common.add_output_options(uninstall)
    common.add_library_option(uninstall)
    mode = uninstall.add_mutually_exclusive_group()
    mode.add_argument(
        "--repair",
        action="store_true",
        help="then reinstall the co-owners whose files the uninstall deletes",
    )
    mode.add_argument("--force", action="store_true", help="uninstall even if it breaks things")
    uninstall.add_argument("--dry-run", action="store_true", help="show the plan, run nothing")
    uninstall.add_argument(
        "-y", "--yes", action="store_true", help="accepted for pip's sake: nothing is asked"
    )
    changes.add_installer_options(uninstall)
    uninstall.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.findings import Severity
    from libdoctor.whatif.plan import diff_findings, guard_refusal, plan_uninstall

    names, target = common.items_and_target(args)
    changes.refuse_unwritable(target)
    libs = common.libraries(args)
    plan = plan_uninstall(build_environment(target), RealDisk(), names, libs)
    changes.refuse_unrunnable(target, plan.steps_to_run(repair=args.repair))
    refusal = guard_refusal(plan, repair=args.repair, force=args.force)
    if refusal is not None or args.dry_run:
        changes.write_plan(args, plan)
        if refusal is not None:
            changes.say(refusal)
            return common.EXIT_FINDINGS
        return common.EXIT_OK
    if not args.json:
        changes.write_plan(args, plan)
    steps = plan.steps_to_run(repair=args.repair)
    mode = ["--repair"] if args.repair else ["--force"] if args.force else []
    where = [target.prefix, *changes.python_option(target)]
    command = shlex.join(["libdoctor", "uninstall", *names, *where, *mode])
    result, after = changes.execute(args, target, steps, libs, command)
    _write(args, plan, result, after)
    if not result.ok:
        return common.EXIT_ERROR
    new = diff_findings(plan.before, after or ()).new
    return (
        common.EXIT_FINDINGS if any(f.severity >= Severity.ERROR for f in new) else common.EXIT_OK
    )


def _write(
    args: argparse.Namespace, plan: Plan, result: RunResult, after: list[Finding] | None
) -> None:
    from libdoctor.report.json import target_dict
    from libdoctor.report.uninstall import uninstall_json, uninstall_text

    if args.json:
        common.write(uninstall_json(plan, target_dict(plan.target), result, after))
    else:
        common.write(uninstall_text(plan, result, after, color=common.use_color(args)))
