"""What a check shows, decided once before the renderers (analysis.shown): the causes a
report value carries are the ones every format renders; none groups the findings again."""

from __future__ import annotations

import json

from libdoctor.analysis.causes import Cause, group_causes
from libdoctor.analysis.run import Report as RunReport
from libdoctor.analysis.run import shown_by_default
from libdoctor.analysis.shown import Diagnosis, check_document
from libdoctor.api import Report
from libdoctor.document import target_dict
from libdoctor.environment.target import SiteDir, Target
from libdoctor.findings import DistRef, Finding, Fix, Severity
from libdoctor.remedy import LockRemove, Pin, Reinstall, Via
from libdoctor.report import check as check_report

TARGET = Target("/env", "/env/bin/python", (SiteDir("/env/lib/site-packages", "/env"),), "argument")
PIP = ("/env/bin/python", "-m", "pip", "install", "--force-reinstall", "--no-deps")


def _reinstall(pin: str) -> Fix:
    name, version = pin.split("==")
    return Fix((Reinstall((Pin(name, version),), Via("pip", "/env/bin/python")),))


def _findings() -> tuple[Finding, ...]:
    """Two unrelated findings: grouped, they are two causes of one finding each."""
    return (
        Finding(
            "missing-files",
            Severity.ERROR,
            "a lost files",
            DistRef("pkg-a", "1"),
            evidence={"missing": 1, "files": 2},
            fix=_reinstall("pkg-a==1"),
        ),
        Finding(
            "altered-files",
            Severity.ERROR,
            "b was altered",
            DistRef("pkg-b", "1"),
            fix=_reinstall("pkg-b==1"),
        ),
    )


def _run(findings: tuple[Finding, ...]) -> RunReport:
    return RunReport(target=TARGET, distributions=2, files=9, findings=findings)


def _by_hand(findings: tuple[Finding, ...]) -> Diagnosis:
    """One cause of both, with a title and fix the grouping would never give."""
    fix = Fix((LockRemove(("by-hand",)),))
    return Diagnosis(findings, (Cause(findings, fix, "a cause set by hand"),), None)


def test_the_report_value_carries_its_causes_grouped_once() -> None:
    findings = _findings()
    report = Report(TARGET, findings, 2, 9, run=_run(findings))
    assert report.diagnosis.findings == findings
    assert list(report.diagnosis.causes) == group_causes(findings)
    assert report.diagnosis.combined is not None  # both reinstalls through one pip
    assert report.diagnosis.combined.argv == (*PIP, "pkg-a==1", "pkg-b==1")


def test_every_format_renders_the_causes_it_is_given() -> None:
    findings = _findings()
    run, diagnosis = _run(findings), _by_hand(findings)
    text = check_report.render_text(run, diagnosis, color=False, verbose=False)
    assert "✗ a cause set by hand" in text and "fix: uv remove by-hand" in text
    assert "Every reinstall" not in text  # the combined fix is the diagnosis', None here
    html = check_report.render_html(run, diagnosis)
    assert "a cause set by hand" in html
    document = json.loads(check_report.render_json(run, diagnosis, {"prefix": "/env"}))
    assert document["causes"] == [
        {
            "title": "a cause set by hand",
            "severity": "error",
            "findings": [0, 1],
            "fix": {"command": "uv remove by-hand", "argv": ["uv", "remove", "by-hand"]},
        }
    ]
    assert document == check_document(run, diagnosis, {"prefix": "/env"})


def test_the_api_document_is_the_one_check_prints() -> None:
    findings = _findings()
    report = Report(TARGET, findings, 2, 9, run=_run(findings))
    assert report.run is not None
    printed = check_report.render_json(report.run, report.diagnosis, target_dict(TARGET))
    assert json.loads(printed) == report.to_json()


def test_hidden_codes_are_left_out_by_default_most_severe_first() -> None:
    hidden = Finding("shared-path-identical", Severity.INFO, "same bytes")
    info = Finding("driver-library-absent", Severity.INFO, "no driver")
    lost, altered = _findings()
    assert shown_by_default([info, hidden, lost, altered]) == [altered, lost, info]
