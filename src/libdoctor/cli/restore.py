"""``libdoctor restore [BACKUP] [--list]``: put a backed-up state back, byte for byte.

Without BACKUP: the latest backup a killed or failed repair left behind. With one (an id from
``--list``, or a backup directory): that backup, whatever its state — restoring a finished
repair's backup undoes it. Entries created since the backup was taken are removed.

Exit codes: 0 restored and verified; 1 restored, but some paths differ from the backup;
2 libdoctor could not run.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.cli import changes, common

if TYPE_CHECKING:
    from libdoctor.repair.backup import BackupInfo, RestoreResult


def register(sub: Any) -> None:
    restore = sub.add_parser(
        "restore",
        help="put back the state a backup of fix or uninstall saved",
        description="Restore a backup taken by `libdoctor fix` or `libdoctor uninstall`: "
        "files created since are removed, saved files are put back with their mode and mtime, "
        "then the result is verified. Without BACKUP, the latest interrupted repair.",
    )
    restore.add_argument("backup", nargs="?", metavar="BACKUP", help="backup id or directory")
    restore.add_argument("--list", action="store_true", help="list the backups and exit")
    restore.add_argument("--dry-run", action="store_true", help="show what would change")
    restore.add_argument(
        "--cache-dir", metavar="DIR", help="where backups live (default: user cache dir)"
    )
    restore.add_argument("--json", action="store_true", help="machine-readable output")
    restore.add_argument("-v", "--verbose", action="store_true", help="list every path")
    restore.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from libdoctor.repair.backup import list_backups, locate, restore

    root = changes.backups_dir(args)
    if args.list:
        backups = list_backups(root)
        if args.json:
            common.write(
                json.dumps(
                    {"schema_version": 1, "backups": [info_dict(b) for b in backups]}, indent=2
                )
                + "\n"
            )
        else:
            common.write(list_text(root, backups))
        return common.EXIT_OK
    info = locate(root, args.backup)
    result = restore(info, dry_run=args.dry_run)
    if args.json:
        document = {"schema_version": 1, "backup": info_dict(result.backup), **result_dict(result)}
        common.write(json.dumps(document, indent=2) + "\n")
    else:
        common.write(result_text(result, args.verbose))
    return common.EXIT_OK if result.ok else common.EXIT_FINDINGS


def info_dict(info: BackupInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "path": info.path,
        "prefix": info.prefix,
        "created": info.created,
        "command": info.command,
        "state": info.state,
        "needs_restore": info.needs_restore,
        "files": len(info.files),
        "steps": [
            {"command": " ".join(s.argv), "state": s.state, "returncode": s.returncode}
            for s in info.steps
        ],
    }


def result_dict(result: RestoreResult) -> dict[str, Any]:
    return {
        "dry_run": result.dry_run,
        "ok": result.ok,
        "removed": list(result.removed),
        "restored": list(result.restored),
        "recreated": list(result.recreated),
        "unchanged": len(result.unchanged),
        "problems": [{"path": p, "reason": why} for p, why in result.problems],
    }


def list_text(root: str, backups: Sequence[BackupInfo]) -> str:
    from libdoctor.environment.paths import display

    if not backups:
        return f"No backups in {display(root)}\n"
    lines = [f"Backups in {display(root)}:"]
    for info in backups:
        flag = "  ← needs restore" if info.needs_restore else ""
        lines.append(
            f"  {info.id}  {info.state:<12} {len(info.files):>6} files  "
            f"{display(info.prefix)}  ({display(info.command)}){flag}"
        )
    return "\n".join(lines) + "\n"


def _some(paths: Sequence[str], verbose: bool) -> list[str]:
    from libdoctor.environment.paths import display

    shown = paths if verbose else paths[:8]
    out = [f"    {display(p)}" for p in shown]
    if len(paths) > len(shown):
        out.append(f"    … and {len(paths) - len(shown)} more (--verbose)")
    return out


def result_text(result: RestoreResult, verbose: bool) -> str:
    from libdoctor.environment.paths import display

    info = result.backup
    would = "would be " if result.dry_run else ""
    lines = [f"Backup {info.id} of {display(info.prefix)} ({display(info.command)})"]
    lines.append(f"  {len(result.removed)} entries created since {would}removed")
    lines += _some(result.removed, verbose)
    lines.append(f"  {len(result.restored)} files {would}restored from the backup")
    lines += _some(result.restored, verbose)
    if result.recreated:
        lines.append(f"  {len(result.recreated)} directories {would}re-created")
    lines.append(f"  {len(result.unchanged)} saved files were already identical")
    if result.dry_run:
        lines.append("Dry run: nothing was changed.")
    elif result.ok:
        lines.append("Restored and verified: the prefix matches the backup.")
    else:
        lines.append(f"Restored with {len(result.problems)} difference(s) left:")
        for path, why in result.problems[: None if verbose else 20]:
            lines.append(f"    {display(path)}: {why}")
    return "\n".join(lines) + "\n"
