"""One JSON envelope (libdoctor.document): every document a command prints starts with the
one ``schema_version``, written in one place; the Python API makes check's document
without the renderers."""

from __future__ import annotations

import ast
from pathlib import Path

from libdoctor.document import SCHEMA_VERSION, dumps, envelope, findings_document, tool
from libdoctor.findings import Finding, Severity
from libdoctor.version import __version__

SRC = Path(__file__).resolve().parent.parent / "src" / "libdoctor"
# Files with a format of their own, versioned apart from the printed documents.
OWN_FORMATS = {"repair/journal.py", "analysis/snapshot.py"}


def test_schema_version_is_written_in_one_place() -> None:
    writers = {
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if '"schema_version"' in path.read_text()
    }
    assert writers - OWN_FORMATS == {"document.py"}


def test_the_envelope_comes_first_and_keeps_the_body_in_order() -> None:
    doc = envelope({"b": 1, "a": 2})
    assert list(doc) == ["schema_version", "b", "a"] and doc["schema_version"] == SCHEMA_VERSION


def test_a_findings_report_names_the_tool_and_counts_by_severity() -> None:
    findings = [Finding("altered-files", Severity.WARNING, "changed")]
    doc = findings_document(
        target={"prefix": "/env"},
        summary={"files": 3},
        findings=findings,
        hashing={"files_hashed": 1},
        extra={"more": True},
    )
    assert list(doc) == ["schema_version", "tool", "target", "summary", "findings", "more"]
    assert doc["tool"] == tool(hashing={"files_hashed": 1})
    assert doc["tool"] == {
        "name": "libdoctor",
        "version": __version__,
        "hashing": {"files_hashed": 1},
    }
    assert doc["summary"] == {"files": 3, "errors": 0, "warnings": 1, "infos": 0}


def test_the_api_report_imports_no_renderer() -> None:
    tree = ast.parse((SRC / "api.py").read_text())
    (report,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Report"]
    imported = {node.module or "" for node in ast.walk(report) if isinstance(node, ast.ImportFrom)}
    assert imported and not any(m.startswith("libdoctor.report") for m in imported)


def test_the_layout_writes_no_raw_control_byte() -> None:
    text = dumps(envelope({"name\x7f": "a\x7f\x1b\udcff"}))
    assert text.isascii() and not any((c < " " and c != "\n") or c == "\x7f" for c in text)
    assert text.endswith("}\n")
