"""fix as JSON and as text: the reinstalls it plans and, once they ran, what they changed.

A run's outcome (``run_dict``, ``run_lines``) is also uninstall's: both run their steps the
same way, with a backup and a check before and after, so they report it the same way.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.checks.wording import plural
from libdoctor.document import dumps, findings_document
from libdoctor.environment.paths import display
from libdoctor.findings import Severity, count_by_severity
from libdoctor.remedy import uninstalled
from libdoctor.report.plan import findings_block, step_dict, steps_lines
from libdoctor.report.text import Line, to_string
from libdoctor.version import __version__

if TYPE_CHECKING:
    from libdoctor.external.installers import InstallerOptions
    from libdoctor.findings import Finding
    from libdoctor.repair.apply import FixResult, Outcome
    from libdoctor.repair.fix import FixPlan
    from libdoctor.repair.run import RunResult
    from libdoctor.repair.verify import Verification
    from libdoctor.whatif.plan import Step

# (key in the counts, one, many): "info" is a mass noun, "0 info" like "1 info".
_COUNTED = (
    ("errors", "error", "errors"),
    ("warnings", "warning", "warnings"),
    ("infos", "info", "info"),
)


def fix_json(target: Mapping[str, Any], fixed: FixResult, options: InstallerOptions) -> str:
    """The plan, and once it ran how the run went; the findings are those of now, or after."""
    after = fixed.outcome is not None and fixed.outcome.after is not None
    return dumps(
        findings_document(
            target=target,
            summary={"stage": "after" if after else "before"},
            findings=fixed.findings,
            extra={"fix": fix_dict(fixed, options)},
        )
    )


def fix_text(fixed: FixResult, options: InstallerOptions, *, color: bool) -> str:
    """The plan before the run, how the run went after it: the plan is already on the
    screen by then."""
    outcome = fixed.outcome
    lines = fix_lines(fixed, options) if outcome is None else run_lines(outcome)
    return to_string(lines, color=color)


# --------------------------------------------------------------------------- JSON


def fix_dict(fixed: FixResult, options: InstallerOptions) -> dict[str, Any]:
    fix = fixed.plan
    return {
        "dry_run": fixed.dry_run,
        "steps": [
            _step_dict(s, checked, options)
            for s, checked in zip(fix.steps, fix.verified, strict=True)
        ],
        "addressed": [f.to_json() for f in fix.addressed],
        "not_handled": [{"finding": f.to_json(), "reason": why} for f, why in fix.not_handled],
        "predicted": [f.to_json() for f in fixed.predicted],
        "predicted_new": [f.to_json() for f in fix.new],
        "notes": list(fix.notes),
        **run_dict(fixed.outcome),
    }


def _step_dict(
    step: Step, checked: Sequence[Verification], options: InstallerOptions
) -> dict[str, Any]:
    """A step as ``plan`` shows it, with every distribution it acts on (one call may
    reinstall several) and, for a reinstall, whether it really puts the missing paths back
    (CHECKED)."""
    out = step_dict(step, options)
    out["distributions"] = [{"name": d.name, "version": d.version} for d in step.dists]
    if checked:
        out["verification"] = [_verification_dict(v) for v in checked]
    return out


def _verification_dict(check: Verification) -> dict[str, Any]:
    return {
        "distribution": {"name": check.dist.name, "version": check.dist.version},
        "status": check.status,
        "missing": [display(p) for p in check.missing],
        "wheels": [display(w) for w in check.wheels],
        "not_in_wheel": [display(p) for p in check.not_in_wheel],
        "reason": check.reason,
    }


def run_dict(outcome: Outcome | None) -> dict[str, Any]:
    if outcome is None:
        return {"ran": False}
    result = outcome.run
    out: dict[str, Any] = {
        "ran": True,
        "ok": result.ok,
        "backup": {
            "id": result.backup.id,
            "path": result.backup.path,
            "state": result.backup.state,
        },
        "results": [
            {
                "command": shlex.join(r.argv),
                "argv": list(r.argv),
                "returncode": r.returncode,
                "files_backed_up": r.saved,
            }
            for r in result.results
        ],
        "rolled_back": result.rollback is not None,
    }
    if result.rollback is not None:
        out["rollback_problems"] = [{"path": p, "reason": w} for p, w in result.rollback.problems]
    if outcome.after is not None and outcome.diff is not None:
        diff = outcome.diff
        out["resolved"] = [f.to_json() for f in diff.resolved]
        out["new"] = [f.to_json() for f in diff.new]
        # Still there after the run (the exit code follows these and the new ones).
        out["remaining"] = [f.to_json() for f in diff.kept]
        out["before"] = _counts(outcome.before)
        out["after"] = _counts(outcome.after)
    return out


def _counts(findings: Sequence[Finding]) -> dict[str, int]:
    counts = count_by_severity(findings)
    return {
        "errors": counts[Severity.ERROR],
        "warnings": counts[Severity.WARNING],
        "infos": counts[Severity.INFO],
    }


# --------------------------------------------------------------------------- text


def counts_text(findings: Sequence[Finding]) -> str:
    if not findings:
        return "no problems"
    counts = _counts(findings)
    return ", ".join(plural(counts[key], one, many) for key, one, many in _COUNTED)


def _who(finding: Finding) -> str:
    dist = finding.distribution
    return f"  {dist.name} {dist.version}" if dist else ""


def fix_lines(fixed: FixResult, options: InstallerOptions) -> list[Line]:
    target, fix = fixed.target, fixed.plan
    lines = [
        Line.of(
            f"libdoctor {__version__}: fix {display(target.prefix)} (chosen by {target.chosen_by})",
            "bold",
        ),
        Line.of(),
        Line.of("Now: ").plus(counts_text(fixed.before)),
    ]
    if fix.steps:
        lines.append(Line.of(f"Plan ({plural(len(fix.steps), 'step')}):", "bold"))
        lines += steps_lines(fix.steps, options)
        lines += _verification_lines(fix)
        lines.append(Line.of("Repairs:", "bold"))
        for finding in fix.addressed:
            lines.append(Line.of(f"  ✓ {finding.code}{_who(finding)}", "green"))
    else:
        lines.append(Line.of("Nothing fix can repair by reinstalling.", "bold"))
    lines += _left_for_you(target.prefix, fix)
    for note in fix.notes:
        lines.append(Line.of(f"note: {note}", "dim", wrap=True))
    if fix.steps:
        lines.append(Line.of("Predicted after: ").plus(counts_text(fixed.predicted)))
        if fix.new:
            lines.append(
                Line.of(f"  warning: the plan itself would add {len(fix.new)} finding(s)", "yellow")
            )
    lines.append(Line.of())
    return lines


_MARKS = {"verified": ("✓", "green"), "not verified": ("?", "yellow"), "incomplete": ("✗", "red")}


def _verification_lines(fix: FixPlan) -> list[Line]:
    """Whether each reinstall's wheel holds what is missing: read from the wheel when it is
    at hand offline, "not verified" when it is not."""
    if not fix.verification:
        return []
    lines = [Line.of("Does each reinstall put the missing files back?", "bold")]
    for check in fix.verification:
        mark, style = _MARKS[check.status]
        lines.append(
            Line.of(f"  {mark} {check.dist.display}: {check.status}", style).plus(
                f" ({display(check.reason)})", "dim"
            )
        )
    return lines


def _left_for_you(prefix: str, fix: FixPlan) -> list[Line]:
    """What fix will not do, why, and the command that would; an uninstall in it is pointed
    at ``libdoctor uninstall``, which checks it first and keeps a backup."""
    if not fix.not_handled:
        return []
    lines = [Line.of("Left for you:", "bold")]
    for finding, why in fix.not_handled:
        who = f"  {finding.distribution.name}" if finding.distribution else ""
        lines.append(Line.of(f"  ! {finding.code}{who}: ", "yellow").plus(why, ""))
        if finding.fix is None:
            continue
        lines.append(Line.of("      suggested: ", "dim").plus(display(finding.fix.command)))
        removed = [name for r in finding.fix.remedies if (name := uninstalled(r)) is not None]
        if removed:
            safely = shlex.join(["libdoctor", "uninstall", *removed, prefix])
            lines.append(
                Line.of("      checked, with backup: ", "dim").plus(display(safely + " --repair"))
            )
    return lines


def run_lines(outcome: Outcome) -> list[Line]:
    """A run that failed: only whether the target is as before matters."""
    result, diff = outcome.run, outcome.diff
    if outcome.after is None or diff is None:
        return [_failure_line(result)]
    lines = [
        Line.of("Before: ", "bold").plus(counts_text(outcome.before)),
        Line.of("After:  ", "bold").plus(counts_text(outcome.after)),
    ]
    for finding in diff.resolved:
        lines.append(Line.of(f"  ✓ resolved {finding.code}{_who(finding)}", "green"))
    lines += findings_block("New:", diff.new, False, "bold red")
    lines += findings_block("Still there after the run:", diff.kept, False)
    failing = [f for f in (*diff.kept, *diff.new) if f.severity >= Severity.ERROR]
    if failing:
        verb = "remains" if len(failing) == 1 else "remain"
        lines.append(Line.of(f"{plural(len(failing), 'error')} {verb} after the run", "bold red"))
    lines.append(
        Line.of(
            f"Backup {result.backup.id}: `libdoctor restore {result.backup.id}` "
            "puts the previous state back",
            "dim",
        )
    )
    return lines


def _failure_line(result: RunResult) -> Line:
    if result.rollback is not None and result.rollback.ok:
        return Line.of("Failed, rolled back: the target is as it was before.", "bold red")
    return Line.of(
        f"Failed ({result.backup.state}); see `libdoctor restore {result.backup.id}`", "bold red"
    )
