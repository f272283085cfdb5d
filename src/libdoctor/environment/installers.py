"""How libdoctor calls an environment's own installer (pip, uv, conda): the one place that
knows their arguments (reinstall, uninstall, index options, ``--python``), the environment
they run in and how their exit codes and output come back.

Every argv names the target's own interpreter (or ``--python`` it, for uv), never a
``python`` from PATH when the target has one.
"""

from __future__ import annotations

import glob
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from libdoctor.environment.distributions import Distribution
from libdoctor.environment.target import Target, find_python
from libdoctor.errors import LibdoctorError
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


RUNNABLE = frozenset({"pip", "uv"})
"""The installers libdoctor runs itself; others (conda, a distro) are only named in a fix."""

_TAIL_LINES = 30

Notify = Callable[[str], None]
"""Where a long installer run reports its progress, one line at a time (stderr in the CLI)."""


@dataclass(frozen=True, slots=True)
class InstallerOptions:
    """Index options passed through to every install step (pip and uv spell them alike)."""

    find_links: tuple[str, ...] = ()
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    no_index: bool = False

    def args(self) -> tuple[str, ...]:
        out: list[str] = []
        for location in self.find_links:
            out += ["--find-links", location]
        if self.index_url:
            out += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            out += ["--extra-index-url", url]
        if self.no_index:
            out.append("--no-index")
        return tuple(out)


def target_python(target: Target) -> str:
    """The interpreter whose pip answers for TARGET; a one-line error when it has none."""
    if target.python is None:
        raise LibdoctorError(f"no interpreter found in {target.prefix}: cannot ask its pip")
    return target.python


def installer_env(environ: Mapping[str, str], tmpdir: str | None = None) -> dict[str, str]:
    """ENVIRON for an installer run: no prompt can hang a non-interactive run, the
    installer's own imports write no bytecode into the target, scratch files go to TMPDIR."""
    env = dict(environ)
    env.update({"PIP_NO_INPUT": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    if tmpdir is not None:
        env["TMPDIR"] = tmpdir
    return env


def run_installer(argv: Sequence[str], env: Mapping[str, str], echo: bool) -> tuple[int, str]:
    import subprocess  # here, not at the top: check imports this module, never runs it

    try:
        if echo:
            done = subprocess.run(
                list(argv), env=dict(env), stdin=subprocess.DEVNULL, stdout=2, check=False
            )
            return done.returncode, ""
        done = subprocess.run(
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            check=False,
        )
    except OSError as exc:
        return 127, f"cannot run {argv[0]}: {exc.strerror or exc}"
    text = done.stdout.decode("utf-8", "replace")
    return done.returncode, "\n".join(text.splitlines()[-_TAIL_LINES:])


def pip_command(target: Target) -> tuple[str, ...]:
    """How to run pip for TARGET: its own pip, else this interpreter's pip aimed at it with
    ``--python`` (pip >= 22.3; a uv-made env has no pip of its own). A one-line error when
    neither exists, never a pip from PATH."""
    python = target_python(target)
    if any(
        glob.glob(os.path.join(glob.escape(site), "pip-*.dist-info"))
        for site in target.site_packages
    ):
        return (python, "-m", "pip")
    import importlib.util
    import sys

    if importlib.util.find_spec("pip") is not None:
        return (sys.executable, "-m", "pip", "--python", python)
    raise LibdoctorError(
        f"no pip in {target.prefix} nor beside libdoctor: install pip into either to resolve "
        "requirements"
    )
