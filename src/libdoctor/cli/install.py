"""``libdoctor install WHEEL|REQ... [TARGET] [--repair|--force]``: a guarded ``pip install``,
the twin of ``uninstall``.

The plan runs first, exactly as ``plan install`` runs it (requirements resolved by the
target's own pip). When the install would overwrite another distribution's file with other
bytes, break a requirement or mix a CUDA stack (any new error), it is refused (exit 1,
showing what) unless ``--repair`` (install, then reinstall the damaged co-owners, if the plan
proves both end whole) or ``--force``. The install runs through the environment's own
installer (pip, or ``uv pip install --python`` in a uv-made environment), backed up and
rolled back on failure.

Exit codes: 0 done and nothing new at error level; 1 refused, or done with new errors (--force);
2 libdoctor could not run, or a step failed and everything was rolled back.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.cli import changes, common
from libdoctor.cli.plan import add_request_options, request_and_target

if TYPE_CHECKING:
    from libdoctor.environment.target import Target
    from libdoctor.findings import Finding
    from libdoctor.repair.run import RunResult
    from libdoctor.whatif.plan import Plan, Step
    from libdoctor.whatif.request import InstallRequest


def register(sub: Any) -> None:
    install = sub.add_parser(
        "install",
        help="pip install, refused when it would break the environment",
        description="Install wheel files or requirements with the environment's own installer, "
        "after planning it as `plan install` does: refused when the plan shows it overwrites "
        "another distribution's files with other bytes or breaks anything else, unless "
        "--repair (also reinstall the damaged co-owners) or --force. TARGET, if given, is the "
        "last argument. Backed up and rolled back on failure.",
    )
    install.add_argument("items", nargs="*", metavar="WHEEL|REQ... [TARGET]")
    common.add_target_options(install, positional=False)
    common.add_output_options(install)
    common.add_library_option(install)
    mode = install.add_mutually_exclusive_group()
    mode.add_argument(
        "--repair",
        action="store_true",
        help="then reinstall the distributions whose files the install overwrites or deletes",
    )
    mode.add_argument("--force", action="store_true", help="install even if it breaks things")
    install.add_argument("--dry-run", action="store_true", help="show the plan, run nothing")
    install.add_argument(
        "-y", "--yes", action="store_true", help="accepted for pip's sake: nothing is asked"
    )
    add_request_options(install)
    changes.add_installer_options(install)
    install.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from libdoctor.findings import Severity
    from libdoctor.whatif.plan import diff_findings
    from libdoctor.whatif.request import install_refusal, plan_request, with_steps

    request, target = request_and_target(args)
    changes.refuse_unwritable(target)
    libs = common.libraries(args)
    planned = plan_request(
        target,
        request,
        options=changes.installer_options(args),
        cache_dir=changes.cache_dir(args),
        environ=os.environ,
        libraries=libs,
        echo=sys.stderr.isatty() and not args.json,
        notify=changes.say,
    )
    plan = with_steps(planned, request, libs)
    steps = plan.steps_to_run(repair=args.repair)
    changes.refuse_unrunnable(target, steps)
    refusal = install_refusal(plan, repair=args.repair, force=args.force)
    if refusal is not None or args.dry_run or not plan.subjects:
        changes.write_plan(args, plan)
        if refusal is not None:
            changes.say(refusal)
            return common.EXIT_FINDINGS
        return common.EXIT_OK
    _refuse_without_uv(steps)
    if not args.json:
        changes.write_plan(args, plan)
    result, after = changes.execute(args, target, steps, libs, _command(args, request, target))
    _write(args, plan, result, after)
    if not result.ok:
        return common.EXIT_ERROR
    new = diff_findings(plan.before, after or ()).new
    return (
        common.EXIT_FINDINGS if any(f.severity >= Severity.ERROR for f in new) else common.EXIT_OK
    )


def _command(args: argparse.Namespace, request: InstallRequest, target: Target) -> str:
    """The command line the backup's journal names: what the user would retype."""
    mode = ["--repair"] if args.repair else ["--force"] if args.force else []
    where = [target.prefix, *changes.python_option(target)]
    return shlex.join(["libdoctor", "install", *request.argv_items(), *where, *mode])


def _refuse_without_uv(steps: Sequence[Step]) -> None:
    from libdoctor.errors import LibdoctorError

    for step in steps:
        if step.argv and step.argv[0] == "uv" and shutil.which("uv") is None:
            raise LibdoctorError("the environment was made by uv, and uv is not on PATH")


def _write(
    args: argparse.Namespace, plan: Plan, result: RunResult, after: list[Finding] | None
) -> None:
    from libdoctor.report.json import target_dict
    from libdoctor.report.uninstall import uninstall_json, uninstall_text

    if args.json:
        common.write(uninstall_json(plan, target_dict(plan.target), result, after))
    else:
        common.write(uninstall_text(plan, result, after, color=common.use_color(args)))
