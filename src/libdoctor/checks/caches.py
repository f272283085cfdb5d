"""Compile caches -> findings: stale entries (``caches``), and ``check``'s one summary line.

An entry is stale only when it records a version and the environment has another (``judge``
in ``stack.caches``); an entry that records nothing is never a finding. ``caches`` reports
one ``stale-cache-entry`` per cache root and reason, naming every entry; ``check`` says at
most one ``stale-caches`` line, from a bounded look (``quick_stale``).
"""

from __future__ import annotations

from collections.abc import Sequence

from libdoctor.findings import Finding, Fix, Severity
from libdoctor.remedy import ClearCache
from libdoctor.stack.caches import CacheScan, Entry, QuickHit, size_text

__all__ = ["clear_fix", "stale_entry_findings", "stale_summary"]


def clear_fix(kinds: Sequence[str], prefix: str) -> Fix:
    return Fix((ClearCache(tuple(kinds), prefix),))


def stale_entry_findings(scans: Sequence[CacheScan], prefix: str) -> list[Finding]:
    """One warning per cache root and reason: the entries, their size, the clear command."""
    findings = []
    for scan in scans:
        groups: dict[tuple[str, ...], list[Entry]] = {}
        for entry in scan.stale:
            groups.setdefault(entry.stale, []).append(entry)
        for reasons, entries in groups.items():
            size = sum(e.size for e in entries)
            message = (
                f"{scan.kind} cache {scan.root}: {len(entries)} "
                f"{'entry' if len(entries) == 1 else 'entries'} ({size_text(size)}) "
                f"{'; '.join(reasons)}. This environment never reads them (an environment "
                "on those versions may)."
            )
            findings.append(
                Finding(
                    "stale-cache-entry",
                    Severity.WARNING,
                    message,
                    paths=tuple(e.path for e in entries if not e.members)
                    or tuple(m for e in entries for m in e.members),
                    evidence={
                        "kind": scan.kind,
                        "root": scan.root,
                        "entries": [e.name for e in entries],
                        "bytes": size,
                    },
                    fix=clear_fix([scan.kind], prefix),
                )
            )
    return findings


def stale_summary(hits: Sequence[QuickHit], prefix: str) -> list[Finding]:
    """At most one info line for ``check``; nothing when no cache holds a stale entry."""
    if not hits:
        return []
    parts = []
    for hit in hits:
        count = f"{hit.stale}" if hit.complete else f"at least {hit.stale}"
        parts.append(f"{hit.kind} {hit.root}: {count} ({', '.join(hit.reasons)})")
    message = (
        f"Compile caches this environment uses hold entries built for other versions: "
        f"{'; '.join(parts)}. `libdoctor caches {prefix}` lists them."
    )
    return [
        Finding(
            "stale-caches",
            Severity.INFO,
            message,
            paths=tuple(h.root for h in hits),
            evidence={
                "caches": [
                    {"kind": h.kind, "root": h.root, "stale": h.stale, "complete": h.complete}
                    for h in hits
                ]
            },
            fix=clear_fix(sorted({h.kind for h in hits}), prefix),
        )
    ]
