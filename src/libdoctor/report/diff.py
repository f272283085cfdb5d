"""``diff`` output: the changes grouped by distribution (text), or as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from libdoctor.analysis.diff import (
    Diff,
    FieldChange,
    FileChange,
    FindingChange,
    LibraryChange,
    VersionChange,
)
from libdoctor.analysis.snapshot import PORTABLE, FileRow, LibraryRecord, finding_document
from libdoctor.document import dumps, envelope
from libdoctor.report.text import text_lines

Change = VersionChange | FileChange | FieldChange | LibraryChange | FindingChange
_FILES_SHOWN = 5  # per distribution, without --verbose


def version_line(change: VersionChange) -> str:
    before, after = " ".join(change.before), " ".join(change.after)
    if change.kind == "added":
        return f"{change.name} {after} added"
    if change.kind == "removed":
        return f"{change.name} {before} removed"
    return f"{change.name} {before} → {after} ({change.kind})"


def _row(row: FileRow | None) -> str:
    if row is None:
        return "not in RECORD"
    if row.size is None:
        return "missing"
    return f"{row.size} bytes" + (f", {row.digest[:19]}…" if row.digest else "")


def _other_bytes(before: FileRow, after: FileRow) -> str:
    was, now = (row.hash is not None and row.hash.startswith(PORTABLE) for row in (before, after))
    if was and not now:
        return "a script that named its own environment now names another path"
    if now and not was:
        return "a script now names its own environment"
    return "other bytes" if was else "other bytes (RECORD hash differs)"


def file_line(change: FileChange) -> str:
    if change.kind in ("added", "removed"):
        return f"{change.path}: RECORD row {change.kind}"
    before, after = change.before, change.after
    if change.kind == "changed" and before and after and before.hash != after.hash:
        return f"{change.path}: {_other_bytes(before, after)}"
    return f"{change.path}: {_row(change.before)} → {_row(change.after)}"


def _where(lib: LibraryRecord) -> str:
    if lib.path is None:
        return "not found"
    owners = ", ".join(f"{n} {v}" for n, v in lib.owners)
    return lib.path + (f" ({owners})" if owners else " (no owner)")


def library_line(change: LibraryChange) -> str:
    before = "; ".join(sorted({_where(lib) for lib in change.before})) or "not needed"
    after = "; ".join(sorted({_where(lib) for lib in change.after}))
    return f"{change.name}: {before} → {after}"


def finding_line(change: FindingChange) -> str:
    sign = "+" if change.new else "-"
    f = change.finding
    return f"{sign} {f.severity} {f.code}: {f.message.splitlines()[0] if f.message else ''}"


def field_line(change: FieldChange) -> str:
    return f"{change.field}: {change.before} → {change.after}"


def _groups(d: Diff) -> dict[str | None, list[Change]]:
    groups: dict[str | None, list[Change]] = {}
    items: list[Change] = [*d.versions, *d.fields, *d.files, *d.libraries, *d.findings]
    for item in items:
        groups.setdefault(item.key, []).append(item)
    return groups


def _heading(key: str | None, items: list[Change]) -> tuple[str, list[Change]]:
    if key is None:
        return "environment", items
    version = next((i for i in items if isinstance(i, VersionChange)), None)
    if version is not None:
        return version_line(version), [i for i in items if i is not version]
    for item in items:
        if isinstance(item, (FileChange, FieldChange)) and item.key == key:
            return item.dist if isinstance(item, FileChange) else item.subject, items
        if isinstance(item, FindingChange) and item.finding.distribution:
            return item.finding.distribution, items
    return key, items


def _line(item: Change) -> str:
    if isinstance(item, FileChange):
        return file_line(item)
    if isinstance(item, LibraryChange):
        return library_line(item)
    if isinstance(item, FindingChange):
        return finding_line(item)
    if isinstance(item, FieldChange):
        return field_line(item) if item.key is not None else f"{item.subject} {field_line(item)}"
    assert isinstance(item, VersionChange)
    return version_line(item)


def grouped_changes(d: Diff, *, verbose: bool = False) -> list[tuple[str, list[str]]]:
    """Every change, grouped under its distribution: (heading, detail lines), the environment's
    own changes last; without VERBOSE, a few changed files per distribution."""
    out: list[tuple[str, list[str]]] = []
    groups = _groups(d)
    for key in sorted(groups, key=lambda k: (k is None, k or "")):
        heading, items = _heading(key, groups[key])
        files = [i for i in items if isinstance(i, FileChange)]
        hidden = len(files) - _FILES_SHOWN if not verbose else 0
        shown_files = set(map(id, files[:_FILES_SHOWN] if hidden > 0 else files))
        lines = [
            _line(item)
            for item in items
            if not isinstance(item, FileChange) or id(item) in shown_files
        ]
        if hidden > 0:
            lines.append(f"… and {hidden} more changed files (--verbose lists them)")
        out.append((heading, lines))
    return out


def change_lines(d: Diff, *, verbose: bool = False) -> list[str]:
    """Every change, grouped under its distribution: a heading, then indented details."""
    lines: list[str] = []
    for heading, details in grouped_changes(d, verbose=verbose):
        lines.append(heading)
        lines += [f"  {line}" for line in details]
    return lines


def diff_text(d: Diff, labels: tuple[str, str], *, verbose: bool = False) -> str:
    """Every line inert: the labels name nodes and paths a snapshot file carries, the
    changes its distributions' names and paths."""
    head = [f"A: {labels[0]}", f"B: {labels[1]}", ""]
    if d.empty:
        return text_lines([*head, "no differences"])
    count = d.count()
    tail = ["", f"{count} difference{'s' if count != 1 else ''}"]
    return text_lines([*head, *change_lines(d, verbose=verbose), *tail])


# --------------------------------------------------------------------------- JSON


def _file_dict(row: FileRow | None) -> dict[str, Any] | None:
    if row is None:
        return None
    out: dict[str, Any] = {"size": row.size, "hash": row.hash}
    if row.digest is not None:
        out["digest"] = row.digest
    return out


def _library_dict(lib: LibraryRecord) -> dict[str, Any]:
    return {"path": lib.path, "owners": [list(o) for o in lib.owners], "soname": lib.soname}


def diff_dict(d: Diff) -> dict[str, Any]:
    return {
        "identical": d.empty,
        "distributions": [
            {"name": v.name, "change": v.kind, "before": list(v.before), "after": list(v.after)}
            for v in d.versions
        ],
        "files": [
            {
                "distribution": f.dist,
                "path": f.path,
                "change": f.kind,
                "before": _file_dict(f.before),
                "after": _file_dict(f.after),
            }
            for f in d.files
        ],
        "metadata": [
            {"subject": c.subject, "field": c.field, "before": c.before, "after": c.after}
            for c in d.fields
        ],
        "libraries": [
            {
                "name": c.name,
                "before": [_library_dict(lib) for lib in c.before],
                "after": [_library_dict(lib) for lib in c.after],
            }
            for c in d.libraries
        ],
        "findings": {
            "new": [finding_document(c.finding) for c in d.findings if c.new],
            "gone": [finding_document(c.finding) for c in d.findings if not c.new],
        },
    }


def diff_json(d: Diff, sources: Mapping[str, Mapping[str, Any]]) -> str:
    return dumps(envelope({**sources, **diff_dict(d)}))
