"""``libdoctor probe [MODULE ...] [TARGET]``: the one command that runs the target's code."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.cli import common
from libdoctor.environment.paths import display
from libdoctor.errors import LibdoctorError

if TYPE_CHECKING:
    from libdoctor.environment.model import Environment
    from libdoctor.findings import Finding
    from libdoctor.probe.analyse import LoadedFile, ModuleProbe
    from libdoctor.report.text import Line

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_STACK_CODES = ("cuda-mixed-major", "pin-mismatch", "foreign-bytes", "model-unknown")


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "probe",
        help="import modules in the target and report what is really loaded (RUNS its code)",
        description="Import each MODULE (default: the frameworks found in the environment) in "
        "a subprocess of the target's interpreter, read that process's /proc/self/maps and "
        "report every loaded shared object with its owner and whether its bytes match the "
        "owner's RECORD. Unlike every other command, this RUNS code from the target. "
        "TARGET is the last argument when it contains a '/', is not a module name, or is a "
        "directory holding an environment (pyvenv.cfg or conda-meta).",
    )
    parser.add_argument(
        "names", nargs="*", metavar="MODULE|TARGET", help="modules to import, then the target"
    )
    common.add_target_options(parser, positional=False)
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="per import; the import's process group is killed after it (default: 120)",
    )
    parser.add_argument("--deep", action="store_true", help="compare loaded files by hash too")
    common.add_output_options(parser)
    common.add_filter_options(parser)
    parser.set_defaults(func=run)


def _is_env_dir(name: str) -> bool:
    return os.path.isdir(name) and (
        os.path.exists(os.path.join(name, "pyvenv.cfg"))
        or os.path.isdir(os.path.join(name, "conda-meta"))
    )


def split_names(names: Sequence[str]) -> tuple[list[str], str | None]:
    """(modules, target): the target is the last name, when it reads as a path."""
    modules = list(names)
    target = None
    if modules:
        last = modules[-1]
        if "/" in last or not _MODULE.match(last) or _is_env_dir(last):
            target = modules.pop()
    for name in modules:
        if not _MODULE.match(name):
            raise LibdoctorError(f"{name!r} is not a module name (the target must come last)")
    return modules, target


def run(args: argparse.Namespace) -> int:
    from libdoctor.analysis.run import filter_findings, run_checks
    from libdoctor.checks.stack import analyse_stack, check_stack
    from libdoctor.disk.stat import RealDisk
    from libdoctor.environment.model import build_environment
    from libdoctor.environment.target import discover
    from libdoctor.loader.extensions import LoaderContext
    from libdoctor.loader.system import probe_loader_system
    from libdoctor.probe.analyse import analyse_probe, default_modules, facts_for, run_child
    from libdoctor.probe.predict import StaticPredictor, pinned_by

    if args.timeout <= 0:
        raise LibdoctorError("--timeout must be positive")
    modules, target_arg = split_names(args.names)
    target = discover(target_arg, args.python, os.environ)
    python = target.python
    if python is None:
        raise LibdoctorError(f"no Python interpreter found in {target.prefix}; use --python")
    env = build_environment(target)
    disk = RealDisk()
    if not modules:
        modules = default_modules(env)
        if not modules:
            raise LibdoctorError(
                "no framework found in the environment; name the modules to import: "
                "libdoctor probe MODULE [MODULE ...] [TARGET]"
            )
    print(
        f"libdoctor probe: this RUNS code from the target: importing {', '.join(modules)} "
        f"with {python} (a subprocess each, timeout {args.timeout:g} s)",
        file=sys.stderr,
    )
    workdir = tempfile.mkdtemp(prefix="libdoctor-probe-")
    try:
        environ = dict(os.environ)
        context = LoaderContext(
            probe_loader_system(interpreter=python), environ.get("LD_LIBRARY_PATH") or None, workdir
        )
        stack = analyse_stack(env, disk)
        predictor = StaticPredictor(env, disk, context, python, stack)
        pinned = pinned_by(stack)
        cached: list[Finding] = []

        def static() -> list[Finding]:
            if not cached:
                found = list(run_checks(env, disk, None, context))
                seen = {(f.code, f.message) for f in found}
                if not any(f.code in _STACK_CODES for f in found):
                    from libdoctor.loader.extensions import analyse

                    more = check_stack(env, disk, None, analyse(env, disk, context))
                    found += [f for f in more if (f.code, f.message) not in seen]
                cached.extend(found)
            return cached

        probes = []
        for module in modules:
            child = run_child(
                python,
                module,
                timeout=args.timeout,
                facts=facts_for(module),
                environ=environ,
                cwd=workdir,
            )
            if child.timed_out:
                print(f"libdoctor: probe: {child.error_message}", file=sys.stderr)
            elif child.facts_timed_out:
                print(f"libdoctor: probe: {module}: {child.facts['error']}", file=sys.stderr)
            probes.append(
                analyse_probe(
                    env,
                    disk,
                    child,
                    python=python,
                    deep=args.deep,
                    environ=environ,
                    static=static,
                    predictor=predictor,
                    pinned=pinned,
                )
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    findings = [f for p in probes for f in p.findings]
    shown = filter_findings(findings, args.select, args.ignore, args.all)
    summary = {"distributions": len(env.distributions), "files": len(env.claims)}
    if args.json:
        from libdoctor.report import json as json_report

        extra = {"probes": [probe_dict(env, p) for p in probes]}
        target_info = {**common.target_dict(target), "python": python}
        common.write(
            json_report.render(target=target_info, summary=summary, findings=shown, extra=extra)
        )
    else:
        common.write(render_text(env, target.prefix, python, probes, shown, summary, args))
    return common.exit_code(shown, args.fail_on)


# --------------------------------------------------------------------------- output


def _owners(item: LoadedFile) -> list[dict[str, str]]:
    return [{"name": d.name, "version": d.version} for d in item.owners]


def loaded_dict(item: LoadedFile) -> dict[str, Any]:
    return {
        "path": item.path,
        "soname": item.soname,
        "owners": _owners(item),
        "record_match": item.record_match,
        "bytes_of": [{"name": d.name, "version": d.version} for d in item.bytes_of],
        "decided_by": item.decided_by,
        "inside_env": item.inside_env,
        "deleted": item.deleted,
        "predicted": list(item.predicted),
    }


def probe_dict(env: Environment, probe: ModuleProbe) -> dict[str, Any]:
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


def _short(env: Environment, path: str) -> str:
    for site in env.target.site_dirs:
        real = os.path.realpath(site.path)
        if path.startswith(real + os.sep):
            return display(path[len(real) + 1 :])
    return display(path)


def _loaded_line(env: Environment, item: LoadedFile) -> str:
    owner = ", ".join(d.display for d in item.owners) if item.owners else "no distribution"
    if item.record_match is True and len(item.owners) > len(item.bytes_of):
        whose = ", ".join(d.display for d in item.bytes_of)
        state = f"bytes are {whose}'s ({item.decided_by})"
    elif item.record_match is True:
        state = f"RECORD ok ({item.decided_by})"
    elif item.record_match is False:
        whose = ", ".join(d.display for d in item.bytes_of)
        state = (
            f"bytes are {whose}'s ({item.decided_by})"
            if whose
            else f"bytes match no RECORD ({item.decided_by})"
        )
    else:
        state = "not in any RECORD" if not item.owners else "RECORD has no size"
    deleted = " (deleted)" if item.deleted else ""
    return f"    {_short(env, item.path)}{deleted}  {owner}  {state}"


def render_text(
    env: Environment,
    prefix: str,
    python: str,
    probes: Sequence[ModuleProbe],
    findings: Sequence[Finding],
    summary: dict[str, Any],
    args: argparse.Namespace,
) -> str:
    from libdoctor import __version__
    from libdoctor.findings import Severity
    from libdoctor.report.text import (
        Line,
        finding_lines,
        summary_line,
        to_string,
    )

    lines: list[Line] = [
        Line.of(f"libdoctor {__version__} probe: {display(prefix)} with {display(python)}", "bold"),
        Line.of(),
    ]
    for probe in probes:
        child = probe.child
        if child.ok:
            lines.append(Line.of(f"{probe.module}: imported in {child.seconds:.2f} s", "bold"))
        else:
            lines.append(Line.of(f"{probe.module}: import failed", "bold red"))
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
                    f"  {len(probe.loaded)} shared objects mapped, {len(inside)} from the "
                    "environment:"
                )
            )
            lines += [Line.of(_loaded_line(env, i)) for i in inside]
            if args.verbose:
                lines += [Line.of(_loaded_line(env, i), "dim") for i in outside]
            elif outside:
                lines.append(
                    Line.of(f"    … and {len(outside)} from outside it (--verbose)", "dim")
                )
        if probe.facts_loaded:
            lines.append(Line.of("  mapped while gathering the facts:"))
            lines += [Line.of(_loaded_line(env, i), "dim") for i in probe.facts_loaded]
        lines.append(Line.of())
    for severity in sorted(Severity, reverse=True):
        group = [f for f in findings if f.severity is severity]
        if group:
            title = {"error": "Errors", "warning": "Warnings"}.get(severity.label, "Info")
            lines.append(Line.of(f"{title} ({len(group)})", "bold"))
            for finding in group:
                lines += finding_lines(finding, args.verbose)
    lines.append(summary_line(findings, summary))
    return to_string(lines, color=common.use_color(args))


def _fact(value: Any) -> str:
    if isinstance(value, dict) and "error" in value:
        return f"unavailable ({value['error']})"
    return str(value)
