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

from libdoctor.cli import changes, common

COMMAND = common.Command(
    help="pip uninstall, refused when it would break another distribution",
    description="Uninstall distributions with the environment's own installer, after "
    "planning it: refused when the plan shows it breaks something, unless --repair "
    "(also reinstall the damaged co-owners) or --force. TARGET, if given, is the last "
    "argument. Backed up and rolled back on failure.",
    options=(
        common.argument("items", nargs="+", metavar="NAME... [TARGET]"),
        common.using(
            changes.add_guarded_options,
            verb="uninstall",
            repair_help="then reinstall the co-owners whose files the uninstall deletes",
        ),
        changes.add_installer_options,
    ),
    intermixed=True,
)


def run(args: argparse.Namespace) -> int:
    from libdoctor.api import uninstall

    names, target = common.items_and_target(args)
    return changes.guarded_change(args, uninstall, names, target)
