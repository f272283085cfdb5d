"""``check``'s findings by root cause: a cause of several findings is one block (what
fails, what was lost, one command); a cause of one finding reads as that finding. The
verbose form lists every finding with every path instead. The causes come grouped
(``analysis.shown.Diagnosis``): this lays them out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.environment.paths import display
from libdoctor.findings import Finding, Severity
from libdoctor.report.text import MARK, STYLE, TITLE, Line, finding_lines, summary_line

if TYPE_CHECKING:
    from libdoctor.analysis.causes import Cause
    from libdoctor.analysis.shown import Diagnosis

_ONE_LINE = 110  # a member's line in a cause block, before it is cut


def causes_lines(
    header: str, summary: Mapping[str, Any], diagnosis: Diagnosis, verbose: bool
) -> list[Line]:
    causes = diagnosis.causes
    lines = [Line.of(text, "bold") for text in header.splitlines()]
    lines.append(Line.of())
    for severity in sorted(Severity, reverse=True):
        group = [c for c in causes if c.severity is severity]
        if not group:
            continue
        count = sum(len(c.findings) for c in group)
        heading = f"{TITLE[severity]} ({count}" + (
            f" findings, {len(group)} cause{'s' if len(group) > 1 else ''})"
            if count > len(group)
            else ")"
        )
        lines.append(Line.of(heading, STYLE[severity]))
        for cause in group:
            if cause.title is None or verbose:
                lines += [line for f in cause.findings for line in finding_lines(f, verbose)]
            else:
                lines += cause_lines(cause)
    everything = diagnosis.combined
    if everything is not None:
        lines.append(Line.of("Every reinstall above in one command:", "bold"))
        lines.append(Line.of("  " + display(everything.command), "green"))
        lines.append(Line.of())
    lines.append(summary_line(diagnosis.findings, summary))
    return lines


def cause_lines(cause: Cause) -> list[Line]:
    lines = [Line.of("  ").plus(f"{MARK[cause.severity]} {cause.title}", STYLE[cause.severity])]
    lines += [Line.of("    " + text) for text in _member_lines(cause.findings)]
    if cause.fix is not None:
        lines.append(Line.of("    fix: ", "green").plus(display(cause.fix.command)))
        if cause.fix.note:
            lines.append(Line.of(f"         ({display(cause.fix.note)})", "dim"))
    lines.append(Line.of("    (--verbose: every finding and path)", "dim"))
    lines.append(Line.of())
    return lines


def _member_lines(findings: Sequence[Finding]) -> list[str]:
    """One line per lost distribution, one per distribution whose libraries are missing,
    one per other finding: what the user needs to see the cause, nothing repeated."""
    out = []
    needs: dict[str, list[str]] = {}
    phantoms: dict[str, list[str]] = {}
    for finding in findings:
        who = (
            f"{finding.distribution.name} {finding.distribution.version}"
            if (finding.distribution)
            else ""
        )
        if finding.code == "missing-files":
            ev = finding.evidence
            phantom = ", every native library" if ev.get("phantom") else ""
            out.append(f"{who:<36} {ev.get('missing')} of {ev.get('files')} files gone{phantom}")
        elif finding.code == "unresolved-library":
            needs.setdefault(who or "an extension module", []).append(
                str(finding.evidence.get("library", "?"))
            )
        elif finding.code == "requirement-phantom":
            phantoms.setdefault(who, []).append(str(finding.evidence.get("name", "?")))
        else:
            first = display(finding.message).split(". ")[0]
            text = f"{finding.code} {who}: {first}"
            out.append(text if len(text) <= _ONE_LINE else text[: _ONE_LINE - 1] + "…")
    for who, libraries in needs.items():
        out.append(f"{who} needs {', '.join(dict.fromkeys(libraries))}: not found")
    for who, names in phantoms.items():
        out.append(
            f"{who} requires {', '.join(dict.fromkeys(names))}: met in metadata only, so pip "
            "check, pip show and pip install see nothing wrong"
        )
    return out
