"""Which findings a report about a change shows: those ``check`` shows without ``--all``.

plan, fix and uninstall compare the findings before and after a change. Both sides, and the
exit code, go through this one filter, so a code hidden by default never turns up as new or
resolved when ``check`` would not have shown it in the first place.
"""

from __future__ import annotations

from collections.abc import Sequence

from libdoctor.analysis.run import filter_findings
from libdoctor.findings import Finding


def shown(findings: Sequence[Finding]) -> list[Finding]:
    return filter_findings(findings, None, frozenset(), False)
