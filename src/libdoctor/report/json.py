"""The machine format: a document (``libdoctor.document``: the one envelope, the one layout)
as the string a command prints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from libdoctor.document import dumps, findings_document, target_dict
from libdoctor.findings import Finding

__all__ = ["dumps", "render", "target_dict"]


def render(
    *,
    target: Mapping[str, Any],
    summary: Mapping[str, Any],
    findings: Sequence[Finding],
    hashing: Mapping[str, int] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """The common report of findings (``document.findings_document``), printed."""
    return dumps(
        findings_document(
            target=target, summary=summary, findings=findings, hashing=hashing, extra=extra
        )
    )
