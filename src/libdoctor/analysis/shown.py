"""What a report shows of a run's findings, decided once, before any renderer.

``check``'s findings are filtered (``run.filter_findings``, in ``api.check``) and grouped by
root cause (``Diagnosis``, as ``api.Report`` is made); the text, the JSON and the HTML page
render those causes, none groups again. plan, fix and
uninstall compare the findings before and after a change: both sides, and the exit code,
go through ``analysis.run.shown_by_default``, so a code hidden by default never turns up as new or
resolved when ``check`` would not have shown it in the first place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from libdoctor.analysis.causes import Cause, combined_fix, group_causes
from libdoctor.document import findings_document
from libdoctor.findings import Finding, Fix

if TYPE_CHECKING:
    from libdoctor.analysis.run import Report


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The findings a check shows (in display order) by root cause, grouped once."""

    findings: tuple[Finding, ...]
    causes: tuple[Cause, ...]
    # One command for every reinstall among the causes, when several causes are reinstalls
    # through one installer and interpreter (else None: each cause's fix says it).
    combined: Fix | None

    @classmethod
    def of(cls, findings: Sequence[Finding]) -> Diagnosis:
        causes = tuple(group_causes(findings))
        return cls(tuple(findings), causes, combined_fix(causes))


def summary(report: Report) -> dict[str, Any]:
    """The scope of a check's ``summary``: what was read."""
    return {"distributions": report.distributions, "files": report.files}


def check_document(
    report: Report, diagnosis: Diagnosis, target: Mapping[str, Any]
) -> dict[str, Any]:
    """``check --json``'s document: the common report of the findings shown, with
    ``--deep``'s hashing figures under ``tool``, and their causes."""
    return findings_document(
        target=target,
        summary=summary(report),
        findings=diagnosis.findings,
        hashing=report.hashing,
        extra={"causes": causes_json(diagnosis.causes, diagnosis.findings)},
    )


def causes_json(causes: Sequence[Cause], findings: Sequence[Finding]) -> list[dict[str, Any]]:
    """Each cause: its title, severity, the indexes of its findings in FINDINGS, its fix."""
    index = {id(f): i for i, f in enumerate(findings)}
    return [
        {
            "title": cause.title,
            "severity": cause.severity.label,
            "findings": [index[id(f)] for f in cause.findings],
            **({"fix": cause.fix.to_json()} if cause.fix is not None else {}),
        }
        for cause in causes
    ]
