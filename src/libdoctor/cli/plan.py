"""``libdoctor plan uninstall NAME... [TARGET]``, ``libdoctor plan install WHEEL|REQ... [TARGET]``.

Predictions only: the target is never written. Exit 0 when the change is safe, 1 when it
breaks something, 2 when libdoctor cannot tell.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from libdoctor import __version__
from libdoctor.cli import changes, common

if TYPE_CHECKING:
    from libdoctor.findings import Finding
    from libdoctor.report.text import Line
    from libdoctor.whatif.plan import Plan, Step

SHOWN = 8


def register(sub: Any) -> None:
    plan = sub.add_parser(
        "plan",
        help="predict what an uninstall or install would break, before it happens",
        description="Predict what `pip uninstall` or `pip install` would do to the environment: "
        "the files it deletes or overwrites, who else owns them, and what every check would "
        "report afterwards. Never writes to the target.",
    )
    actions = plan.add_subparsers(dest="plan_action", metavar="ACTION", required=True)
    uninstall = actions.add_parser(
        "uninstall",
        help="what `pip uninstall NAME...` would break",
        description="What `pip uninstall NAME...` would delete and break, and the sequence "
        "that makes it safe when one exists. TARGET, if given, is the last argument.",
    )
    uninstall.add_argument("items", nargs="+", metavar="NAME... [TARGET]")
    install = actions.add_parser(
        "install",
        help="what `pip install WHEEL|REQ...` would overwrite and break",
        description="What `pip install` of wheel files or requirements would overwrite and "
        "break. Requirements are resolved by the target's own pip (--dry-run --report) and "
        "their wheels downloaded into the user cache. TARGET, if given, is the last argument.",
    )
    install.add_argument("items", nargs="+", metavar="WHEEL|REQ... [TARGET]")

    for parser in (uninstall, install):
        common.add_target_options(parser, positional=False)
        common.add_output_options(parser)
        common.add_library_option(parser)
    changes.add_installer_options(install, hooks=False)
    uninstall.set_defaults(func=run_uninstall)
    install.set_defaults(func=run_install)


# --------------------------------------------------------------------------- run


def run_uninstall(args: argparse.Namespace) -> int:
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.whatif.plan import plan_uninstall

    names, target = common.items_and_target(args)
    plan = plan_uninstall(build_environment(target), RealDisk(), names, common.libraries(args))
    output(args, plan)
    return common.EXIT_FINDINGS if plan.verdict == "breaks" else common.EXIT_OK


def run_install(args: argparse.Namespace) -> int:
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.repair.fix import resolve_requirements
    from libdoctor.whatif.plan import plan_install, read_wheel

    items, target = common.items_and_target(args, wheels=True)
    wheel_paths = [i for i in items if i.endswith(".whl") and os.path.isfile(i)]
    requirements = [i for i in items if i not in wheel_paths]
    notes: list[str] = []
    if requirements:
        resolved = resolve_requirements(
            target,
            requirements,
            options=changes.installer_options(args),
            cache_dir=changes.cache_dir(args),
            environ=os.environ,
            echo=sys.stderr.isatty() and not args.json,
            notify=changes.say,
        )
        wheel_paths += resolved.wheels
        notes += resolved.notes
    wheels = [read_wheel(os.path.abspath(p)) for p in wheel_paths]
    plan = plan_install(build_environment(target), RealDisk(), wheels, common.libraries(args))
    if notes:
        from dataclasses import replace

        plan = replace(plan, notes=(*notes, *plan.notes))
    output(args, plan)
    return common.EXIT_FINDINGS if plan.verdict == "breaks" else common.EXIT_OK


def visible(plan: Plan) -> Plan:
    """The plan as the user sees it: codes hidden by default (like check) left out."""
    from dataclasses import replace

    from libdoctor.cli.fix import shown

    return replace(plan, new=tuple(shown(plan.new)), resolved=tuple(shown(plan.resolved)))


def output(args: argparse.Namespace, plan: Plan) -> None:
    plan = visible(plan)
    if args.json:
        from libdoctor.report import json as json_report

        common.write(
            json_report.render(
                target=common.target_dict(plan.target),
                summary={"distributions": plan.distributions, "files": plan.files},
                findings=plan.new,
                extra={"plan": plan_dict(plan)},
            )
        )
    else:
        from libdoctor.report import text as text_report

        common.write(
            text_report.to_string(plan_lines(plan, args.verbose), color=common.use_color(args))
        )


# --------------------------------------------------------------------------- JSON


def _ref(dist: Any) -> dict[str, str]:
    return {"name": dist.name, "version": dist.version}


def step_dict(step: Step, extra: Sequence[str] = ()) -> dict[str, Any]:
    argv = (*step.argv, *extra) if step.action != "uninstall" else step.argv
    out: dict[str, Any] = {
        "action": step.action,
        "distribution": {"name": step.name, "version": step.version},
        "argv": list(argv),
        "command": shlex.join(argv),
    }
    if step.reason:
        out["reason"] = step.reason
    return out


def plan_dict(plan: Plan) -> dict[str, Any]:
    from libdoctor.report.json import finding_dict

    sequence: dict[str, Any] | None = None
    if plan.repair:
        sequence = {
            "steps": [step_dict(s) for s in (*plan.steps, *plan.repair)],
            "verified": plan.repair_is_safe,
            "remaining": [finding_dict(f) for f in plan.after_repair or ()],
        }
    return {
        "action": plan.action,
        "subjects": list(plan.subjects),
        "verdict": plan.verdict,
        "breaks": len(plan.breaks),
        "steps": [step_dict(s) for s in plan.steps],
        "removals": [
            {
                "distribution": _ref(r.dist),
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
                "removed_with": _ref(c.removed_with),
                "owners": [_ref(o) for o in c.owners],
                "identical": c.identical,
            }
            for c in plan.co_owned
        ],
        "overwrites": [
            {
                "path": o.path,
                "wheel": o.wheel,
                "owners": [_ref(d) for d in o.owners],
                "identical": o.identical,
            }
            for o in plan.overwrites
        ],
        "new_findings": [finding_dict(f) for f in plan.new],
        "resolved_findings": [finding_dict(f) for f in plan.resolved],
        "safe_sequence": sequence,
        "notes": list(plan.notes),
    }


# --------------------------------------------------------------------------- text


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {plural or word + 's'}"


def _paths(lines: list[Line], items: Sequence[tuple[str, str]], verbose: bool) -> None:
    from libdoctor.environment.paths import display
    from libdoctor.report.text import Line

    shown = items if verbose else items[:SHOWN]
    for path, note in shown:
        line = Line.of("    " + display(path), "dim")
        lines.append(line.plus(f"   {note}") if note else line)
    if len(items) > len(shown):
        lines.append(
            Line.of(f"    … and {len(items) - len(shown)} more (--verbose or --json)", "dim")
        )


def findings_block(title: str, findings: Sequence[Finding], verbose: bool) -> list[Line]:
    from libdoctor.report.text import Line, finding_lines

    if not findings:
        return []
    lines = [Line.of(title, "bold")]
    for finding in findings:
        lines += finding_lines(finding, verbose)
    return lines


def steps_lines(steps: Sequence[Step], extra: Sequence[str] = ()) -> list[Line]:
    from libdoctor.environment.paths import display
    from libdoctor.report.text import Line

    lines = []
    for number, step in enumerate(steps, start=1):
        argv = (*step.argv, *extra) if step.action != "uninstall" else step.argv
        line = Line.of(f"  {number}. ").plus(display(shlex.join(argv)))
        if step.reason:
            line = line.plus(f"   # {step.reason}", "dim")
        lines.append(line)
    return lines


def plan_lines(plan: Plan, verbose: bool) -> list[Line]:
    from libdoctor.environment.paths import display
    from libdoctor.report.text import Line

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
    lines += findings_block(f"Breaks {_plural(len(breaks), 'thing')}:", breaks, verbose)
    minor = [f for f in plan.new if f not in breaks]
    lines += findings_block("New, not errors:", minor, verbose)
    if plan.resolved:
        lines.append(Line.of(f"Resolves {_plural(len(plan.resolved), 'finding')}:", "bold"))
        for finding in plan.resolved:
            who = f"  {finding.distribution.name}" if finding.distribution else ""
            lines.append(Line.of(f"  ✓ {finding.code}{who}", "green"))
        lines.append(Line.of())
    if plan.repair:
        checked = (
            "checked: nothing breaks"
            if plan.repair_is_safe
            else f"still breaks {_plural(len(plan.after_repair or ()), 'thing')}"
        )
        lines.append(Line.of(f"Safe sequence ({checked}):", "bold"))
        lines += steps_lines((*plan.steps, *plan.repair))
        if plan.repair_is_safe:
            names = " ".join(s.name for s in plan.steps)
            lines.append(
                Line.of("  with backup and rollback: ", "dim").plus(
                    f"libdoctor uninstall {names} --repair {display(plan.target.prefix)}"
                )
            )
        lines.append(Line.of())
    verdict = (
        Line.of("Verdict: safe", "bold green").plus(
            " — no check reports anything new at error level"
        )
        if plan.verdict == "safe"
        else Line.of(f"Verdict: breaks {_plural(len(breaks), 'thing')}", "bold red").plus(
            " (safe with the sequence above)" if plan.repair_is_safe else ""
        )
    )
    lines.append(verdict)
    return lines


def _removal_lines(plan: Plan, verbose: bool) -> list[Line]:
    from libdoctor.report.text import Line

    lines: list[Line] = []
    co_owned = {c.path: c for c in plan.co_owned}
    for removal in plan.removals:
        lines.append(
            Line.of(
                f"pip uninstall {removal.dist.display} would delete "
                f"{_plural(len(removal.files), 'file')} and "
                f"{_plural(len(removal.dirs), 'directory', 'directories')}",
                "bold",
            )
        )
        shared = [co_owned[p] for p in removal.files if p in co_owned]
        if shared:
            lines.append(
                Line.of(
                    f"  {_plural(len(shared), 'of them is', 'of them are')} also claimed by "
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
            _paths(lines, items, verbose)
        elif removal.files:
            lines.append(Line.of("  no other distribution claims any of them", "dim"))
        if verbose:
            _paths(lines, [(p, "") for p in removal.files], True)
        lines.append(Line.of())
    return lines


def _install_lines(plan: Plan, verbose: bool) -> list[Line]:
    from libdoctor.report.text import Line

    lines: list[Line] = []
    differing = [o for o in plan.overwrites if not o.identical]
    identical = [o for o in plan.overwrites if o.identical]
    if differing:
        lines.append(
            Line.of(
                f"Overwrites {_plural(len(differing), 'file')} with different bytes:", "bold red"
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
        _paths(lines, items, verbose)
    else:
        lines.append(Line.of("Overwrites no file of another distribution with other bytes", "bold"))
    if identical:
        lines.append(
            Line.of(f"  and {_plural(len(identical), 'file')} with identical bytes", "dim")
        )
    lines.append(Line.of())
    return lines
