"""The installer commands that repair a distribution, in the environment's own installer."""

from __future__ import annotations

import shlex
from pathlib import Path

from libdoctor.environment.distributions import Distribution
from libdoctor.environment.target import Target, find_python
from libdoctor.findings import Fix


def python_for(dist: Distribution, target: Target) -> str | None:
    """The interpreter whose installer manages ``dist`` (the base one for inherited sites)."""
    if dist.site.inherited:
        return find_python(Path(dist.site.prefix), target.python_version)
    return target.python


def requirement(dist: Distribution) -> str:
    return f"{dist.name}=={dist.version}"


def _installer(dist: Distribution) -> str:
    return (dist.installer or "pip").strip().lower()


def reinstall_argv(dist: Distribution, target: Target) -> tuple[str, ...]:
    python = python_for(dist, target) or "python"
    installer = _installer(dist)
    if installer == "uv":
        return (
            "uv",
            "pip",
            "install",
            "--reinstall",
            "--no-deps",
            "--python",
            python,
            requirement(dist),
        )
    if installer == "conda":
        return (
            "conda",
            "install",
            "--yes",
            "--prefix",
            dist.site.prefix,
            "--force-reinstall",
            "--no-deps",
            f"{dist.name}={dist.version}",
        )
    # pip refuses to uninstall (so to --force-reinstall) a distribution without RECORD;
    # --ignore-installed writes the files and a new RECORD over it instead.
    how = (
        "--ignore-installed"
        if dist.record is None and dist.kind == "dist-info"
        else ("--force-reinstall")
    )
    return (python, "-m", "pip", "install", how, "--no-deps", requirement(dist))


def uninstall_argv(dist: Distribution, target: Target) -> tuple[str, ...]:
    python = python_for(dist, target) or "python"
    installer = _installer(dist)
    if installer == "uv":
        return ("uv", "pip", "uninstall", "--python", python, dist.name)
    if installer == "conda":
        return ("conda", "remove", "--yes", "--prefix", dist.site.prefix, "--force", dist.name)
    return (python, "-m", "pip", "uninstall", "--yes", dist.name)


def steps_fix(*steps: tuple[str, ...], note: str = "") -> Fix:
    """One or more commands to run in order; a multi-step fix runs as one ``sh -c``."""
    if len(steps) == 1:
        return Fix(steps[0], note=note, steps=steps)
    script = " && ".join(shlex.join(step) for step in steps)
    return Fix(("sh", "-c", script), note=note, steps=steps)


def reinstall_fix(dist: Distribution, target: Target, note: str = "") -> Fix:
    if python_for(dist, target) is None and _installer(dist) not in ("uv", "conda"):
        note = (note + " " if note else "") + "(no interpreter found in the target: use its python)"
    return steps_fix(reinstall_argv(dist, target), note=note)
