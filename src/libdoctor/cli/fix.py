"""``libdoctor fix [TARGET] [--dry-run] [--yes] [--remove-leftovers]``.

From the current findings, a plan of installer commands (reinstall damaged distributions at
their installed versions with ``--no-deps``), shown, then run through the environment's own
installer with a backup before each step and a rollback on any failure; then ``check`` again,
before and after. Without ``--yes`` it asks on a terminal and refuses otherwise.

Exit codes: 0 nothing left at error level; 1 errors remain (or the plan was not run); 2 libdoctor
could not run, or a step failed and everything was rolled back.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from libdoctor import __version__
from libdoctor.cli import changes, common

if TYPE_CHECKING:
    from libdoctor.environment.target import Target
    from libdoctor.findings import Finding
    from libdoctor.repair.fix import FixPlan, InstallerOptions, RunResult
    from libdoctor.report.text import Line


def register(sub: Any) -> None:
    fix = sub.add_parser(
        "fix",
        help="repair what check finds: reinstall damaged distributions, with backup and rollback",
        description="Plan installer commands from the current findings (reinstall damaged "
        "distributions at their installed versions with --no-deps), show them, run them with a "
        "backup before each step and a rollback on any failure, then check again.",
    )
    common.add_target_options(fix)
    common.add_output_options(fix)
    common.add_library_option(fix)
    fix.add_argument("--dry-run", action="store_true", help="show the plan, run nothing")
    fix.add_argument("-y", "--yes", action="store_true", help="run without asking")
    fix.add_argument(
        "--remove-leftovers",
        action="store_true",
        help="also uninstall cuda-mixed-major leftovers when the plan proves it safe",
    )
    changes.add_installer_options(fix)
    fix.set_defaults(func=run)


def shown(findings: Sequence[Finding]) -> list[Finding]:
    from libdoctor.analysis.run import filter_findings

    return filter_findings(findings, None, frozenset(), False)


# --------------------------------------------------------------------------- run


def run(args: argparse.Namespace) -> int:
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.repair.fix import plan_fix

    target = common.discover_target(args)
    libs = common.libraries(args)
    fix = plan_fix(
        build_environment(target),
        RealDisk(),
        remove_leftovers=args.remove_leftovers,
        libraries=libs,
    )
    options = changes.installer_options(args)
    if args.dry_run or not fix.steps:
        emit_fix(args, target, fix, options, None, None)
        return common.exit_code(shown(fix.predicted), "error")
    if not args.json:
        emit_fix(args, target, fix, options, None, None)
    n = len(fix.steps)
    what = "this step" if n == 1 else f"these {n} steps"
    changes.confirm(f"Run {what}?", args.yes, f"{n} repair step{'s' if n != 1 else ''}")
    command = shlex.join(["libdoctor", "fix", target.prefix])
    result, after = changes.execute(args, target, fix.steps, libs, command)
    emit_fix(args, target, fix, options, result, after)
    if not result.ok:
        return common.EXIT_ERROR
    return common.exit_code(shown(after or ()), "error")


# --------------------------------------------------------------------------- output


def run_dict(
    result: RunResult | None, before: Sequence[Finding], after: Sequence[Finding] | None
) -> dict[str, Any]:
    from libdoctor.report.json import finding_dict
    from libdoctor.whatif.plan import diff_findings

    if result is None:
        return {"ran": False}
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
    if after is not None:
        diff = diff_findings(shown(before), shown(after))
        out["resolved"] = [finding_dict(f) for f in diff.resolved]
        out["new"] = [finding_dict(f) for f in diff.new]
        out["before"] = _counts(shown(before))
        out["after"] = _counts(shown(after))
    return out


def counts_text(findings: Sequence[Finding]) -> str:
    if not findings:
        return "no problems"
    counts = _counts(findings)
    return ", ".join(
        f"{n} {word}{'' if n == 1 or word == 'info' else 's'}"
        for word, n in (
            ("error", counts["errors"]),
            ("warning", counts["warnings"]),
            ("info", counts["infos"]),
        )
    )


def _counts(findings: Sequence[Finding]) -> dict[str, int]:
    from libdoctor.findings import Severity, count_by_severity

    counts = count_by_severity(findings)
    return {
        "errors": counts[Severity.ERROR],
        "warnings": counts[Severity.WARNING],
        "infos": counts[Severity.INFO],
    }


def emit_fix(
    args: argparse.Namespace,
    target: Target,
    fix: FixPlan,
    options: InstallerOptions,
    result: RunResult | None,
    after: list[Finding] | None,
) -> None:
    from libdoctor.cli.plan import step_dict
    from libdoctor.report.json import finding_dict

    if args.json:
        from libdoctor.report import json as json_report

        findings = shown(after if after is not None else fix.before)
        document = {
            "dry_run": args.dry_run,
            "steps": [step_dict(s, options.args()) for s in fix.steps],
            "addressed": [finding_dict(f) for f in fix.addressed],
            "not_handled": [
                {"finding": finding_dict(f), "reason": why} for f, why in fix.not_handled
            ],
            "predicted": [finding_dict(f) for f in shown(fix.predicted)],
            "predicted_new": [finding_dict(f) for f in fix.new],
            "notes": list(fix.notes),
            **run_dict(result, fix.before, after),
        }
        common.write(
            json_report.render(
                target=common.target_dict(target),
                summary={"stage": "after" if after is not None else "before"},
                findings=findings,
                extra={"fix": document},
            )
        )
        return
    from libdoctor.report import text as text_report

    lines = (
        fix_lines(target, fix, options) if result is None else run_lines(result, fix.before, after)
    )
    common.write(text_report.to_string(lines, color=common.use_color(args)))


def fix_lines(target: Target, fix: FixPlan, options: InstallerOptions) -> list[Line]:
    from libdoctor.cli.plan import steps_lines
    from libdoctor.environment.paths import display
    from libdoctor.report.text import Line

    lines = [
        Line.of(
            f"libdoctor {__version__}: fix {display(target.prefix)} (chosen by {target.chosen_by})",
            "bold",
        ),
        Line.of(),
        Line.of("Now: ").plus(counts_text(shown(fix.before))),
    ]
    if fix.steps:
        lines.append(
            Line.of(f"Plan ({len(fix.steps)} step{'s' if len(fix.steps) != 1 else ''}):", "bold")
        )
        lines += steps_lines(fix.steps, options.args())
        lines.append(Line.of("Repairs:", "bold"))
        for finding in fix.addressed:
            lines.append(Line.of(f"  ✓ {finding.code}{_who(finding)}", "green"))
    else:
        lines.append(Line.of("Nothing fix can repair by reinstalling.", "bold"))
    if fix.not_handled:
        lines.append(Line.of("Left for you:", "bold"))
        for finding, why in fix.not_handled:
            who = f"  {finding.distribution.name}" if finding.distribution else ""
            lines.append(Line.of(f"  ! {finding.code}{who}: ", "yellow").plus(why, ""))
            if finding.fix is not None:
                lines.append(Line.of("      suggested: ", "dim").plus(display(finding.fix.command)))
                removed = [step[-1] for step in finding.fix.steps if "uninstall" in step]
                if removed:
                    safely = shlex.join(["libdoctor", "uninstall", *removed, target.prefix])
                    lines.append(
                        Line.of("      checked, with backup: ", "dim").plus(
                            display(safely + " --repair")
                        )
                    )
    for note in fix.notes:
        lines.append(Line.of(f"note: {note}", "dim", wrap=True))
    if fix.steps:
        predicted = shown(fix.predicted)
        lines.append(Line.of("Predicted after: ").plus(counts_text(predicted)))
        if fix.new:
            lines.append(
                Line.of(f"  warning: the plan itself would add {len(fix.new)} finding(s)", "yellow")
            )
    lines.append(Line.of())
    return lines


def _who(finding: Finding) -> str:
    dist = finding.distribution
    return f"  {dist.name} {dist.version}" if dist else ""


def run_lines(
    result: RunResult, before: Sequence[Finding], after: Sequence[Finding] | None
) -> list[Line]:
    from libdoctor.report.text import Line, finding_lines
    from libdoctor.whatif.plan import diff_findings

    lines: list[Line] = []
    if after is None:
        state = (
            "rolled back"
            if result.rollback is not None and result.rollback.ok
            else result.backup.state
        )
        lines.append(
            Line.of(f"Failed, {state}: the target is as it was before.", "bold red")
            if result.rollback is not None and result.rollback.ok
            else Line.of(
                f"Failed ({state}); see `libdoctor restore {result.backup.id}`", "bold red"
            )
        )
        return lines
    diff = diff_findings(shown(before), shown(after))
    lines.append(Line.of("Before: ", "bold").plus(counts_text(shown(before))))
    lines.append(Line.of("After:  ", "bold").plus(counts_text(shown(after))))
    for finding in diff.resolved:
        lines.append(Line.of(f"  ✓ resolved {finding.code}{_who(finding)}", "green"))
    if diff.new:
        lines.append(Line.of("New:", "bold red"))
        for finding in diff.new:
            lines += finding_lines(finding, False)
    remaining = [f for f in shown(after) if f not in diff.new]
    if remaining:
        lines.append(Line.of("Still there:", "bold"))
        for finding in remaining:
            lines += finding_lines(finding, False)
    lines.append(
        Line.of(
            f"Backup {result.backup.id}: `libdoctor restore {result.backup.id}` "
            "puts the previous state back",
            "dim",
        )
    )
    return lines
