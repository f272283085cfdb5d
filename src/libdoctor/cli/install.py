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

from libdoctor.cli import changes, common
from libdoctor.cli.plan import add_request_options, request_and_target

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
    from libdoctor.api import install

    request, target = request_and_target(args)
    return changes.guarded_change(args, install, request, target)
