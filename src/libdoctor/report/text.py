"""The human format's pieces: styled lines, one finding with its evidence and fix, the
summary line (``report.causes`` lays out check's report from them).

The report is built as styled lines. On a terminal rich renders them (colour, messages
wrapped to the width); otherwise they are written plainly, never wrapped, so paths and
commands stay whole for grep and copy-paste — and rich is not even imported.

Output is inert: a name read from the environment may hold terminal escapes (a file named
``\x1b]0;pwned\x07``), so every text renderer ends in ``to_string`` or ``text_lines``, which
spell each control character as its escape (``inert``). Text without one is unchanged.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from libdoctor.environment.paths import display
from libdoctor.findings import Finding, Severity, count_by_severity

STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
MARK = {Severity.ERROR: "✗", Severity.WARNING: "!", Severity.INFO: "i"}
TITLE = {Severity.ERROR: "Errors", Severity.WARNING: "Warnings", Severity.INFO: "Info"}
PATHS_SHOWN = 8

# What a terminal acts on rather than shows: C0, DEL and C1 controls (ESC starts a sequence
# that can retitle the window or clear the screen, CR rewrites the line), the bidirectional
# overrides (they reorder what follows), and surrogates (undecodable bytes of a name).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def inert(text: str) -> str:
    """TEXT safe to print: each control character spelled as its escape (``\\x1b``, ``\\n``),
    each undecodable byte as ``display`` spells it. Unchanged when there is none."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, display(text))


def _escape(match: re.Match[str]) -> str:
    char = match[0]
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def text_lines(lines: Iterable[str]) -> str:
    """LINES as the text output: each made ``inert``, each ended by a newline."""
    return "".join(inert(line) + "\n" for line in lines)


@dataclass(frozen=True, slots=True)
class Line:
    """One output line: (text, style) spans; ``wrap`` only for prose, never paths/commands."""

    spans: tuple[tuple[str, str], ...]
    wrap: bool = False

    @classmethod
    def of(cls, text: str = "", style: str = "", *, wrap: bool = False) -> Line:
        return cls(((text, style),) if text else (), wrap)

    def plus(self, text: str, style: str = "") -> Line:
        return Line((*self.spans, (text, style)), self.wrap)

    @property
    def plain(self) -> str:
        return "".join(text for text, _ in self.spans)


def finding_lines(finding: Finding, verbose: bool) -> list[Line]:
    head = Line.of("  ").plus(f"{MARK[finding.severity]} {finding.code}", STYLE[finding.severity])
    if finding.distribution is not None:
        head = head.plus(f"  {finding.distribution.name} {finding.distribution.version}", "bold")
    lines = [head, Line.of("    " + display(finding.message), wrap=True)]
    limit = None if verbose else PATHS_SHOWN
    shown = finding.paths if limit is None else finding.paths[:limit]
    lines += [Line.of("      " + display(path), "dim") for path in shown]
    if limit is not None and len(finding.paths) > limit:
        more = len(finding.paths) - limit
        lines.append(Line.of(f"      … and {more} more (--verbose or --json for all)", "dim"))
    if finding.fix is not None:
        lines.append(Line.of("    fix: ", "green").plus(display(finding.fix.command)))
        if finding.fix.note:
            lines.append(Line.of(f"         ({display(finding.fix.note)})", "dim"))
    lines.append(Line.of())
    return lines


def summary_line(findings: Sequence[Finding], summary: Mapping[str, Any]) -> Line:
    scope = (
        f" in {summary.get('distributions', 0)} distributions, {summary.get('files', 0):,} files"
    )
    if not findings:
        return Line.of("No problems found", "bold green").plus(scope)
    counts = count_by_severity(findings)
    line = Line.of()
    for i, (severity, word) in enumerate(
        ((Severity.ERROR, "error"), (Severity.WARNING, "warning"), (Severity.INFO, "info"))
    ):
        n = counts[severity]
        if i:
            line = line.plus(", ")
        label = f"{n} {word}{'' if n == 1 or word == 'info' else 's'}"
        line = line.plus(label, STYLE[severity] if n else "")
    return line.plus(scope)


def to_string(lines: Sequence[Line], *, color: bool, width: int | None = None) -> str:
    if not color:
        return text_lines(line.plain for line in lines)
    from rich.console import Console
    from rich.text import Text

    out = io.StringIO()
    console = Console(
        file=out, force_terminal=True, width=width, highlight=False, emoji=False, markup=False
    )
    for line in lines:
        text = Text()
        for chunk, style in line.spans:
            text.append(inert(chunk), style=style or None)
        console.print(text, soft_wrap=not line.wrap)
    return out.getvalue()
