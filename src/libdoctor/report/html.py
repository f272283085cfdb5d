"""The HTML format of ``check``, ``diff`` and ``fleet``: one self-contained page.

Inline CSS, no script, no external reference of any kind (no font, image or link that would
be fetched), so the file can be mailed, attached to a CI run or opened offline. Every text
that comes from the environment (paths, messages, names, commands) is escaped, and inert
(``report.text.inert``: no control character reaches the page raw). Pure: values in, a
string out.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import TYPE_CHECKING

from libdoctor.environment.paths import display
from libdoctor.findings import Finding, Severity
from libdoctor.report.diff import grouped_changes
from libdoctor.report.fleet import summary
from libdoctor.report.libraries import short
from libdoctor.report.text import Line, inert
from libdoctor.report.tree import render_tree

if TYPE_CHECKING:
    from libdoctor.analysis.diff import Diff, FleetComparison
    from libdoctor.analysis.tree import FailingImport

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:75em;color:#222;
background:#fff;padding:0 1em}
h1{font-size:1.4em}h2{font-size:1.2em;border-bottom:1px solid #ccc;padding-bottom:.2em}
h3{font-size:1.05em;margin-bottom:.3em}
pre,code{font-family:ui-monospace,monospace;font-size:.9em}
pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eee}td.n{text-align:right}
.sev{font-weight:bold;padding:0 .3em;border-radius:.2em}
.error,.s-red{color:#b00}.warning,.s-yellow{color:#a60}.info,.s-cyan{color:#06a}
.s-green{color:#070}.s-dim{color:#777}.s-bold{font-weight:bold}
ul.chain{list-style:none;padding-left:0}ul.chain li{font-family:ui-monospace,monospace}
ul.chain li.missing{color:#b00;font-weight:bold}
.same{color:#070}.differs{color:#b00}
"""


def _text(value: str) -> str:
    """VALUE as HTML text: escaped, and inert (a control character is spelled ``\\x1b``)."""
    return escape(inert(value))


def page(title: str, body: Sequence[str]) -> str:
    """A whole document around BODY (already escaped HTML fragments)."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_text(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


def lines_html(lines: Sequence[Line]) -> str:
    """Styled text lines (``report.text``) as a ``<pre>``, each style word a class."""
    out = []
    for line in lines:
        spans = []
        for text, style in line.spans:
            classes = " ".join(f"s-{word}" for word in style.split())
            spans.append(
                f'<span class="{classes}">{_text(text)}</span>' if classes else _text(text)
            )
        out.append("".join(spans))
    return "<pre>" + "\n".join(out) + "</pre>"


def _severity(severity: Severity) -> str:
    return f'<span class="sev {severity.label}">{_text(severity.label)}</span>'


def _finding_html(finding: Finding) -> str:
    parts = [
        f"<h3>{_severity(finding.severity)} <code>{_text(finding.code)}</code></h3>",
        f"<p>{_text(display(finding.message))}</p>",
    ]
    if finding.paths:
        items = "".join(f"<li><code>{_text(display(p))}</code></li>" for p in finding.paths)
        count = len(finding.paths)
        parts.append(
            f"<details{' open' if count <= 8 else ''}><summary>{count} "
            f"path{'s' if count != 1 else ''}</summary><ul>{items}</ul></details>"
        )
    if finding.fix is not None:
        parts.append(f"<p>fix: <code>{_text(display(finding.fix.command))}</code></p>")
        if finding.fix.note:
            parts.append(f'<p class="s-dim">{_text(display(finding.fix.note))}</p>')
    return "\n".join(parts)


def findings_by_distribution(findings: Sequence[Finding]) -> list[str]:
    """A section per distribution (those of no distribution last), its findings in order."""
    groups: dict[str, list[Finding]] = {}
    for finding in findings:
        dist = finding.distribution
        key = f"{dist.name} {dist.version}" if dist is not None else ""
        groups.setdefault(key, []).append(finding)
    out = ["<h2>Findings by distribution</h2>"]
    if not findings:
        out.append('<p class="same">No problems found.</p>')
    for key in sorted(groups, key=lambda k: (k == "", k.lower())):
        name = key or "not owned by a distribution"
        out.append(f'<section class="dist"><h3>{_text(name)}</h3>')
        out += [_finding_html(f) for f in groups[key]]
        out.append("</section>")
    return out


def failing_imports_html(failing: Sequence[FailingImport]) -> list[str]:
    """Each failing import: the chain from the module to the missing library, and the
    module's whole library tree (folded)."""
    if not failing:
        return []
    out = ["<h2>Library trees of failing imports</h2>"]
    for item in failing:
        env = item.tree.env
        out.append(
            f"<h3>import <code>{_text(item.module)}</code> fails: "
            f"<code>{_text(item.library)}</code> not found</h3>"
        )
        links = [f"<li>{_text(short(env, path))}</li>" for path in item.chain]
        links.append(f'<li class="missing">→ {_text(item.library)}  NOT FOUND</li>')
        out.append('<ul class="chain">' + "".join(links) + "</ul>")
        tree = render_tree(env, item.tree.closure, item.tree.system)
        out.append(
            "<details><summary>the whole tree</summary><pre>"
            + "\n".join(_text(line) for line in tree)
            + "</pre></details>"
        )
    return out


