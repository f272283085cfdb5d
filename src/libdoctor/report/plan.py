"""A plan (what ``pip uninstall`` or ``pip install`` would do) as JSON and as text.

Both show the plan as the user sees it (``visible``): the codes ``check`` hides by default are
left out. A step is shown as the exact command a repair would run (``step_argv``), so what the
user reads, copies and approves is what runs.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from libdoctor.analysis.run import shown_by_default
from libdoctor.checks.wording import plural
from libdoctor.document import dumps, findings_document, named
from libdoctor.environment.paths import display
from libdoctor.external.installers import InstallerOptions
from libdoctor.repair.run import step_argv
from libdoctor.report.text import PATHS_SHOWN, Line, finding_lines, to_string
from libdoctor.version import __version__

if TYPE_CHECKING:
    from libdoctor.findings import Finding
    from libdoctor.whatif.plan import Plan, Step

# A plan runs nothing itself: its steps carry no index options.
_NO_OPTIONS = InstallerOptions()


def visible(plan: Plan) -> Plan:
    """The plan as the user sees it: codes hidden by default (like check) left out."""
    return replace(
        plan,
        new=tuple(shown_by_default(plan.new)),
        resolved=tuple(shown_by_default(plan.resolved)),
    )


def plan_json(plan: Plan, target: Mapping[str, Any]) -> str:
    plan = visible(plan)
    return dumps(
        findings_document(
            target=target,
            summary={"distributions": plan.distributions, "files": plan.files},
            findings=plan.new,
            extra={"plan": plan_dict(plan)},
        )
    )


def plan_sarif(plan: Plan) -> str:
    """The findings the change would bring, as SARIF (report.sarif)."""
    from libdoctor.report import sarif

    return sarif.render(visible(plan).new, plan.target.prefix)


def plan_text(plan: Plan, *, verbose: bool, color: bool) -> str:
    return to_string(plan_lines(visible(plan), verbose), color=color)


# --------------------------------------------------------------------------- JSON


def step_dict(step: Step, options: InstallerOptions = _NO_OPTIONS) -> dict[str, Any]:
    argv = step_argv(step, options)
    out: dict[str, Any] = {
        "action": step.action,
        "distribution": named(step),
        "argv": list(argv),
        "command": shlex.join(argv),
    }
    if step.reason:
        out["reason"] = step.reason
    return out


def plan_dict(plan: Plan) -> dict[str, Any]:
    return {
        "action": plan.action,
        "subjects": list(plan.subjects),
        "verdict": plan.verdict,
        "breaks": len(plan.breaks),
        **({"deletes_outside": list(plan.deletes_outside)} if plan.deletes_outside else {}),
        **({"unknown": list(plan.unknown)} if plan.action == "install" else {}),
        "steps": [step_dict(s) for s in plan.steps],
        "removals": [
            {
                "distribution": named(r.dist),
                "files": list(r.files),
                "directories": list(r.dirs),
                "absent": list(r.absent),
                "outside_prefix": list(r.outside),
            }
            for r in plan.removals
        ],
        "co_owned": [
            {
                "path": c.path,
                "removed_with": named(c.removed_with),
                "owners": [named(o) for o in c.owners],
                "identical": c.identical,
            }
            for c in plan.co_owned
        ],
        "overwrites": [
            {
                "path": o.path,
                "wheel": o.wheel,
                "owners": [named(d) for d in o.owners],
                "identical": o.identical,
            }
            for o in plan.overwrites
        ],
        "new_findings": [f.to_json() for f in plan.new],
        "resolved_findings": [f.to_json() for f in plan.resolved],
        "safe_sequence": _sequence_dict(plan),
        "notes": list(plan.notes),
    }


def _sequence_dict(plan: Plan) -> dict[str, Any] | None:
    if not plan.repair:
        return None
    return {
        "steps": [step_dict(s) for s in (*plan.steps, *plan.repair)],
        "verified": plan.repair_is_safe,
        "remaining": [f.to_json() for f in plan.after_repair or ()],
    }


# --------------------------------------------------------------------------- text


def findings_block(
    title: str, findings: Sequence[Finding], verbose: bool, style: str = "bold"
) -> list[Line]:
    """TITLE and the findings under it; nothing at all when there are none."""
    if not findings:
        return []
    lines = [Line.of(title, style)]
    for finding in findings:
        lines += finding_lines(finding, verbose)
    return lines


def steps_lines(steps: Sequence[Step], options: InstallerOptions = _NO_OPTIONS) -> list[Line]:
    lines = []
    for number, step in enumerate(steps, start=1):
        line = Line.of(f"  {number}. ").plus(display(shlex.join(step_argv(step, options))))
        if step.reason:
            line = line.plus(f"   # {step.reason}", "dim")
        lines.append(line)
    return lines


def plan_lines(plan: Plan, verbose: bool) -> list[Line]:
    subjects = ", ".join(plan.subjects) or "nothing"
    lines = [
        Line.of(
            f"libdoctor {__version__}: plan {plan.action} {subjects} in "
            f"{display(plan.target.prefix)}",
            "bold",
        ),
        Line.of(),
    ]
    if plan.action == "uninstall":
        lines += _removal_lines(plan, verbose)
    else:
        lines += _install_lines(plan, verbose)
    for note in plan.notes:
        lines.append(Line.of(f"note: {display(note)}", "dim", wrap=True))
    if plan.notes:
        lines.append(Line.of())
    breaks = plan.breaks
    lines += findings_block(f"Breaks {plural(len(breaks), 'thing')}:", breaks, verbose)
    minor = [f for f in plan.new if f not in breaks]
    lines += findings_block("New, not errors:", minor, verbose)
    lines += _resolved_lines(plan)
    lines += _sequence_lines(plan)
    lines.append(_verdict_line(plan))
    return lines


def _resolved_lines(plan: Plan) -> list[Line]:
    if not plan.resolved:
        return []
    lines = [Line.of(f"Resolves {plural(len(plan.resolved), 'finding')}:", "bold")]
    for finding in plan.resolved:
        who = f"  {finding.distribution.name}" if finding.distribution else ""
        lines.append(Line.of(f"  ✓ {finding.code}{who}", "green"))
    lines.append(Line.of())
    return lines


def _sequence_lines(plan: Plan) -> list[Line]:
    """The uninstall followed by the reinstalls that undo its damage, and whether that holds."""
    if not plan.repair:
        return []
    checked = (
        "checked: nothing breaks"
        if plan.repair_is_safe
        else f"still breaks {plural(len(plan.after_repair or ()), 'thing')}"
    )
    lines = [Line.of(f"Safe sequence ({checked}):", "bold")]
    lines += steps_lines((*plan.steps, *plan.repair))
    if plan.repair_is_safe:
        names = " ".join(s.name for s in plan.steps)
        lines.append(
            Line.of("  with backup and rollback: ", "dim").plus(
                f"libdoctor uninstall {names} --repair {display(plan.target.prefix)}"
            )
        )
    lines.append(Line.of())
    return lines


def _verdict_line(plan: Plan) -> Line:
    if plan.verdict == "safe":
        return Line.of("Verdict: safe", "bold green").plus(
            " — no check reports anything new at error level"
        )
    if plan.verdict == "unknown":
        return Line.of(
            "Verdict: cannot tell — "
            f"{', '.join(plan.unknown)} would be built from source, so the files it would write "
            "are unknown; build the wheel first (pip wheel --no-deps REQ -w DIR) and plan that "
            "file",
            "bold yellow",
            wrap=True,
        )
    if plan.deletes_outside:
        return Line.of(
            f"Verdict: refused — pip would delete {plural(len(plan.deletes_outside), 'path')} "
            f"outside the prefix (first: {display(plan.deletes_outside[0])})",
            "bold red",
            wrap=True,
        )
    return Line.of(f"Verdict: breaks {plural(len(plan.breaks), 'thing')}", "bold red").plus(
        " (safe with the sequence above)" if plan.repair_is_safe else ""
    )


def _paths(items: Sequence[tuple[str, str]], verbose: bool) -> list[Line]:
    """(path, note) pairs, the first few unless VERBOSE: the JSON always has them all."""
    shown_items = items if verbose else items[:PATHS_SHOWN]
    lines = []
    for path, note in shown_items:
        line = Line.of("    " + display(path), "dim")
        lines.append(line.plus(f"   {note}") if note else line)
    if len(items) > len(shown_items):
        more = len(items) - len(shown_items)
        lines.append(Line.of(f"    … and {more} more (--verbose or --json)", "dim"))
    return lines


def _removal_lines(plan: Plan, verbose: bool) -> list[Line]:
    lines: list[Line] = []
    co_owned = {c.path: c for c in plan.co_owned}
    for removal in plan.removals:
        lines.append(
            Line.of(
                f"{'conda remove' if removal.dist.kind == 'conda' else 'pip uninstall'} "
                f"{removal.dist.display} would delete "
                f"{plural(len(removal.files), 'file')} and "
                f"{plural(len(removal.dirs), 'directory', 'directories')}",
                "bold",
            )
        )
        shared = [co_owned[p] for p in removal.files if p in co_owned]
        if shared:
            lines.append(
                Line.of(
                    f"  {plural(len(shared), 'of them is', 'of them are')} also claimed by "
                    "distributions that stay:"
                )
            )
            items = [
                (
                    c.path,
                    ", ".join(o.display for o in c.owners)
                    + (" (identical bytes)" if c.identical else " (different bytes)"),
                )
                for c in sorted(shared, key=lambda c: (c.identical, c.path))
            ]
            lines += _paths(items, verbose)
        elif removal.files:
            lines.append(Line.of("  no other distribution claims any of them", "dim"))
        if verbose:
            lines += _paths([(p, "") for p in removal.files], True)
        lines.append(Line.of())
    return lines


def _install_lines(plan: Plan, verbose: bool) -> list[Line]:
    lines: list[Line] = []
    differing = [o for o in plan.overwrites if not o.identical]
    identical = [o for o in plan.overwrites if o.identical]
    if differing:
        lines.append(
            Line.of(
                f"Overwrites {plural(len(differing), 'file')} with different bytes:", "bold red"
            )
        )
        items = [
            (
                o.path,
                (", ".join(d.display for d in o.owners) or "no distribution claims it")
                + f"  ← {o.wheel}",
            )
            for o in differing
        ]
        lines += _paths(items, verbose)
    else:
        lines.append(Line.of("Overwrites no file of another distribution with other bytes", "bold"))
    if identical:
        lines.append(Line.of(f"  and {plural(len(identical), 'file')} with identical bytes", "dim"))
    lines.append(Line.of())
    return lines
