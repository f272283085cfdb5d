"""How libdoctor calls an environment's own installer (pip, uv, conda): who installs a
distribution (``Via``: the installer, its executable, the interpreter, the ``--target``
folder), resolved once when a remedy is made; the environment the installer runs in; and
how its exit codes and output come back. The command lines are ``libdoctor.remedy``'s.

A remedy names the target's own interpreter as its real binary, never a ``python`` from
PATH: without one it has none, printed as a placeholder (``<python3.11>``) that
``unrunnable`` refuses to run. A ``pip install --target`` folder is installed into with
``--target``; pip cannot uninstall from one. The installers run with the variables that would
send them elsewhere (``PIP_TARGET``, ``PIP_PREFIX``, ``PIP_USER``, ``PYTHONPATH``, ...) removed.
"""

from __future__ import annotations

import fnmatch
import glob
import importlib.util
import os
import shutil
import sys
import sysconfig
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Environment
from libdoctor.environment.paths import is_bytecode
from libdoctor.environment.target import Target, find_python
from libdoctor.errors import LibdoctorError
from libdoctor.findings import Fix
from libdoctor.remedy import (
    Install,
    Pin,
    Reinstall,
    Remedy,
    Uninstall,
    Via,
    placeholder,
)


def python_for(dist: Distribution, target: Target) -> str | None:
    """The interpreter whose installer manages ``dist`` (the base one for inherited sites),
    as its real binary; None when there is none (a remedy then prints a placeholder)."""
    if dist.site.inherited:
        return find_python(Path(dist.site.prefix), target.python_version) or None
    return target.python or None


CONDA_TOOLS = ("conda", "mamba", "micromamba")


def conda_exe(prefix: str) -> str:
    """The conda that manages PREFIX: its own ``bin/`` (the base env), the base env above
    ``envs/NAME``, then ``$PATH``; ``conda`` when none is found (the fix is then a name)."""
    parent = os.path.dirname(os.path.normpath(prefix))
    bases = [prefix] + ([os.path.dirname(parent)] if os.path.basename(parent) == "envs" else [])
    for base in bases:
        for tool in CONDA_TOOLS:
            candidate = os.path.join(base, "bin", tool)
            if os.access(candidate, os.X_OK):
                return candidate
    for tool in CONDA_TOOLS:
        found = shutil.which(tool)
        if found:
            return found
    return "conda"


def _installer(dist: Distribution) -> str:
    return (dist.installer or "pip").strip().lower()


def _folder(dist: Distribution, target: Target) -> str | None:
    """The ``pip install --target`` folder DIST lives in, if that is what TARGET is."""
    return target.target_dir if target.target_dir and not dist.site.inherited else None


# pip writes a --target install's RECORD relative to its scratch dir's lib/python: scripts
# and data files read ../../bin/tool, which it moves to <folder>/bin/tool.
_SCRATCH_UP = "../../"


def _pip_made(dist: Distribution) -> bool:
    return _installer(dist) == "pip"


def placed_in_folder(dist: Distribution, folder: str) -> list[str]:
    """Where DIST's RECORD rows are in a ``pip install --target`` FOLDER (uv writes them
    relative to the folder; rows that land elsewhere are left out)."""
    out: list[str] = []
    for entry in dist.record.entries if dist.record else ():
        rel = os.path.normpath(entry.path.replace("\\", "/"))
        if os.path.isabs(rel):
            continue
        if _pip_made(dist) and rel.startswith(_SCRATCH_UP):
            rel = rel[len(_SCRATCH_UP) :]
            if rel.split("/", 1)[0] == "lib":  # pip moves no data entry named lib
                continue
        if rel == ".." or rel.startswith("../"):
            continue
        out.append(os.path.join(folder, rel))
    return out


def folder_entries(dist: Distribution, folder: str) -> set[str]:
    """The top-level entries of FOLDER that ``pip install --target --upgrade`` of DIST
    replaces whole (``shutil.rmtree``), whoever owns the files in them."""
    return _entries(placed_in_folder(dist, folder), folder)


