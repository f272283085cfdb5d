"""Findings as SARIF 2.1.0, for code scanning (GitHub's upload-sarif and other SARIF viewers).

One rule per finding code (its id the code, its text what ``CODES`` says it means), one result
per finding. A result's location is the finding's first path (for a library finding, the
extension that needs the library) relative to the target, under the ``TARGET`` base whose
``file://`` URI the run names; a path outside the target is an absolute ``file://`` URI. A
finding without a path points at FALLBACK (the lock file for ``verify --lock``) or the target.
Like every JSON document libdoctor writes, the log holds no raw control byte.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from libdoctor.document import dumps, named
from libdoctor.findings import CODES, Finding, Severity
from libdoctor.report.text import inert
from libdoctor.version import __version__

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
BASE_ID = "TARGET"

LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def render(findings: Sequence[Finding], prefix: str, fallback: str | None = None) -> str:
    """The SARIF log of FINDINGS in the environment at PREFIX: one run, libdoctor's."""
    run = {
        "tool": {"driver": driver()},
        "originalUriBaseIds": {BASE_ID: {"uri": directory_uri(prefix)}},
        "results": [result(f, prefix, fallback) for f in findings],
        "columnKind": "unicodeCodePoints",
    }
    return dumps({"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]})


def driver() -> dict[str, Any]:
    """libdoctor and every rule it can report: the codes, in their stable order."""
    return {
        "name": "libdoctor",
        "version": __version__,
        "semanticVersion": __version__,
        "rules": [rule(code) for code in CODES],
    }


def rule(code: str) -> dict[str, Any]:
    meaning = CODES[code].summary
    return {
        "id": code,
        "name": "".join(part.capitalize() for part in code.split("-")),
        "shortDescription": {"text": meaning},
        "fullDescription": {"text": f"{code}: {meaning}"},
        "help": {"text": f"{meaning}. Run `libdoctor check --verbose` for the details and fix."},
        "properties": {"tags": ["libdoctor"]},
    }


def result(finding: Finding, prefix: str, fallback: str | None) -> dict[str, Any]:
    rule_index = list(CODES).index(finding.code)
    out: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": rule_index,
        "level": LEVELS[finding.severity],
        "message": {"text": message_text(finding)},
        "locations": [location(finding_path(finding, prefix, fallback), prefix)],
    }
    if finding.distribution is not None:
        out["properties"] = {"distribution": named(finding.distribution)}
    return out


def message_text(finding: Finding) -> str:
    """What a viewer shows of FINDING: its message and fix, each made inert (a name's
    control characters spelled as escapes: a viewer may print it to a terminal)."""
    text = inert(finding.message)
    if finding.fix is not None:
        text += f"\nFix: {inert(finding.fix.command)}"
    return text


def finding_path(finding: Finding, prefix: str, fallback: str | None) -> str:
    """Where the finding points: its first path, else FALLBACK, else the target itself."""
    if finding.paths:
        return finding.paths[0]
    return fallback if fallback is not None else prefix


def location(path: str, prefix: str) -> dict[str, Any]:
    """PATH relative to the target's base when inside it, else an absolute file URI."""
    absolute = os.path.abspath(os.path.join(prefix, path))
    relative = os.path.relpath(absolute, os.path.abspath(prefix))
    if relative == os.curdir:
        artifact: dict[str, Any] = {"uri": "./", "uriBaseId": BASE_ID}
    elif relative.startswith(os.pardir):
        artifact = {"uri": Path(absolute).as_uri()}
    else:
        uri = quote(Path(relative).as_posix(), errors="surrogateescape")
        artifact = {"uri": uri, "uriBaseId": BASE_ID}
    return {"physicalLocation": {"artifactLocation": artifact}}


def directory_uri(prefix: str) -> str:
    """PREFIX as a ``file://`` URI ending in ``/``, as SARIF wants a base URI."""
    uri = Path(os.path.abspath(prefix)).as_uri()
    return uri if uri.endswith("/") else uri + "/"
