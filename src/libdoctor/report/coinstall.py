"""``plan lock`` output: which lock, for which platform, what reading it cost, the findings.

The JSON is the common document (``schema_version``, ``tool``, ``target``: the lock and the
platform, ``summary``, ``findings``) with a ``lock`` object: its path and format, what was
planned for, the wheels chosen (and what each cost), the extension modules read for the
libraries they need (and those not read, with why), the packages whose files cannot be told,
the excluded ones and the notes of its reading. SARIF results point at the lock file,
at the line of the package each finding names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.document import named
from libdoctor.findings import Finding, Severity
from libdoctor.report.text import TITLE, Line, finding_lines, to_string
from libdoctor.stack.caches import size_text
from libdoctor.version import __version__

if TYPE_CHECKING:
    from libdoctor.whatif.linkage import Linkage
    from libdoctor.whatif.lock import LockPlan


def cost_line(plan: LockPlan) -> str:
    share = f" ({100 * plan.fetched / plan.size:.3f}%)" if plan.size else ""
    cached = f", {plan.cached} from the cache" if plan.cached else ""
    return (
        f"read {size_text(plan.fetched)} of {size_text(plan.size)} of wheels by range{share}: "
        f"{len(plan.wheels)} wheels, {plan.requests} requests{cached}"
    )


def extensions_line(linkage: Linkage) -> str:
    capped = sum(1 for u in linkage.unread if u.capped)
    count = len(linkage.extensions)
    line = f"{count} extension module{'' if count == 1 else 's'} read for the libraries they need"
    return line + (f", {capped} not (over the read caps; --json lists them)" if capped else "")


def header(plan: LockPlan) -> list[str]:
    lock, selection = plan.lock, plan.selection
    by = f", created by {lock.created_by}" if lock.created_by else ""
    lines = [
        f"libdoctor {__version__}: plan lock {lock.path} ({lock.format}{by})",
        f"for {plan.platform.display}: {len(selection.required)} of {len(lock.packages)} "
        "packages apply",
        cost_line(plan),
    ]
    if plan.linkage is not None and (plan.linkage.extensions or plan.linkage.unread):
        lines.append(extensions_line(plan.linkage))
    if selection.chosen:
        lines.append(f"synced with: {selection.chosen}")
    return lines


def render_text(plan: LockPlan, findings: Sequence[Finding], *, color: bool, verbose: bool) -> str:
    lines = [Line.of(text) for text in header(plan)]
    lines.append(Line.of())
    for severity in sorted(Severity, reverse=True):
        chosen = [f for f in findings if f.severity == severity]
        if chosen:
            lines.append(Line.of(f"{TITLE[severity]} ({len(chosen)})", "bold"))
            for finding in chosen:
                lines += finding_lines(finding, verbose)
    if verbose:
        lines += [Line.of(f"note: {n}", "dim") for n in (*plan.lock.notes, *plan.selection.notes)]
    lines.append(_verdict(plan, findings))
    return to_string(lines, color=color)


def _verdict(plan: LockPlan, findings: Sequence[Finding]) -> Line:
    bad = [f for f in findings if f.severity >= Severity.WARNING]
    if not bad:
        told = f"{len(plan.wheels)} wheels planned together"
        return Line.of("The lock installs cleanly here: ", "bold green").plus(told)
    return Line.of(f"The lock would break an environment ({len(bad)})", "bold red")


def lock_dict(plan: LockPlan) -> dict[str, Any]:
    selection = plan.selection
    return {
        "path": plan.lock.path,
        "format": plan.lock.format,
        "created_by": plan.lock.created_by,
        "planned_for": {
            "python": f"{plan.platform.python[0]}.{plan.platform.python[1]}",
            "python_full_version": plan.platform.markers.get("python_full_version"),
            "platform": plan.platform.platform,
            "tags": list(plan.platform.tags[:3]),
        },
        "wheels": [
            {
                "name": w.package.name,
                "version": w.package.version,
                "file": w.filename,
                "size": w.read.size,
                "fetched": w.read.fetched,
                "requests": w.read.requests,
                "how": w.read.how,
            }
            for w in plan.wheels
        ],
        "cannot_tell": [{**named(u.package), "why": u.why} for u in plan.unplanned],
        "excluded": [{**named(e.package), "why": e.why} for e in selection.excluded],
        "extensions": _extensions(plan),
        "synced_with": selection.chosen or None,
        "notes": [*plan.lock.notes, *selection.notes],
    }


def _extensions(plan: LockPlan) -> dict[str, Any]:
    """The extension modules read, those not read and why, and what reading cost (in the
    totals too)."""
    linkage = plan.linkage
    if linkage is None:
        return {"read": 0, "not_read": [], "fetched": 0, "requests": 0}
    site = plan.env.target.site_dirs[0].path + "/"
    return {
        "read": len(linkage.extensions),
        "not_read": [
            {"wheel": u.wheel, "extension": u.path.removeprefix(site), "why": u.why}
            for u in linkage.unread
        ],
        "fetched": linkage.fetched,
        "requests": linkage.requests,
    }


def render_json(plan: LockPlan, findings: Sequence[Finding]) -> str:
    from libdoctor.document import dumps, findings_document

    summary = {
        "locked": len(plan.lock.packages),
        "required": len(plan.selection.required),
        "wheels": len(plan.wheels),
        "fetched": plan.fetched,
        "wheel_bytes": plan.size,
        "requests": plan.requests,
    }
    target = {"lock": plan.lock.path, "platform": plan.platform.platform}
    return dumps(
        findings_document(
            target=target, summary=summary, findings=findings, extra={"lock": lock_dict(plan)}
        )
    )


def render_sarif(
    plan: LockPlan, findings: Sequence[Finding], lines: Mapping[str, int], root: str | None = None
) -> str:
    """SARIF: every result at the lock file, at LINES' line for the package it names. The
    file's URI is relative to ROOT when the lock lies under it (the working directory: code
    scanning reads a relative URI from the repository's root, where the action runs), else
    to the lock's own directory."""
    import json
    import os

    from libdoctor.document import dumps
    from libdoctor.report import sarif

    directory = os.path.dirname(os.path.abspath(plan.lock.path))
    if root is not None and not os.path.relpath(directory, root).startswith(os.pardir):
        directory = os.path.abspath(root)
    doc = json.loads(sarif.render([_without_paths(f) for f in findings], directory,
                                  fallback=os.path.abspath(plan.lock.path)))  # fmt: skip
    for result, finding in zip(doc["runs"][0]["results"], findings, strict=True):
        name = finding.distribution.name if finding.distribution else None
        line = lines.get(_key(name)) if name else None
        if line is not None:
            result["locations"][0]["physicalLocation"]["region"] = {"startLine": line}
    return dumps(doc)


def _key(name: str) -> str:
    from libdoctor.environment.distributions import canonicalize_name

    return canonicalize_name(name)


def _without_paths(finding: Finding) -> Finding:
    from dataclasses import replace

    return replace(finding, paths=())