def _entries(paths: Sequence[str], folder: str) -> set[str]:
    return {os.path.relpath(p, folder).split(os.sep, 1)[0] for p in paths}


@dataclass(frozen=True, slots=True)
class FolderCompanions:
    """What one ``pip install --target FOLDER --upgrade`` of some distributions takes along
    (``along``), and where each distribution it looked at has its files in FOLDER
    (``placed``) and under which top-level entries (``entries``), by metadata directory."""

    along: tuple[Distribution, ...]
    placed: Mapping[str, tuple[str, ...]]
    entries: Mapping[str, frozenset[str]]


def folder_companions(
    dists: Sequence[Distribution], installed: Sequence[Distribution], folder: str
) -> FolderCompanions:
    """The other distributions one ``pip install --target FOLDER --upgrade`` of DISTS must
    reinstall too: every one with files under an entry it replaces, and theirs in turn."""
    local = [d for d in installed if not d.site.inherited]
    placed = {d.metadata_dir: tuple(placed_in_folder(d, folder)) for d in (*local, *dists)}
    entries_by = {k: frozenset(_entries(paths, folder)) for k, paths in placed.items()}
    own = {d.metadata_dir for d in local}
    chosen = {d.metadata_dir for d in dists}
    entries = set().union(*(entries_by[d.metadata_dir] for d in dists if d.metadata_dir in own))
    along: list[Distribution] = []
    grew = True
    while grew:
        grew = False
        for dist in local:
            if dist.metadata_dir not in chosen and entries_by[dist.metadata_dir] & entries:
                chosen.add(dist.metadata_dir)
                along.append(dist)
                entries |= entries_by[dist.metadata_dir]
                grew = True
    return FolderCompanions(tuple(along), placed, entries_by)


def via_for(dist: Distribution, target: Target) -> Via:
    """Who reinstalls or uninstalls DIST: its installer (conda's binary found here), the
    interpreter that manages it, the ``--target`` folder it lives in."""
    installer = _installer(dist)
    if installer == "conda":
        prefix = dist.site.prefix
        return Via("conda", prefix=prefix, exe=conda_exe(prefix), recorded=installer)
    return Via(
        "uv" if installer == "uv" else "pip",
        python_for(dist, target),
        target.python_version,
        _folder(dist, target),
        recorded=installer,
    )


def reinstall(dist: Distribution, target: Target) -> Reinstall:
    """The reinstall of DIST at its installed version, no dependencies."""
    via = via_for(dist, target)
    spec = (dist.conda_spec or "") if via.installer == "conda" else ""
    # pip refuses to uninstall (so to --force-reinstall) a distribution without RECORD;
    # --ignore-installed writes the files and a new RECORD over it instead.
    over = via.installer == "pip" and via.folder is None
    over = over and dist.record is None and dist.kind == "dist-info"
    return Reinstall((Pin(dist.name, dist.version, spec),), via, ignore_installed=over)


def uninstall(dist: Distribution, target: Target) -> Uninstall:
    via = via_for(dist, target)
    if via.installer == "conda" and dist.conda_spec:
        return Uninstall(dist.conda_spec.split("=")[0], via)
    return Uninstall(dist.name, via)


@dataclass(frozen=True, slots=True)
class Removal:
    """The uninstall of some distributions, then the reinstall of every other distribution
    it damages (``damaged``, external ones included; those are not reinstalled)."""

    remedies: tuple[Remedy, ...]
    damaged: tuple[Distribution, ...]


