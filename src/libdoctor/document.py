"""libdoctor's JSON documents: the one envelope they share, and their one layout.

Every document a command prints starts with ``schema_version`` (it changes only when a key's
meaning does); a report of findings goes on with ``tool`` (libdoctor and its version) and
``target``. On the ground floor so that the Python API (``api.Report.to_json``) and every
renderer make the same document from the same function.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from libdoctor.findings import Finding, Severity, count_by_severity, json_safe
from libdoctor.version import __version__

SCHEMA_VERSION = 1


class Chosen(Protocol):
    """What a document says of its target (``environment.target.Target`` is one)."""

    @property
    def prefix(self) -> str: ...
    @property
    def python(self) -> str | None: ...
    @property
    def site_packages(self) -> tuple[str, ...]: ...
    @property
    def chosen_by(self) -> str: ...


def envelope(body: Mapping[str, Any]) -> dict[str, Any]:
    """A document: ``schema_version`` first, then BODY's keys in their order."""
    return {"schema_version": SCHEMA_VERSION, **body}


def tool(**more: Any) -> dict[str, Any]:
    """The ``tool`` object: libdoctor, its version, then MORE (``--deep``'s ``hashing``)."""
    return {"name": "libdoctor", "version": __version__, **more}


def findings_document(
    *,
    target: Mapping[str, Any],
    summary: Mapping[str, Any],
    findings: Sequence[Finding],
    hashing: Mapping[str, int] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The common report of findings (``check``, ``verify``, ``plan``, ``fix``, ``probe``):
    ``tool``, ``target``, ``summary`` with the counts by severity, ``findings``, then EXTRA;
    with ``--deep``, what the HASHING cost goes under ``tool``."""
    counts = count_by_severity(findings)
    return envelope(
        {
            "tool": tool() if hashing is None else tool(hashing=hashing),
            "target": json_safe(target),
            "summary": {
                **summary,
                "errors": counts[Severity.ERROR],
                "warnings": counts[Severity.WARNING],
                "infos": counts[Severity.INFO],
            },
            "findings": [f.to_json() for f in findings],
            **json_safe(extra or {}),
        }
    )


def dumps(document: Mapping[str, Any]) -> str:
    """The layout all of libdoctor's JSON documents share: indented, ending in a newline,
    ASCII, and no raw control byte (json's ASCII output escapes every byte outside
    ``' '..'~'``, DEL included)."""
    return json.dumps(document, indent=2) + "\n"


class Named(Protocol):
    """A distribution, a locked package: whatever has a name and a version."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str | None: ...


def named(item: Named) -> dict[str, str | None]:
    """ITEM as every document names a distribution: ``{"name": ..., "version": ...}``."""
    return {"name": item.name, "version": item.version}


def target_dict(target: Chosen) -> dict[str, Any]:
    """The document's ``target``: which environment, and why that one."""
    return {
        "prefix": target.prefix,
        "python": target.python,
        "site_packages": list(target.site_packages),
        "chosen_by": target.chosen_by,
    }
