"""The backups, and what a restore did (or would do), as JSON and as text.

Plain strings rather than styled lines: restore has no colour option, and its lines are
mostly paths, which must stay whole for grep and copy-paste.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.document import dumps, envelope
from libdoctor.environment.paths import display
from libdoctor.report.text import PATHS_SHOWN, text_lines

if TYPE_CHECKING:
    from libdoctor.repair.journal import BackupInfo
    from libdoctor.repair.rollback import RestoreResult

# A failed restore lists its differences: enough to see the pattern, short of a flood.
_PROBLEMS_SHOWN = 20


def list_json(backups: Sequence[BackupInfo], damaged: Sequence[str] = ()) -> str:
    """DAMAGED: why each backup that could not be read was skipped (one line each)."""
    return dumps(
        envelope(
            {
                "backups": [info_dict(b) for b in backups],
                "skipped": list(damaged),
            }
        )
    )


def result_json(result: RestoreResult) -> str:
    return dumps(envelope({"backup": info_dict(result.backup), **result_dict(result)}))


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
        "left_alone": [{"path": p, "reason": why} for p, why in result.left_alone],
        "changed_later": list(result.changed_later),
        "refused": result.refused,
        "already": result.already,
        "displaced": result.displaced,
    }


def list_text(root: str, backups: Sequence[BackupInfo], damaged: Sequence[str] = ()) -> str:
    lines = [f"Backups in {display(root)}:" if backups else f"No backups in {display(root)}"]
    for info in backups:
        flag = "  ← needs restore" if info.needs_restore else ""
        lines.append(
            f"  {info.id}  {info.state:<12} {len(info.files):>6} files  "
            f"{display(info.prefix)}  ({display(info.command)}){flag}"
        )
    if damaged:
        lines.append(f"Skipped {len(damaged)} damaged backup(s), not listed:")
        lines += [f"  {display(why)}" for why in damaged]
    return text_lines(lines)


def _some(paths: Sequence[str], verbose: bool) -> list[str]:
    shown = paths if verbose else paths[:PATHS_SHOWN]
    out = [f"    {display(p)}" for p in shown]
    if len(paths) > len(shown):
        out.append(f"    … and {len(paths) - len(shown)} more (--verbose)")
    return out


def _ended(info: BackupInfo) -> str:
    """The moment later changes are told from: the run's end, or when it was put back."""
    return {"restored": "it was restored", "rolled-back": "it was rolled back"}.get(
        info.state, "it ended"
    )


def result_text(result: RestoreResult, verbose: bool) -> str:
    info = result.backup
    if result.refused:
        return _refused_text(result, verbose)
    if result.already:
        return _already_text(result, verbose)
    would = "would be " if result.dry_run else ""
    lines = [f"Backup {info.id} of {display(info.prefix)} ({display(info.command)})"]
    lines.append(f"  {len(result.removed)} entries the run created {would}removed")
    lines += _some(result.removed, verbose)
    lines.append(f"  {len(result.restored)} files {would}restored from the backup")
    lines += _some(result.restored, verbose)
    if result.recreated:
        lines.append(f"  {len(result.recreated)} directories {would}re-created")
    lines.append(f"  {len(result.unchanged)} saved files were already identical")
    lines += _others(result, verbose)
    if result.dry_run:
        lines.append("Dry run: nothing was changed.")
    elif result.ok:
        lines.append("Restored and verified: what the run changed is as it was before.")
    else:
        lines.append(f"Restored with {len(result.problems)} difference(s) left:")
        for path, why in result.problems[: None if verbose else _PROBLEMS_SHOWN]:
            lines.append(f"    {display(path)}: {why}")
    return text_lines(lines)


def _others(result: RestoreResult, verbose: bool) -> list[str]:
    """What is not the run's own: left as it is, and what a confirmed restore replaced."""
    lines: list[str] = []
    if result.left_alone:
        lines.append(
            f"  {len(result.left_alone)} entries changed by something else "
            f"{'would be ' if result.dry_run else 'were '}left alone"
        )
        shown = result.left_alone if verbose else result.left_alone[:PATHS_SHOWN]
        lines += [f"    {display(p)}: {why}" for p, why in shown]
        if len(result.left_alone) > len(shown):
            lines.append(f"    … and {len(result.left_alone) - len(shown)} more (--verbose)")
    if result.changed_later:
        verb = "would replace" if result.dry_run else "replaced"
        lines.append(
            f"  {len(result.changed_later)} of the run's paths changed after "
            f"{_ended(result.backup)}; the restore {verb} them"
        )
        lines += _some(result.changed_later, verbose)
    if result.displaced:
        lines.append(f"  their later versions are kept in {display(result.displaced)}")
    return lines


def _already_text(result: RestoreResult, verbose: bool) -> str:
    info = result.backup
    state = "rolled back" if info.state == "rolled-back" else "restored"
    lines = [
        f"Backup {info.id} of {display(info.prefix)} ({display(info.command)})",
        *_others(result, verbose),
        f"Already {state}: what the run changed is as it was before; nothing to do.",
    ]
    return "\n".join(lines) + "\n"


def _refused_text(result: RestoreResult, verbose: bool) -> str:
    info = result.backup
    lines = [
        f"Backup {info.id} of {display(info.prefix)} ({display(info.command)})",
        f"  {len(result.changed_later)} of the run's paths were changed after {_ended(info)}, "
        "by something else; restoring would remove or overwrite them:",
        *_some(result.changed_later, verbose),
        "Refused: nothing was changed. `libdoctor restore "
        f"{info.id} --yes` restores anyway (the later versions are kept in the backup).",
    ]
    return text_lines(lines)