def removal(removed: Sequence[Distribution], env: Environment) -> Removal:
    """Uninstall REMOVED and reinstall what that damages: pip deletes every path of a
    RECORD (bytecode aside, rewritten on import), also those another distribution claims,
    and the ownership index says whose they are."""
    gone = {d.metadata_dir for d in removed}
    deleted = {c.path for d in removed for c in env.claims_of(d) if not is_bytecode(c.path)}
    damaged: dict[str, Distribution] = {}
    for path in sorted(deleted):
        for claim in env.claims.get(path, ()):
            if claim.dist.metadata_dir not in gone:
                damaged.setdefault(claim.dist.metadata_dir, claim.dist)
    remedies: list[Remedy] = [uninstall(d, env.target) for d in removed]
    remedies += [reinstall(d, env.target) for d in damaged.values() if not d.external]
    return Removal(tuple(remedies), tuple(damaged.values()))


def install(
    target: Target,
    requirement: str,
    installer: str = "pip",
    *,
    reinstall: bool = False,
    editable: bool = False,
) -> Install:
    """Install REQUIREMENT (``name==1.0``, a URL, a directory with EDITABLE) into TARGET
    with its INSTALLER, no dependencies; REINSTALL replaces an installed copy of the same
    version."""
    via = Via(
        "uv" if installer == "uv" else "pip",
        target.python or None,
        target.python_version,
        target.target_dir or None,
        recorded=installer,
    )
    return Install((requirement,), via, reinstall=reinstall, deps=False, editable=editable)


def install_like(
    requirement: str, like: Distribution, target: Target, *, deps: bool = True
) -> Install:
    """Install REQUIREMENT with the installer and interpreter that manage LIKE (no
    ``--target``); without its own requirements when DEPS is false."""
    installer = _installer(like)
    via = Via(
        "uv" if installer == "uv" else "pip",
        python_for(like, target),
        target.python_version,
        recorded=installer,
    )
    return Install((requirement,), via, deps=deps)


def reinstall_fix(
    dist: Distribution, target: Target, note: str = "", installed: Sequence[Distribution] = ()
) -> Fix:
    """The reinstall that repairs DIST. In a ``pip install --target`` folder it also reinstalls
    the INSTALLED distributions whose files pip would delete with DIST's (see
    ``folder_companions``), so that the command is safe on its own."""
    notes = [note] if note else []
    folder = _folder(dist, target)
    along: list[Distribution] = []
    if folder and _pip_made(dist):
        along = [d for d in folder_companions([dist], installed, folder).along if not d.external]
    if along:
        names = ", ".join(d.display for d in along)
        notes.append(
            f"{names} {'is' if len(along) == 1 else 'are'} reinstalled too: pip --target "
            f"--upgrade replaces the top-level directories {dist.name} shares with "
            f"{'it' if len(along) == 1 else 'them'} whole"
        )
    remedies = tuple(reinstall(d, target) for d in (dist, *along))
    if remedies[0].via.python is None and remedies[0].via.installer != "conda":
        notes.append(no_python_note(target))
    return Fix(remedies, note="; ".join(notes))


def no_python_note(target: Target) -> str:
    """What to put where the placeholder interpreter stands."""
    stand_in = placeholder(target.python_version)
    if target.target_dir:
        built = f" ({target.built_for})" if target.built_for else ""
        return (
            f"a `pip install --target` folder has no interpreter of its own: put the one that "
            f"uses it{built} in place of {stand_in}, or give it to libdoctor fix with --python"
        )
    return f"no interpreter found in the target: put its python in place of {stand_in}"


def unrunnable(remedy: Remedy, target: Target) -> str | None:
    """Why libdoctor must not run REMEDY itself: pip cannot uninstall from a --target folder,
    or its interpreter is none, or not an existing absolute path. PATH never picks the
    interpreter an installer runs with."""
    if isinstance(remedy, Uninstall) and remedy.impossible:
        return (
            f"{target.prefix} is a folder made with `pip install --target`: pip cannot "
            f"uninstall {remedy.name} from it (it only uninstalls from its own environment)"
        )
    if not isinstance(remedy, (Reinstall, Install, Uninstall)):
        return None
    via = remedy.via
    if via.installer == "conda":
        return None  # named, never run: the step check refuses it
    if not via.python:
        return no_python_reason(target)
    if not os.path.isabs(via.python) or not os.access(via.python, os.X_OK):
        return (
            f"{via.python} is not an interpreter libdoctor can run (an absolute, executable path)"
        )
    return None


