"""``libdoctor backups [list|prune|remove ID]``: the backups fix and uninstall took.

Exit codes: 0 done; 2 libdoctor could not run (a backup a restore needs is refused without
``--force``).
"""

from __future__ import annotations

import argparse
import os

from libdoctor.cli import changes, common

COMMAND = common.Command(
    help="list, prune or remove the backups fix and uninstall took",
    description="The backups `libdoctor fix` and `libdoctor uninstall` take before each "
    "change, with their cost (own bytes, and bytes shared by hard link). The newest 5 "
    "per target are kept after every successful change ($LIBDOCTOR_KEEP_BACKUPS or "
    "--keep); a backup a restore still needs is never pruned.",
    options=(
        common.argument("action", nargs="?", default="list", choices=("list", "prune", "remove")),
        common.argument("backup", nargs="?", metavar="ID", help="with remove: the backup"),
        common.argument("--keep", type=int, metavar="N", help="with prune: how many to keep"),
        common.argument("--force", action="store_true", help="remove one a restore needs"),
        common.argument(
            "--cache-dir", metavar="DIR", help="where backups live (default: user cache dir)"
        ),
        common.argument("--json", action="store_true", help="machine-readable output"),
    ),
)


def run(args: argparse.Namespace) -> int:
    from libdoctor.errors import LibdoctorError
    from libdoctor.repair.journal import scan_backups
    from libdoctor.repair.retention import keep_count, prune, remove, usage
    from libdoctor.report import backups as report

    root = changes.backups_dir(args)
    keep = keep_count(os.environ, args.keep)
    if args.action == "prune":
        common.write(report.removed_text(prune(root, None, keep)))
    elif args.action == "remove":
        if not args.backup:
            raise LibdoctorError("backups remove needs the backup's ID (libdoctor backups)")
        common.write(report.removed_text([remove(root, args.backup, force=args.force)]))
    else:
        found, damaged = scan_backups(root)
        rows = [(info, usage(info)) for info in found]
        render = report.list_json if args.json else report.list_text
        common.write(render(root, rows, keep, damaged))
    return common.EXIT_OK
