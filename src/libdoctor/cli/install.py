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
from collections.abc import Sequence
from typing import TYPE_CHECKING

from libdoctor.cli import changes, common
from libdoctor.cli.plan import add_request_options, request_and_target, resolve_request

if TYPE_CHECKING:
    from libdoctor.whatif.plan import Step


COMMAND = common.Command(
    help="pip install, refused when it would break the environment",
    description="Install wheel files or requirements with the environment's own installer, "
    "after planning it as `plan install` does: refused when the plan shows it overwrites "
    "another distribution's files with other bytes or breaks anything else, unless "
    "--repair (also reinstall the damaged co-owners) or --force. TARGET, if given, is the "
    "last argument. Backed up and rolled back on failure.",
    options=(
        common.argument("items", nargs="*", metavar="WHEEL|REQ... [TARGET]"),
        common.using(
            changes.add_guarded_options,
            verb="install",
            repair_help="then reinstall the distributions whose files the install "
            "overwrites or deletes",
        ),
        add_request_options,
        changes.add_installer_options,
    ),
    intermixed=True,
)


def run(args: argparse.Namespace) -> int:
    from libdoctor.whatif.request import install_refusal, with_steps

    request, target = request_and_target(args)
    changes.refuse_unwritable(target)
    libs = common.libraries(args)
    plan = with_steps(resolve_request(args, request, target, libs), request, libs)
    steps = plan.steps_to_run(repair=args.repair)
    changes.refuse_unrunnable(target, steps)
    refusal = install_refusal(plan, repair=args.repair, force=args.force)
    done = changes.answer_without_running(args, plan, refusal, idle=not plan.subjects)
    if done is not None:
        return done
    _refuse_without_uv(steps)
    command = changes.guarded_command(args, "install", request.argv_items(), target)
    return changes.run_guarded(args, target, plan, steps, libs, command)


def _refuse_without_uv(steps: Sequence[Step]) -> None:
    from libdoctor.environment.installers import find_uv
    from libdoctor.errors import LibdoctorError

    if any(step.argv and step.argv[0] == "uv" for step in steps):
        try:
            find_uv(os.environ)
        except LibdoctorError as exc:
            raise LibdoctorError(f"the environment was made by uv, and {exc}") from None
