"""``verify --lock`` output: which lock, what applies here, then the drift, one screen.

The JSON is ``check``'s document (``schema_version``, ``tool``, ``target``, ``summary``,
``findings``) with a ``lock`` object: its path, format, what applies here and why the rest
does not, the installers not counted as extra, and the notes of its reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from libdoctor.document import named
from libdoctor.environment.paths import display
from libdoctor.findings import Finding, Severity
from libdoctor.remedy import Install, Remedy, Uninstall, argv
from libdoctor.report.check import hashing_line, target_line
from libdoctor.report.text import MARK, STYLE, TITLE, Line, finding_lines, to_string

if TYPE_CHECKING:
    from libdoctor.analysis.lock import LockReport


def summary(report: LockReport) -> dict[str, Any]:
    return {
        "distributions": report.distributions,
        "files": report.files,
        "locked": len(report.lock.packages),
        "required": len(report.selection.required),
        "matched": len(report.check.matched),
        "verified": len(report.check.verified),
    }


def lock_dict(report: LockReport) -> dict[str, Any]:
    lock, selection = report.lock, report.selection
    return {
        "path": lock.path,
        "format": lock.format,
        "created_by": lock.created_by,
        "evaluated_for": {
            k: report.markers[k]
            for k in ("python_full_version", "sys_platform", "platform_machine")
            if k in report.markers
        },
        "required": [named(p) for p in selection.required],
        "excluded": [{**named(e.package), "why": e.why} for e in selection.excluded],
        "project": [named(p) for p in selection.optional],
        "synced_with": selection.chosen or None,
        "excepted": list(report.check.excepted),
        "matched": list(report.check.matched),
        "verified": list(report.check.verified),
        "notes": [*lock.notes, *selection.notes],
    }


def header(report: LockReport) -> list[str]:
    target, lock, selection = report.target, report.lock, report.selection
    by = f", created by {lock.created_by}" if lock.created_by else ""
    python = report.markers.get("python_full_version", "?")
    platform = report.markers.get("sys_platform", "?")
    lines = [
        target_line(target),
        f"lock: {display(lock.path)} ({lock.format}{by}): "
        f"{len(selection.required)} of {len(lock.packages)} packages apply here "
        f"(Python {python}, {platform})",
    ]
    if selection.chosen:
        lines.append(f"synced with: {selection.chosen}")
    if selection.excluded:
        names = ", ".join(e.package.display for e in selection.excluded[:6])
        more = f" and {len(selection.excluded) - 6} more" if len(selection.excluded) > 6 else ""
        lines.append(
            f"not for this environment: {names}{more} (markers, or extras and groups not "
            "synced: --json lock.excluded says which)"
        )
    if selection.optional:
        names = ", ".join(p.display for p in selection.optional)
        lines.append(f"the locked project itself, installed or not: {names}")
    if report.check.excepted:
        lines.append(
            f"not counted as extra: {', '.join(report.check.excepted)} "
            "(installers the lock does not list)"
        )
    if report.hashing is not None:
        lines.append(hashing_line(report.hashing))
    return lines


def render_text(
    report: LockReport, findings: Sequence[Finding], *, color: bool, verbose: bool
) -> str:
    lines = [Line.of(text, "bold") for text in header(report)]
    lines.append(Line.of())
    for severity in sorted(Severity, reverse=True):
        group = [f for f in findings if f.severity is severity]
        if group:
            lines.append(Line.of(f"{TITLE[severity]} ({len(group)})", STYLE[severity]))
            for code in dict.fromkeys(f.code for f in group):
                same = [f for f in group if f.code == code]
                if verbose or len(same) <= _SHOWN_ALONE:
                    lines += [line for f in same for line in finding_lines(f, verbose)]
                else:
                    lines += _block(same)
    if verbose:
        notes = [*report.lock.notes, *report.selection.notes]
        lines += [Line.of(f"note: {display(n)}", "dim") for n in notes]
    lines.append(_verdict(report, findings))
    return to_string(lines, color=color)


# A code with more findings than this reads as one block: the names, the first message and
# one command for all, so that a lock gone far astray still fits one screen.
_SHOWN_ALONE = 3


def _block(findings: Sequence[Finding]) -> list[Line]:
    first = findings[0]
    names = ", ".join(
        f"{f.distribution.name} {f.distribution.version}".strip()
        for f in findings
        if f.distribution is not None
    )
    lines = [
        Line.of("  ").plus(
            f"{MARK[first.severity]} {first.code} ({len(findings)})", STYLE[first.severity]
        ),
        Line.of(f"    {names}", "bold", wrap=True),
        Line.of(f"    first: {display(first.message)}", wrap=True),
    ]
    fix = merged_fix(findings)
    if fix is not None:
        lines.append(Line.of("    fix: ", "green").plus(display(fix)))
    lines.append(Line.of("    (--verbose: each finding, its paths and its fix)", "dim"))
    lines.append(Line.of())
    return lines


def merged_fix(findings: Sequence[Finding]) -> str | None:
    """One command for FINDINGS whose remedies differ only in the package they name (the
    command's last word): ``pip install --no-deps a==1 b==2``, ``pip uninstall --yes c d``."""
    import shlex

    remedies = [
        f.fix.remedies[0] for f in findings if f.fix is not None and len(f.fix.remedies) == 1
    ]
    if len(remedies) != len(findings) or not remedies:
        return None
    keys = {_but_its_package(r) for r in remedies}
    if len(keys) != 1 or None in keys:
        return None
    return shlex.join([*argv(remedies[0])[:-1], *(argv(r)[-1] for r in remedies)])


def _but_its_package(remedy: Remedy) -> Remedy | None:
    """REMEDY less the package it names last: an install of one requirement, an uninstall."""
    if isinstance(remedy, Install) and len(remedy.requirements) == 1:
        return replace(remedy, requirements=())
    if isinstance(remedy, Uninstall):
        return replace(remedy, name="")
    return None


def _verdict(report: LockReport, findings: Sequence[Finding]) -> Line:
    check = report.check
    scope = (
        f": {len(check.matched)} of {len(report.selection.required)} locked packages at their "
        f"versions, {len(check.verified)} verified by hash or commit"
    )
    drift = [f for f in findings if f.severity >= Severity.WARNING]
    if not drift:
        return Line.of("The environment matches the lock", "bold green").plus(scope)
    worst = max(f.severity for f in drift)
    return Line.of(f"Drift from the lock ({len(drift)})", STYLE[worst]).plus(scope)


def render_json(report: LockReport, findings: Sequence[Finding], target: Mapping[str, Any]) -> str:
    from libdoctor.document import dumps, findings_document

    return dumps(
        findings_document(
            target=target,
            summary=summary(report),
            findings=findings,
            hashing=report.hashing,
            extra={"lock": lock_dict(report)},
        )
    )