def check_html(
    header: str,
    diagnosis: Sequence[Line],
    findings: Sequence[Finding],
    failing: Sequence[FailingImport] = (),
) -> str:
    """``check``'s page: HEADER, the DIAGNOSIS as the text shows it (root causes), the
    findings grouped by distribution, then the library trees of the failing imports."""
    title = header.splitlines()[0] if header else "libdoctor check"
    body = [f"<h1>{_text(title)}</h1>"]
    body += [f"<p>{_text(line)}</p>" for line in header.splitlines()[1:]]
    body += ["<h2>Diagnosis</h2>", lines_html(diagnosis)]
    body += findings_by_distribution(findings)
    body += failing_imports_html(failing)
    return page(title, body)


def _changes_html(groups: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    out = []
    for heading, details in groups:
        items = "".join(f"<li>{_text(line)}</li>" for line in details)
        out.append(f"<h3>{_text(heading)}</h3>" + (f"<ul>{items}</ul>" if items else ""))
    return out


def diff_html(d: Diff, labels: tuple[str, str], *, verbose: bool = False) -> str:
    """``diff``'s page: A and B, then every change grouped by distribution."""
    body = [
        "<h1>libdoctor diff</h1>",
        f"<p>A: <code>{_text(labels[0])}</code><br>B: <code>{_text(labels[1])}</code></p>",
    ]
    if d.empty:
        body.append('<p class="same">No differences.</p>')
        return page("libdoctor diff", body)
    count = d.count()
    body.append(f'<p class="differs">{count} difference{"s" if count != 1 else ""}</p>')
    body += _changes_html(grouped_changes(d, verbose=verbose))
    return page("libdoctor diff", body)


_KINDS = ("distributions", "files", "metadata", "libraries", "findings")


def _counts(d: Diff) -> tuple[int, ...]:
    return (len(d.versions), len(d.files), len(d.fields), len(d.libraries), len(d.findings))


def fleet_table(fleet: FleetComparison, failed: Sequence[tuple[str, str]]) -> str:
    """Nodes by kind of difference from the reference: one row per group of alike nodes,
    one per node that sent nothing."""
    head = "".join(f"<th>{k}</th>" for k in ("nodes", *_KINDS, "differences"))
    rows = []
    for group in sorted(fleet.groups, key=lambda g: not g.diff.empty):
        names = _text(", ".join(group.nodes))
        if fleet.reference in group.nodes:
            names += " <em>(reference)</em>"
        cells = "".join(f'<td class="n">{n or ""}</td>' for n in _counts(group.diff))
        state = "same" if group.diff.empty else "differs"
        rows.append(
            f'<tr><td>{names}</td>{cells}<td class="{state}">{_text(summary(group.diff))}</td></tr>'
        )
    blank = "<td></td>" * len(_KINDS)
    rows += [
        f'<tr><td>{_text(node)}</td>{blank}<td class="differs">no snapshot: '
        f"{_text(reason)}</td></tr>"
        for node, reason in failed
    ]
    return f"<table><tr>{head}</tr>" + "".join(rows) + "</table>"


def fleet_html(fleet: FleetComparison, failed: Sequence[tuple[str, str]] = ()) -> str:
    """``fleet``'s page: the node x difference table, then each differing group's changes."""
    total = sum(len(g.nodes) for g in fleet.groups)
    why = "the majority" if fleet.chosen_by == "majority" else "--reference"
    body = [
        "<h1>libdoctor fleet</h1>",
        f"<p>{total} nodes; reference: <code>{_text(fleet.reference)}</code> ({why})</p>",
        fleet_table(fleet, failed),
    ]
    for group in fleet.differing:
        body.append(f"<h2>{_text(', '.join(group.nodes))}</h2>")
        body += _changes_html(grouped_changes(group.diff))
    return page("libdoctor fleet", body)
