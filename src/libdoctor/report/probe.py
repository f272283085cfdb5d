"""``probe`` output: per module, what the import mapped and whose bytes each file is.

Files from the environment are listed with their owners and how their bytes were judged
(size or hash against RECORD); files from outside it (the system's libc, the driver) are
only counted unless ``--verbose``, since the question is about the environment's own files.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.checks.wording import file_list
from libdoctor.document import dumps, findings_document, named
from libdoctor.environment.paths import display
from libdoctor.findings import Finding, Severity
from libdoctor.report.text import Line, finding_lines, summary_line, to_string
from libdoctor.version import __version__

if TYPE_CHECKING:
    from libdoctor.environment.model import Environment
    from libdoctor.probe.analyse import LoadedFile, ModuleProbe
    from libdoctor.probe.child import ChildReport
    from libdoctor.probe.run import ProbeRun


# --------------------------------------------------------------------------- stderr


def start_notice(modules: Sequence[str], python: str, timeout: float) -> str:
    """The warning before any of the target's code runs."""
    return (
        f"libdoctor probe: this RUNS code from the target: importing {', '.join(modules)} "
        f"with {python} (a subprocess each, timeout {timeout:g} s)"
    )


def child_notice(child: ChildReport) -> str | None:
    """What to say at once about a child that hung (its report comes at the end)."""
    if child.timed_out:
        return f"libdoctor: probe: {child.error_message}"
    if child.facts_timed_out:
        return f"libdoctor: probe: {child.module}: {child.facts['error']}"
    return None


# --------------------------------------------------------------------------- JSON


def loaded_dict(item: LoadedFile) -> dict[str, Any]:
    return {
        "path": item.path,
        "soname": item.soname,
        "owners": [named(d) for d in item.owners],
        "record_match": item.record_match,
        "bytes_of": [named(d) for d in item.bytes_of],
        "decided_by": item.decided_by,
        "inside_env": item.inside_env,
        "deleted": item.deleted,
        "predicted": list(item.predicted),
    }


def probe_dict(probe: ModuleProbe) -> dict[str, Any]:
    child = probe.child
    return {
        "module": probe.module,
        "ok": child.ok,
        "timed_out": child.timed_out,
        "seconds": child.seconds,
        "error": (None if child.ok else {"type": child.error_type, "message": child.error_message}),
        "facts": dict(child.facts),
        "loaded": [loaded_dict(i) for i in probe.loaded],
        "loaded_by_facts": [loaded_dict(i) for i in probe.facts_loaded],
    }


def summary(run: ProbeRun) -> dict[str, Any]:
    return {"distributions": len(run.env.distributions), "files": len(run.env.claims)}


def render_json(run: ProbeRun, findings: Sequence[Finding], target: Mapping[str, Any]) -> str:
    """The common report (TARGET with the interpreter that ran), plus one entry per probe."""
    return dumps(
        findings_document(
            target={**target, "python": run.python},
            summary=summary(run),
            findings=findings,
            extra={"probes": [probe_dict(p) for p in run.probes]},
        )
    )


# --------------------------------------------------------------------------- text


def _short(env: Environment, path: str) -> str:
    for site in env.target.site_dirs:
        real = os.path.realpath(site.path)
        if path.startswith(real + os.sep):
            return display(path[len(real) + 1 :])
    return display(path)


def _loaded_line(env: Environment, item: LoadedFile) -> str:
    owner = ", ".join(d.display for d in item.owners) if item.owners else "no distribution"
    listing = file_list(item.owners[0]) if len(item.owners) == 1 else "RECORD"
    listing = listing.removeprefix("its ")
    if item.record_match is True and len(item.owners) > len(item.bytes_of):
        whose = ", ".join(d.display for d in item.bytes_of)
        state = f"bytes are {whose}'s ({item.decided_by})"
    elif item.record_match is True:
        state = f"{listing} ok ({item.decided_by})"
    elif item.record_match is False:
        whose = ", ".join(d.display for d in item.bytes_of)
        state = (
            f"bytes are {whose}'s ({item.decided_by})"
            if whose
            else f"bytes match no RECORD ({item.decided_by})"
        )
    else:
        state = "not in any RECORD" if not item.owners else f"{listing} has no size"
    deleted = " (deleted)" if item.deleted else ""
    return f"    {_short(env, item.path)}{deleted}  {owner}  {state}"


def _fact(value: Any) -> str:
    if isinstance(value, dict) and "error" in value:
        return f"unavailable ({value['error']})"
    return str(value)


def probe_lines(env: Environment, probe: ModuleProbe, verbose: bool) -> list[Line]:
    """One module: how the import went, its framework facts, the files it mapped."""
    child = probe.child
    if child.ok:
        lines = [Line.of(f"{probe.module}: imported in {child.seconds:.2f} s", "bold")]
    else:
        lines = [Line.of(f"{probe.module}: import failed", "bold red")]
    if child.facts_timed_out:
        lines.append(Line.of(f"  facts: {child.facts['error']}"))
    elif child.facts:
        facts = ", ".join(f"{k}={_fact(v)}" for k, v in child.facts.items())
        lines.append(Line.of(f"  facts: {facts}"))
    inside = [i for i in probe.loaded if i.inside_env]
    outside = [i for i in probe.loaded if not i.inside_env]
    if probe.loaded:
        lines.append(
            Line.of(
                f"  {len(probe.loaded)} shared objects mapped, {len(inside)} from the environment:"
            )
        )
        lines += [Line.of(_loaded_line(env, i)) for i in inside]
        if verbose:
            lines += [Line.of(_loaded_line(env, i), "dim") for i in outside]
        elif outside:
            lines.append(Line.of(f"    … and {len(outside)} from outside it (--verbose)", "dim"))
    if probe.facts_loaded:
        lines.append(Line.of("  mapped while gathering the facts:"))
        lines += [Line.of(_loaded_line(env, i), "dim") for i in probe.facts_loaded]
    lines.append(Line.of())
    return lines


def findings_lines(findings: Sequence[Finding], verbose: bool) -> list[Line]:
    """The findings by severity, worst first, under a plain bold title per group."""
    lines: list[Line] = []
    for severity in sorted(Severity, reverse=True):
        group = [f for f in findings if f.severity is severity]
        if group:
            title = {"error": "Errors", "warning": "Warnings"}.get(severity.label, "Info")
            lines.append(Line.of(f"{title} ({len(group)})", "bold"))
            for finding in group:
                lines += finding_lines(finding, verbose)
    return lines


def render_text(run: ProbeRun, findings: Sequence[Finding], *, verbose: bool, color: bool) -> str:
    env = run.env
    lines = [
        Line.of(
            f"libdoctor {__version__} probe: {display(env.target.prefix)} with "
            f"{display(run.python)}",
            "bold",
        ),
        Line.of(),
    ]
    for probe in run.probes:
        lines += probe_lines(env, probe, verbose)
    lines += findings_lines(findings, verbose)
    lines.append(summary_line(findings, summary(run)))
    return to_string(lines, color=color)
