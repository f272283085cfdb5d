"""``libdoctor backups``: every backup with its target, state and cost, and what pruning or
removing did."""

from __future__ import annotations

from collections.abc import Sequence

from libdoctor.document import dumps, envelope
from libdoctor.environment.paths import display
from libdoctor.repair.journal import BackupInfo
from libdoctor.repair.retention import Usage
from libdoctor.report.text import text_lines


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def list_text(
    root: str, rows: Sequence[tuple[BackupInfo, Usage]], keep: int, damaged: Sequence[str] = ()
) -> str:
    """DAMAGED: why each backup that could not be read was skipped (one line each)."""
    if not rows:
        return f"No backups in {display(root)}\n" + _skipped(damaged)
    lines = [f"Backups in {display(root)} (the newest {keep} per target are kept):"]
    for info, cost in rows:
        lines.append(
            f"  {info.id}  {info.state:<11}  {display(info.prefix)}  {cost.files} files, "
            f"{_mb(cost.own)} own, {_mb(cost.shared)} shared by hard link"
        )
        lines.append(f"      {display(info.command)}")
    total = sum(c.own for _, c in rows)
    lines.append(f"{len(rows)} backups, {_mb(total)} of their own")
    return text_lines(lines) + _skipped(damaged)


def _skipped(damaged: Sequence[str]) -> str:
    if not damaged:
        return ""
    lines = [f"Skipped {len(damaged)} damaged backup(s), not listed:"]
    return "\n".join([*lines, *(f"  {display(why)}" for why in damaged)]) + "\n"


def list_json(
    root: str, rows: Sequence[tuple[BackupInfo, Usage]], keep: int, damaged: Sequence[str] = ()
) -> str:
    document = envelope(
        {
            "root": display(root),
            "keep": keep,
            "backups": [
                {
                    "id": info.id,
                    "state": info.state,
                    "prefix": display(info.prefix),
                    "created": info.created,
                    "command": display(info.command),
                    "files": cost.files,
                    "own_bytes": cost.own,
                    "shared_bytes": cost.shared,
                }
                for info, cost in rows
            ],
            "skipped": [display(why) for why in damaged],
        }
    )
    return dumps(document)


def removed_text(removed: Sequence[BackupInfo]) -> str:
    if not removed:
        return "Nothing to remove.\n"
    return text_lines(f"removed {i.id} ({display(i.prefix)})" for i in removed)
