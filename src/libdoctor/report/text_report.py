"""The human format: findings grouped by severity, each with its evidence and fix."""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from libdoctor.findings import Finding, Severity, count_by_severity
from libdoctor.paths import display

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_MARK = {Severity.ERROR: "✗", Severity.WARNING: "!", Severity.INFO: "i"}
_TITLE = {Severity.ERROR: "Errors", Severity.WARNING: "Warnings", Severity.INFO: "Info"}
PATHS_SHOWN = 8


def make_console(file: io.StringIO, *, color: bool, width: int | None) -> Console:
    return Console(
        file=file,
        force_terminal=color,
        no_color=not color,
        width=width or 100,
        highlight=False,
        soft_wrap=False,
        emoji=False,
        legacy_windows=False,
    )


def render_finding(console: Console, finding: Finding, verbose: bool) -> None:
    head = Text("  ")
    head.append(f"{_MARK[finding.severity]} {finding.code}", style=_STYLE[finding.severity])
    if finding.distribution is not None:
        head.append(f"  {finding.distribution.name} {finding.distribution.version}", style="bold")
    console.print(head)
    console.print(Text("    " + display(finding.message)))
    limit = None if verbose else PATHS_SHOWN
    paths = finding.paths if limit is None else finding.paths[:limit]
    for path in paths:
        console.print(Text("      " + display(path), style="dim"))
    if limit is not None and len(finding.paths) > limit:
        console.print(
            Text(
                f"      … and {len(finding.paths) - limit} more (--verbose or --json for all)",
                style="dim",
            )
        )
    if finding.fix is not None:
        line = Text("    fix: ", style="green")
        line.append(display(finding.fix.command))
        console.print(line, soft_wrap=True)  # a command must stay copy-pastable
        if finding.fix.note:
            console.print(Text(f"         ({finding.fix.note})", style="dim"))
    console.print()


def render(
    *,
    header: str,
    summary: Mapping[str, Any],
    findings: Sequence[Finding],
    color: bool,
    width: int | None = None,
    verbose: bool = False,
) -> str:
    out = io.StringIO()
    console = make_console(out, color=color, width=width)
    console.print(Text(header, style="bold"))
    console.print()
    for severity in sorted(Severity, reverse=True):
        group = [f for f in findings if f.severity is severity]
        if not group:
            continue
        console.print(Text(f"{_TITLE[severity]} ({len(group)})", style=_STYLE[severity]))
        for finding in group:
            render_finding(console, finding, verbose)
    counts = count_by_severity(findings)
    line = Text()
    parts = [
        (counts[Severity.ERROR], "error", Severity.ERROR),
        (counts[Severity.WARNING], "warning", Severity.WARNING),
        (counts[Severity.INFO], "info", Severity.INFO),
    ]
    for i, (n, word, severity) in enumerate(parts):
        if i:
            line.append(", ")
        label = f"{n} {word}{'' if n == 1 or word == 'info' else 's'}"
        line.append(label, style=_STYLE[severity] if n else "")
    line.append(
        f" in {summary.get('distributions', 0)} distributions, {summary.get('files', 0):,} files"
    )
    if not findings:
        line = Text("No problems found", style="bold green") + Text(
            f" in {summary.get('distributions', 0)} distributions, "
            f"{summary.get('files', 0):,} files"
        )
    console.print(line)
    return out.getvalue()
