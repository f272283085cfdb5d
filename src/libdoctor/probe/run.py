"""One ``libdoctor probe`` run: import each module in a child of the target's interpreter.

Everything a probe compares against is prepared once for all modules: the loader as the
target's interpreter sees it (probed with that interpreter, in the children's working
directory), the stack analysis behind the static prediction, and the static checks, which
run only if a probe needs them to explain a failed import or foreign bytes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from libdoctor.analysis.run import run_checks
from libdoctor.checks.stack import analyse_stack, check_stack
from libdoctor.disk.stat import Disk, RealDisk
from libdoctor.environment.model import Environment, build_environment
from libdoctor.environment.target import Target
from libdoctor.errors import LibdoctorError
from libdoctor.findings import Finding
from libdoctor.loader.extensions import LoaderContext, analyse
from libdoctor.loader.system import probe_loader_system
from libdoctor.probe.analyse import (
    ModuleProbe,
    StaticFindings,
    analyse_probe,
    default_modules,
    facts_for,
)
from libdoctor.probe.child import ChildReport, run_child
from libdoctor.probe.predict import StaticPredictor, pinned_by

# The stack checks' codes: a static run reporting none of them gets the stack checks added.
_STACK_CODES = ("cuda-mixed-major", "pin-mismatch", "foreign-bytes", "model-unknown")

Starting = Callable[[Sequence[str], str], None]
"""Told (modules, python) before the first child starts: the caller warns that code runs."""
Finished = Callable[[ChildReport], None]
"""Told each child's report as soon as it exits, before the (slower) analysis of it."""


@dataclass(frozen=True, slots=True)
class ProbeRun:
    """Every module's probe, in the order asked; ENV is the model their files were joined to."""

    python: str
    probes: tuple[ModuleProbe, ...]
    env: Environment = field(compare=False, repr=False)

    @property
    def findings(self) -> list[Finding]:
        """Each module's findings, a finding several modules share (a library both load)
        only once."""
        seen: set[tuple[str, tuple[str, ...], str]] = set()
        unique = []
        for finding in (f for p in self.probes for f in p.findings):
            key = (finding.code, finding.paths, finding.message)
            if key not in seen:
                seen.add(key)
                unique.append(finding)
        return unique


def run_probe(
    target: Target,
    modules: Sequence[str],
    *,
    timeout: float,
    deep: bool,
    environ: Mapping[str, str],
    starting: Starting | None = None,
    finished: Finished | None = None,
) -> ProbeRun:
    """Import each of MODULES (default: the environment's frameworks) in TARGET's interpreter.

    The children run in a scratch working directory, removed afterwards, so a module that
    writes files or finds libraries relative to the cwd sees nothing of the caller's.
    """
    python = target.python
    if python is None:
        raise LibdoctorError(f"no Python interpreter found in {target.prefix}; use --python")
    env = build_environment(target)
    disk = RealDisk()
    chosen = list(modules) or default_modules(env)
    if not chosen:
        raise LibdoctorError(
            "no framework found in the environment; name the modules to import: "
            "libdoctor probe MODULE [MODULE ...] [TARGET]"
        )
    if starting is not None:
        starting(chosen, python)
    workdir = tempfile.mkdtemp(prefix="libdoctor-probe-")
    try:
        probes = _probe_each(
            env,
            disk,
            python,
            chosen,
            workdir=workdir,
            timeout=timeout,
            deep=deep,
            environ=child_environ(target, environ),
            finished=finished,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return ProbeRun(python, tuple(probes), env)


def child_environ(target: Target, environ: Mapping[str, str]) -> dict[str, str]:
    """The children's environment: ENVIRON, and for a ``pip install --target`` folder that
    folder first on PYTHONPATH, as pip says to use one (the interpreter named by --python
    does not look there by itself; without it every import fails)."""
    env = dict(environ)
    if target.target_dir is not None:
        rest = env.get("PYTHONPATH")
        env["PYTHONPATH"] = target.target_dir + (os.pathsep + rest if rest else "")
    return env


def _probe_each(
    env: Environment,
    disk: Disk,
    python: str,
    modules: Sequence[str],
    *,
    workdir: str,
    timeout: float,
    deep: bool,
    environ: dict[str, str],
    finished: Finished | None,
) -> list[ModuleProbe]:
    """One child per module; what they are compared against is built once, for all."""
    context = LoaderContext(
        probe_loader_system(interpreter=python), environ.get("LD_LIBRARY_PATH") or None, workdir
    )
    stack = analyse_stack(env, disk)
    predictor = StaticPredictor(env, disk, context, python, stack)
    pinned = pinned_by(stack)
    static = _static_findings(env, disk, context)
    probes = []
    for module in modules:
        child = run_child(
            python, module, timeout=timeout, facts=facts_for(module), environ=environ, cwd=workdir
        )
        if finished is not None:
            finished(child)
        probes.append(
            analyse_probe(
                env,
                disk,
                child,
                python=python,
                deep=deep,
                environ=environ,
                static=static,
                predictor=predictor,
                pinned=pinned,
            )
        )
    return probes


def _static_findings(env: Environment, disk: Disk, context: LoaderContext) -> StaticFindings:
    """Every static check's findings, computed on the first call only: they cost a full
    check, and only a probe with something to explain (a failed import, foreign bytes)
    asks for them. The stack checks are added, on their own loader analysis, when the run
    reported none of their codes; a finding already reported is not repeated.
    """
    cached: list[Finding] = []

    def static() -> list[Finding]:
        if not cached:
            found = list(run_checks(env, disk, None, context))
            seen = {(f.code, f.message) for f in found}
            if not any(f.code in _STACK_CODES for f in found):
                more = check_stack(env, disk, None, analyse(env, disk, context))
                found += [f for f in more if (f.code, f.message) not in seen]
            cached.extend(found)
        return cached

    return static
