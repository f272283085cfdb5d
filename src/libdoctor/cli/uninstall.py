"""``libdoctor uninstall NAME... [TARGET] [--repair|--force]``: a guarded ``pip uninstall``.

The plan runs first. When it breaks something, the uninstall is refused (exit 1, showing what)
unless ``--repair`` (uninstall, then reinstall the damaged co-owners, if the plan proves that
safe) or ``--force``. Every step is backed up and rolled back on failure, like ``fix``.

Exit codes: 0 done and nothing new at error level; 1 refused, or done with new errors (--force);
2 libdoctor could not run, or a step failed and everything was rolled back.
"""

from __future__ import annotations

import argparse
import os
import shlex
from typing import TYPE_CHECKING, Any

from libdoctor.cli import changes, common

if TYPE_CHECKING:
    from libdoctor.findings import Finding
    from libdoctor.repair.fix import RunResult
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
    changes.add_installer_options(uninstall)
    uninstall.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from libdoctor.cli.plan import output
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.findings import Severity
    from libdoctor.whatif.plan import diff_findings, plan_uninstall

    names, target = common.items_and_target(args)
    libs = common.libraries(args)
    plan = plan_uninstall(build_environment(target), RealDisk(), names, libs)
    refusal = None
    steps = plan.steps
    if plan.verdict == "breaks":
        if args.repair and plan.repair_is_safe:
            steps = (*plan.steps, *plan.repair)
        elif args.repair:
            refusal = (
                "refused: no reinstall undoes what this uninstall breaks (--force to do it anyway)"
            )
        elif not args.force:
            hint = " (--repair does it safely)" if plan.repair_is_safe else ""
            refusal = f"refused: the uninstall breaks {len(plan.breaks)} thing(s){hint}"
    outside = [p for r in plan.removals for p in r.outside]
    if outside and not args.force and not _is_venv(target.prefix):
        refusal = refusal or (
            "refused: RECORD names paths outside the prefix and pip deletes those outside a venv "
            "(--force to do it anyway)"
        )
    if refusal is not None or args.dry_run:
        output(args, plan)
        if refusal is not None:
            changes.say(refusal)
            return common.EXIT_FINDINGS
        return common.EXIT_OK
    if not args.json:
        output(args, plan)
    mode = ["--repair"] if args.repair else ["--force"] if args.force else []
    command = shlex.join(["libdoctor", "uninstall", *names, target.prefix, *mode])
    result, after = changes.execute(args, target, steps, libs, command)
    _emit(args, plan, result, after)
    if not result.ok:
        return common.EXIT_ERROR
    new = diff_findings(plan.before, after or ()).new
    return (
        common.EXIT_FINDINGS if any(f.severity >= Severity.ERROR for f in new) else common.EXIT_OK
    )


def _emit(
    args: argparse.Namespace, plan: Plan, result: RunResult, after: list[Finding] | None
) -> None:
    from libdoctor.cli.fix import run_dict, run_lines, shown
    from libdoctor.cli.plan import plan_dict, visible

    if args.json:
        from libdoctor.report import json as json_report

        common.write(
            json_report.render(
                target=common.target_dict(plan.target),
                summary={"stage": "after" if after is not None else "before"},
                findings=shown(after if after is not None else plan.before),
                extra={
                    "plan": plan_dict(visible(plan)),
                    "run": run_dict(result, plan.before, after),
                },
            )
        )
        return
    from libdoctor.report import text as text_report

    lines = run_lines(result, plan.before, after)
    common.write(text_report.to_string(lines, color=common.use_color(args)))


def _is_venv(prefix: str) -> bool:
    return os.path.isfile(os.path.join(prefix, "pyvenv.cfg"))
