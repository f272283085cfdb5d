"""``libdoctor restore [BACKUP] [--list]``: put a backed-up state back, byte for byte.

Without BACKUP: the latest backup a killed or failed repair left behind. With one (an id from
``--list``, or a backup directory): that backup, whatever its state — restoring a finished
repair's backup undoes it. Only the run's own change is undone (``repair.attribution``):
what the run created is removed, what it replaced is put back, and what something else
changed is left alone and listed. When someone changed the run's own paths after it ended,
the restore lists them and needs ``--yes`` (their versions are then kept in the backup).

Exit codes: 0 restored and verified; 1 refused (later changes, no ``--yes``), or restored
but some paths differ from the backup; 2 libdoctor could not run.
"""

from __future__ import annotations

import argparse

from libdoctor.cli import changes, common

COMMAND = common.Command(
    help="put back the state a backup of fix or uninstall saved",
    description="Restore a backup taken by `libdoctor fix` or `libdoctor uninstall`: "
    "what the run created is removed, saved files are put back with their mode, owner and "
    "mtime, what something else changed is left alone; then the result is verified. "
    "Without BACKUP, the latest interrupted repair.",
    options=(
        common.argument("backup", nargs="?", metavar="BACKUP", help="backup id or directory"),
        common.argument("--list", action="store_true", help="list the backups and exit"),
        common.argument("--dry-run", action="store_true", help="show what would change"),
        common.argument(
            "-y",
            "--yes",
            action="store_true",
            help="restore even over changes someone made to the run's paths after it ended",
        ),
        common.argument(
            "--cache-dir", metavar="DIR", help="where backups live (default: user cache dir)"
        ),
        common.argument("--json", action="store_true", help="machine-readable output"),
        common.argument("-v", "--verbose", action="store_true", help="list every path"),
    ),
)


def run(args: argparse.Namespace) -> int:
    from libdoctor.repair.journal import locate, scan_backups
    from libdoctor.repair.rollback import restore
    from libdoctor.report.restore import list_json, list_text, result_json, result_text

    root = changes.backups_dir(args)
    if args.list:
        backups, damaged = scan_backups(root)
        if args.json:
            common.write(list_json(backups, damaged))
        else:
            common.write(list_text(root, backups, damaged))
        return common.EXIT_OK
    result = restore(locate(root, args.backup), dry_run=args.dry_run, yes=args.yes)
    common.write(result_json(result) if args.json else result_text(result, args.verbose))
    return common.EXIT_OK if result.ok else common.EXIT_FINDINGS
