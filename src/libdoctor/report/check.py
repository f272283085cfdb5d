"""``check`` output: the common report, under a header saying which environment was read.

The header names how the target was chosen (argument, ``$VIRTUAL_ENV``, the running
interpreter...) because checking the wrong environment is the commonest surprise, and with
``--deep`` what the hashing cost. The text and JSON formats are imported only when chosen:
this runs on every ``check``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.analysis.shown import summary
from libdoctor.environment.paths import display
from libdoctor.version import __version__

if TYPE_CHECKING:
    from libdoctor.analysis.run import Report
    from libdoctor.analysis.shown import Diagnosis
    from libdoctor.analysis.tree import FailingImport
    from libdoctor.environment.target import Target


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


def render_text(report: Report, diagnosis: Diagnosis, *, color: bool, verbose: bool) -> str:
    """Findings by root cause (report.causes); with VERBOSE, every finding and path."""
    from libdoctor.report.causes import causes_lines
    from libdoctor.report.text import to_string

    lines = causes_lines(header(report), summary(report), diagnosis, verbose)
    return to_string(lines, color=color)


def render_json(report: Report, diagnosis: Diagnosis, target: Mapping[str, Any]) -> str:
    """The common JSON report; with ``--deep``, the hashing figures go under ``tool``."""
    from libdoctor.analysis.shown import check_document
    from libdoctor.document import dumps

    document = check_document(report, diagnosis, target)
    return dumps(document)


def render_html(report: Report, diagnosis: Diagnosis, failing: Sequence[FailingImport] = ()) -> str:
    """One self-contained page: the diagnosis as the text shows it, the findings by
    distribution and the library trees of FAILING imports."""
    from libdoctor.report.causes import causes_lines
    from libdoctor.report.html import check_html

    lines = causes_lines("", summary(report), diagnosis, False)
    while lines and not lines[0].spans:
        lines.pop(0)
    return check_html(header(report), lines, diagnosis.findings, failing)


def render_sarif(report: Report, diagnosis: Diagnosis) -> str:
    """The findings shown as SARIF (``report.sarif``), paths relative to the target."""
    from libdoctor.report.sarif import render

    return render(diagnosis.findings, report.target.prefix)
