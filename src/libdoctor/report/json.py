"""The machine format. ``schema_version`` changes only when a key's meaning does."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from libdoctor import __version__
from libdoctor.environment.paths import display
from libdoctor.findings import Finding, Fix, Severity, count_by_severity

if TYPE_CHECKING:
    from libdoctor.environment.target import Target

SCHEMA_VERSION = 1


def _clean(value: Any) -> Any:
    """Make any evidence value JSON-safe (paths with undecodable bytes are escaped)."""
    if isinstance(value, str):
        return display(value)
    if isinstance(value, Mapping):
        return {display(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return display(str(value))


def finding_dict(finding: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {
        "code": finding.code,
        "severity": finding.severity.label,
        "message": display(finding.message),
    }
    if finding.distribution is not None:
        out["distribution"] = {
            "name": finding.distribution.name,
            "version": finding.distribution.version,
        }
    if finding.paths:
        out["paths"] = [display(p) for p in finding.paths]
    if finding.evidence:
        out["evidence"] = _clean(finding.evidence)
    if finding.fix is not None:
        out["fix"] = fix_dict(finding.fix)
    return out


def fix_dict(fix: Fix) -> dict[str, Any]:
    out: dict[str, Any] = {
        "command": display(fix.command),
        "argv": [display(a) for a in fix.argv],
    }
    if len(fix.steps) > 1:
        out["steps"] = [[display(a) for a in step] for step in fix.steps]
    if fix.note:
        out["note"] = fix.note
    return out


def render(
    *,
    target: Mapping[str, Any],
    summary: Mapping[str, Any],
    findings: Sequence[Finding],
    hashing: Mapping[str, int] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """The common report; with ``--deep``, what the HASHING cost goes under ``tool``."""
    counts = count_by_severity(findings)
    tool: dict[str, Any] = {"name": "libdoctor", "version": __version__}
    if hashing is not None:
        tool["hashing"] = hashing
    document: dict[str, Any] = {
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
    return dumps(document)


def dumps(document: Mapping[str, Any]) -> str:
    """The layout all of libdoctor's JSON documents share: indented, ending in a newline."""
    return json.dumps(document, indent=2) + "\n"


def target_dict(target: Target) -> dict[str, Any]:
    """The document's ``target``: which environment, and why that one."""
    return {
        "prefix": target.prefix,
        "python": target.python,
        "site_packages": list(target.site_packages),
        "chosen_by": target.chosen_by,
    }
