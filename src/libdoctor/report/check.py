"""``check`` output: the common report, under a header saying which environment was read.

The header names how the target was chosen (argument, ``$VIRTUAL_ENV``, the running
interpreter...) because checking the wrong environment is the commonest surprise, and with
``--deep`` what the hashing cost. The text and JSON formats are imported only when chosen:
this runs on every ``check``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.environment.paths import display
from libdoctor.version import __version__

if TYPE_CHECKING:
    from libdoctor.analysis.run import Report
    from libdoctor.analysis.tree import FailingImport
    from libdoctor.environment.target import Target
    from libdoctor.findings import Finding


def summary(report: Report) -> dict[str, Any]:
    return {"distributions": report.distributions, "files": report.files}


def header(report: Report) -> str:
    text = target_line(report.target)
    if report.hashing is not None:
        text += "\n" + hashing_line(report.hashing)
    return text


def target_line(target: Target) -> str:
    """Which environment was read, and how it was chosen."""
    return f"libdoctor {__version__}: {display(target.prefix)} (chosen by {target.chosen_by})"


def hashing_line(hashing: Mapping[str, int]) -> str:
    """What ``--deep``'s hashing cost."""
    h = hashing
    return (
        f"hashed {h['files_hashed']:,} files ({h['bytes_hashed'] / 1e9:.2f} GB), "
        f"{h['cache_hits']:,} from cache"
    )


def render_text(report: Report, findings: Sequence[Finding], *, color: bool, verbose: bool) -> str:
    """Findings by root cause (report.causes); with VERBOSE, every finding and path."""
    from libdoctor.report.causes import causes_lines
    from libdoctor.report.text import to_string

    lines = causes_lines(header(report), summary(report), findings, verbose)
    return to_string(lines, color=color)


def render_json(report: Report, findings: Sequence[Finding], target: Mapping[str, Any]) -> str:
    """The common JSON report; with ``--deep``, the hashing figures go under ``tool``."""
    from libdoctor.report import json as json_report

    return json_report.dumps(json_document(report, findings, target))


def json_document(
    report: Report, findings: Sequence[Finding], target: Mapping[str, Any]
) -> dict[str, Any]:
    """What ``render_json`` prints, as a value."""
    from libdoctor.report import json as json_report
    from libdoctor.report.causes import causes_json

    return json_report.document(
        target=target,
        summary=summary(report),
        findings=findings,
        hashing=report.hashing,
        extra={"causes": causes_json(findings)},
    )


def render_html(
    report: Report, findings: Sequence[Finding], failing: Sequence[FailingImport] = ()
) -> str:
    """One self-contained page: the diagnosis as the text shows it, the findings by
    distribution and the library trees of FAILING imports."""
    from libdoctor.report.causes import causes_lines
    from libdoctor.report.html import check_html

    diagnosis = causes_lines("", summary(report), findings, False)
    while diagnosis and not diagnosis[0].spans:
        diagnosis.pop(0)
    return check_html(header(report), diagnosis, findings, failing)