def no_python_reason(target: Target) -> str:
    if target.target_dir:
        built = f" ({target.built_for})" if target.built_for else ""
        return (
            f"{target.target_dir} is a folder made with `pip install --target`: it has no "
            f"interpreter of its own and libdoctor never takes one from PATH; name the Python "
            f"that uses it{built} with --python PATH"
        )
    return (
        f"no interpreter found in {target.prefix}: libdoctor runs an installer only with the "
        "environment's own interpreter, never one from PATH"
    )


def find_uv(environ: Mapping[str, str]) -> str:
    """The uv binary a step runs, found where users have it: on PATH, else ``$UV`` (uv sets
    it for what it runs), beside the interpreter running libdoctor (a venv or pipx/uvx
    install of libdoctor with uv beside it), where the ``uv`` package importable here keeps
    its binary, ``$XDG_BIN_HOME``/``~/.local/bin`` (uv's installer), ``$CARGO_HOME``/
    ``~/.cargo/bin`` (cargo, older installers). Raises LibdoctorError naming where it looked.
    """
    looked: list[str] = []
    for where, path in _uv_places(environ):
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        looked.append(where)
    raise LibdoctorError(f"uv was not found (looked at: {', '.join(dict.fromkeys(looked))})")


def _uv_places(environ: Mapping[str, str]) -> Iterator[tuple[str, str | None]]:
    """(where, as said in the error; the path there) in the order find_uv tries them."""
    yield "PATH", shutil.which("uv", path=environ.get("PATH", os.defpath))
    uv = environ.get("UV")
    yield (f"$UV={uv}" if uv else "$UV (unset)"), uv
    if sys.executable:
        beside = os.path.join(os.path.dirname(sys.executable), "uv")
        yield beside, beside
    dirs = _uv_package_dirs()
    if dirs is None:
        yield "the uv package (none importable)", None
    home = environ.get("HOME") or os.path.expanduser("~")
    cargo = environ.get("CARGO_HOME")
    folders = (
        *(dirs or ()),
        environ.get("XDG_BIN_HOME"),
        os.path.join(home, ".local", "bin"),
        os.path.join(cargo, "bin") if cargo else None,
        os.path.join(home, ".cargo", "bin"),
    )
    for folder in folders:
        if folder:
            yield os.path.join(folder, "uv"), os.path.join(folder, "uv")


def _uv_package_dirs() -> list[str] | None:
    """Where the ``uv`` package importable in libdoctor's interpreter keeps its binary: the
    places its ``find_uv_bin()`` tries (uv 0.13 ``_find_uv.py``), worked out from where the
    package is, without importing it. None when no ``uv`` package is importable."""
    try:
        spec = importlib.util.find_spec("uv")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    package = os.path.normpath(next(iter(spec.submodule_search_locations)))
    if not os.path.isfile(os.path.join(package, "_find_uv.py")):
        return None  # some other folder named uv (one in the working directory, say)
    site, lib_python = os.path.dirname(package), os.path.dirname(os.path.dirname(package))
    dirs = [
        sysconfig.get_path("scripts"),  # this interpreter's scripts directory
        sysconfig.get_path("scripts", vars={"base": sys.base_prefix}),
        # <prefix>/lib/pythonX.Y/site-packages/uv (pip install --prefix, uv run --with)
        (
            os.path.join(os.path.dirname(os.path.dirname(lib_python)), "bin")
            if os.path.basename(site) == "site-packages"
            and fnmatch.fnmatch(os.path.basename(lib_python), "python*")
            and os.path.basename(os.path.dirname(lib_python)) == "lib"
            else ""
        ),
        os.path.join(site, "bin"),  # <target>/uv beside <target>/bin (pip install --target)
        sysconfig.get_path("scripts", scheme=sysconfig.get_preferred_scheme("user")),
    ]
    return [d for d in dict.fromkeys(dirs) if d]


