"""The machine format. ``schema_version`` changes only when a key's meaning does."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.findings import Finding, Fix, Severity, count_by_severity, json_safe
from libdoctor.version import __version__

if TYPE_CHECKING:
    from libdoctor.environment.target import Target

SCHEMA_VERSION = 1


def _clean(value: Any) -> Any:
    """Make any evidence value JSON-safe (paths with undecodable bytes are escaped)."""
    return json_safe(value)


def finding_dict(finding: Finding) -> dict[str, Any]:
    return finding.to_json()


def fix_dict(fix: Fix) -> dict[str, Any]:
    return fix.to_json()


def render(
    *,
    target: Mapping[str, Any],
    summary: Mapping[str, Any],
    findings: Sequence[Finding],
    hashing: Mapping[str, int] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """The common report; with ``--deep``, what the HASHING cost goes under ``tool``."""
    return dumps(
        document(target=target, summary=summary, findings=findings, hashing=hashing, extra=extra)
    )


def document(
    *,
    target: Mapping[str, Any],
    summary: Mapping[str, Any],
    findings: Sequence[Finding],
    hashing: Mapping[str, int] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The common report as a value (what ``render`` prints)."""
    counts = count_by_severity(findings)
    tool: dict[str, Any] = {"name": "libdoctor", "version": __version__}
    if hashing is not None:
        tool["hashing"] = hashing
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "tool": tool,
        "target": _clean(target),
        "summary": {
            **summary,
            "errors": counts[Severity.ERROR],
            "warnings": counts[Severity.WARNING],
            "infos": counts[Severity.INFO],
        },
        "findings": [finding_dict(f) for f in findings],
        **_clean(extra or {}),
    }
    return out


def dumps(document: Mapping[str, Any]) -> str:
    """The layout all of libdoctor's JSON documents share: indented, ending in a newline,
    ASCII, and no raw control byte: json escapes all but DEL, which can only stand in a
    string here, so its escape keeps every value exact."""
    return json.dumps(document, indent=2).replace("\x7f", "\\u007f") + "\n"


def target_dict(target: Target) -> dict[str, Any]:
    """The document's ``target``: which environment, and why that one."""
    return {
        "prefix": target.prefix,
        "python": target.python,
        "site_packages": list(target.site_packages),
        "chosen_by": target.chosen_by,
    }
