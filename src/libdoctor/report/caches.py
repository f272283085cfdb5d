"""``libdoctor caches``: every compile cache root with its entries judged, and what a clear
removed; text and JSON."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from libdoctor.document import dumps, findings_document
from libdoctor.environment.paths import display
from libdoctor.findings import Finding
from libdoctor.repair.caches import Cleared
from libdoctor.report.text import Line, finding_lines, text_lines, to_string
from libdoctor.stack.caches import CacheScan, Entry, Versions, size_text

__all__ = ["cleared_json", "cleared_text", "scan_json", "scan_text"]

ENTRIES_SHOWN = 10


def _age(newest: float, now: float) -> str:
    seconds = max(now - newest, 0.0)
    for unit, scale in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= scale:
            return f"{seconds / scale:.0f} {unit} ago"
    return "just now"


def _root_lines(scan: CacheScan, now: float, verbose: bool) -> list[Line]:
    head = Line.of(f"{scan.kind}", "bold").plus(f"  {display(scan.root)}  ({scan.source})")
    if not scan.exists:
        return [head.plus(": absent", "dim")]
    files = sum(e.files for e in (*scan.entries, *scan.unknown))
    newest = max((e.newest for e in (*scan.entries, *scan.unknown)), default=0.0)
    age = f", newest {_age(newest, now)}" if newest else ""
    lines = [
        head,
        Line.of(f"    {len(scan.entries)} entries, {files:,} files, {size_text(scan.size)}{age}"),
        Line.of(f"    records: {scan.records}", "dim"),
    ]
    stale = scan.stale
    versioned = [e for e in scan.entries if e.recorded and not e.stale]
    silent = len(scan.entries) - len(stale) - len(versioned)
    lines.append(
        Line.of(
            f"    stale {len(stale)}, current {len(versioned)}, no version recorded {silent}, "
            f"not the tool's (left alone) {len(scan.unknown)}"
        )
    )
    lines += _entry_lines("!", stale, now, verbose, "yellow")
    if verbose:
        lines += _entry_lines(" ", versioned, now, verbose, "")
        lines += _entry_lines("?", scan.unknown, now, verbose, "dim")
    return lines


def _entry_lines(
    mark: str, entries: Sequence[Entry], now: float, verbose: bool, style: str
) -> list[Line]:
    shown = entries if verbose else entries[:ENTRIES_SHOWN]
    lines = [
        Line.of(f"      {mark} {e.name}", style).plus(
            f"  {size_text(e.size)}, {_age(e.newest, now)}"
            + (f"  [{', '.join(r.display for r in e.recorded)}]" if e.recorded else "")
        )
        for e in shown
    ]
    if len(entries) > len(shown):
        more = len(entries) - len(shown)
        lines.append(Line.of(f"        … and {more} more (--verbose or --json)", "dim"))
    return lines


def scan_text(
    prefix: str,
    versions: Versions,
    scans: Sequence[CacheScan],
    findings: Sequence[Finding],
    *,
    color: bool,
    verbose: bool,
) -> str:
    now = time.time()
    lines = [
        Line.of(f"compile caches for {display(prefix)}", "bold"),
        Line.of(f"this environment: {versions.describe()}"),
        Line.of(),
    ]
    for scan in scans:
        lines += _root_lines(scan, now, verbose)
    lines.append(Line.of())
    for finding in findings:
        lines += finding_lines(finding, verbose)
    stale = sum(len(s.stale) for s in scans)
    if stale:
        size = sum(e.size for s in scans for e in s.stale)
        lines.append(Line.of(f"{stale} stale entries, {size_text(size)}", "yellow"))
    else:
        lines.append(Line.of("No stale cache entries", "bold green"))
    return to_string(lines, color=color)


def _entry_dict(entry: Entry) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": entry.name,
        "path": entry.path,
        "bytes": entry.size,
        "files": entry.files,
        "newest_mtime": entry.newest,
        "recorded": [{"what": r.what, "value": r.value, "where": r.where} for r in entry.recorded],
        "stale": list(entry.stale),
    }
    if entry.members:
        out["members"] = list(entry.members)
    return out


def _scan_dict(scan: CacheScan) -> dict[str, Any]:
    return {
        "kind": scan.kind,
        "root": scan.root,
        "source": scan.source,
        "used": scan.used,
        "exists": scan.exists,
        "records": scan.records,
        "bytes": scan.size,
        "entries": [_entry_dict(e) for e in scan.entries],
        "unknown": [_entry_dict(e) for e in scan.unknown],
    }


def _versions_dict(versions: Versions) -> dict[str, Any]:
    return {
        "python": versions.python,
        "cache_tag": versions.cache_tag,
        "cuda": versions.cuda,
        **dict(versions.tools),
    }


def scan_json(
    target: dict[str, Any],
    versions: Versions,
    scans: Sequence[CacheScan],
    findings: Sequence[Finding],
) -> str:
    summary = {
        "caches": len(scans),
        "entries": sum(len(s.entries) for s in scans),
        "stale": sum(len(s.stale) for s in scans),
        "stale_bytes": sum(e.size for s in scans for e in s.stale),
    }
    extra = {"versions": _versions_dict(versions), "caches": [_scan_dict(s) for s in scans]}
    return dumps(findings_document(target=target, summary=summary, findings=findings, extra=extra))


def cleared_text(cleared: Sequence[Cleared], dry_run: bool, restore_args: str = "") -> str:
    """What a clear removed (or would), and the restore that puts each root back;
    RESTORE_ARGS: what the restore needs besides the id (``--cache-dir DIR``)."""
    if not cleared:
        return "Nothing to clear\n"
    verb = "would remove" if dry_run else "removed"
    lines = []
    for item in cleared:
        count = f"{len(item.entries)} {'entry' if len(item.entries) == 1 else 'entries'}"
        lines.append(
            f"{item.kind} {display(item.root)}: {verb} {count}, "
            f"{item.files:,} files, {size_text(item.size)}"
        )
        if item.backup:
            again = f"libdoctor restore {item.backup}{restore_args}"
            lines.append(f"  backup {item.backup}: `{again}` puts them back")
        elif not dry_run:
            lines.append("  no backup (--no-backup)")
    return text_lines(lines)


def cleared_json(target: dict[str, Any], cleared: Sequence[Cleared], dry_run: bool) -> str:
    rows = [
        {
            "kind": c.kind,
            "root": c.root,
            "entries": list(c.entries),
            "files": c.files,
            "bytes": c.size,
            "backup": c.backup,
        }
        for c in cleared
    ]
    summary = {"dry_run": dry_run, "entries": sum(len(c.entries) for c in cleared)}
    return dumps(
        findings_document(target=target, summary=summary, findings=(), extra={"cleared": rows})
    )