def runnable_argv(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    """ARGV as libdoctor runs it: a leading ``uv`` is the binary ``find_uv`` finds. One on
    PATH stays ``uv``: the child finds the same, and the journal reads as the user would."""
    if not argv or argv[0] != "uv":
        return tuple(argv)
    found = find_uv(environ)
    on_path = shutil.which("uv", path=environ.get("PATH", os.defpath))
    return tuple(argv) if found == on_path else (found, *argv[1:])


INSTALLER_DROPPINGS = (".lock",)
"""Files an installer leaves at the environment's root for itself (uv's lock of the
environment): no RECORD names them, and a rollback removes the one its run created."""

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
        raise LibdoctorError(no_python_reason(target))
    return target.python


# Variables that would make an installer act on another environment than the one its argv
# names, or run another pip than the interpreter's own.
_REDIRECTS = (
    "PIP_TARGET",
    "PIP_PREFIX",
    "PIP_ROOT",
    "PIP_USER",
    "PIP_PYTHON",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONUSERBASE",
    "PYTHONSTARTUP",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "UV_PYTHON",
    "UV_SYSTEM_PYTHON",
    "UV_TARGET",
    "UV_PREFIX",
    "UV_PROJECT_ENVIRONMENT",
)


def installer_env(environ: Mapping[str, str], tmpdir: str | None = None) -> dict[str, str]:
    """ENVIRON for an installer run: nothing in it redirects the install, no prompt can hang
    a non-interactive run, the installer's own imports write no bytecode into the target,
    scratch files go to TMPDIR."""
    env = {k: v for k, v in environ.items() if k not in _REDIRECTS}
    # LIBDOCTOR_GUARD: a `uv` found on PATH may be a guard wrapper; libdoctor's own runs
    # were planned already and must not be planned (or refused) again.
    env.update({"PIP_NO_INPUT": "1", "PYTHONDONTWRITEBYTECODE": "1", "LIBDOCTOR_GUARD": "off"})
    if tmpdir is not None:
        env["TMPDIR"] = tmpdir
    return env


def has_own_pip(target: Target) -> bool:
    return any(
        glob.glob(os.path.join(glob.escape(site), "pip-*.dist-info"))
        for site in target.site_packages
    )


def env_installer(target: Target, dists: Sequence[Distribution]) -> str:
    """The installer that made TARGET: uv when most of its distributions say so, or when it
    has no pip of its own (a uv-made venv); pip otherwise."""
    installers = [_installer(d) for d in dists if d.installer and not d.site.inherited]
    if installers and installers.count("uv") > len(installers) // 2:
        return "uv"
    return "pip" if has_own_pip(target) else "uv"


def request_install(target: Target, installer: str, items: Sequence[str]) -> Install:
    """``pip install ITEMS`` into TARGET by its own interpreter, or ``uv pip install --python``
    it; ITEMS are requirements, wheel files and ``-r``/``-c`` files, as the user gave them."""
    python = target_python(target)
    if target.target_dir:
        raise LibdoctorError(
            f"{target.target_dir} is a folder made with `pip install --target`: libdoctor "
            "install does not install into one yet"
        )
    name = "uv" if installer == "uv" else "pip"
    via = Via(name, python, target.python_version, recorded=installer)
    return Install(tuple(items), via)


def pip_command(target: Target) -> tuple[str, ...]:
    """How to run pip for TARGET: its own pip, else this interpreter's pip aimed at it with
    ``--python`` (pip >= 22.3; a uv-made env has no pip of its own). A one-line error when
    neither exists, never a pip from PATH."""
    python = target_python(target)
    if has_own_pip(target):
        return (python, "-m", "pip")
    import importlib.util
    import sys

    if importlib.util.find_spec("pip") is not None:
        return (sys.executable, "-m", "pip", "--python", python)
    raise LibdoctorError(
        f"no pip in {target.prefix} nor beside libdoctor: install pip into either to resolve "
        "requirements"
    )
