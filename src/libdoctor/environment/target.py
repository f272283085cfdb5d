"""Which environment to inspect, found without executing any of its code.

From a directory we read the layout (pyvenv.cfg, lib/pythonX.Y/site-packages, lib64,
conda-meta). With ``--python`` we run that interpreter as ``-I -S`` (no site hooks, no
``.pth`` files) to read sysconfig: stdlib only, never the environment's packages.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from libdoctor.errors import TargetError

_PYDIR = re.compile(r"^python(\d+)\.(\d+)t?$")
_SITE_NAMES = ("site-packages", "dist-packages")


@dataclass(frozen=True, slots=True)
class SiteDir:
    """One directory on the environment's import path that holds distributions."""

    path: str
    prefix: str  # the install prefix this site dir belongs to; RECORD paths must stay inside
    inherited: bool = (
        False  # True for the base interpreter's site-packages (include-system-site-packages)
    )


@dataclass(frozen=True, slots=True)
class Target:
    prefix: str
    python: str | None  # the interpreter of the environment, if one was found
    site_dirs: tuple[SiteDir, ...]
    chosen_by: str  # why this target: "argument", "--python", "$VIRTUAL_ENV", ...
    python_version: tuple[int, int] | None = None

    @property
    def site_packages(self) -> tuple[str, ...]:
        return tuple(site.path for site in self.site_dirs)

    @property
    def is_venv(self) -> bool:
        """A venv: pip refuses to delete RECORD paths outside it (elsewhere it deletes them)."""
        return os.path.isfile(os.path.join(self.prefix, "pyvenv.cfg"))


def read_pyvenv_cfg(prefix: Path) -> dict[str, str] | None:
    try:
        text = (prefix / "pyvenv.cfg").read_text("utf-8", "surrogateescape")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise TargetError(f"cannot read {prefix / 'pyvenv.cfg'}: {exc.strerror}") from None
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    return values


def _version_from_cfg(cfg: Mapping[str, str]) -> tuple[int, int] | None:
    for key in ("version_info", "version"):
        match = re.match(r"^(\d+)\.(\d+)", cfg.get(key, ""))
        if match:
            return int(match[1]), int(match[2])
    return None


def _layout_site_dirs(
    prefix: Path, version: tuple[int, int] | None
) -> tuple[list[Path], tuple[int, int] | None]:
    """site-packages dirs of a POSIX or Windows prefix, deduplicated by real path."""
    found: list[tuple[tuple[int, int] | None, Path]] = []
    for libname in ("lib", "lib64"):
        libdir = prefix / libname
        try:
            children = sorted(os.listdir(libdir))
        except OSError:
            continue
        for child in children:
            match = _PYDIR.match(child)
            if match:
                for site_name in _SITE_NAMES:
                    candidate = libdir / child / site_name
                    if candidate.is_dir():
                        found.append(((int(match[1]), int(match[2])), candidate))
        if (libdir / "python3" / "dist-packages").is_dir():
            found.append((None, libdir / "python3" / "dist-packages"))
    windows = prefix / "Lib" / "site-packages"
    if windows.is_dir():
        found.append((None, windows))
    versions = {v for v, _ in found if v is not None}
    if version is None and len(versions) == 1:
        version = versions.pop()
    chosen: list[Path] = []
    seen: set[str] = set()
    for v, path in found:
        if version is not None and v is not None and v != version:
            continue
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            chosen.append(path)
    return chosen, version


def find_python(prefix: Path, version: tuple[int, int] | None) -> str | None:
    names = ["python", "python3"]
    if version:
        names.append(f"python{version[0]}.{version[1]}")
    for bindir in ("bin", "Scripts", ""):
        for name in names:
            for suffix in ("", ".exe"):
                candidate = prefix / bindir / (name + suffix)
                if os.path.lexists(candidate):
                    return str(candidate)
    return None


def _base_prefix(cfg: Mapping[str, str]) -> Path | None:
    home = cfg.get("home")
    if not home:
        return None
    home_path = Path(home)
    return home_path.parent if home_path.name in ("bin", "Scripts") else home_path


def prefix_of_site_dir(site: Path) -> Path:
    """The install prefix a site dir belongs to (…/lib/pythonX.Y/site-packages → …)."""
    parts = site.parts
    if len(parts) >= 3 and parts[-1] in _SITE_NAMES:
        if (_PYDIR.match(parts[-2]) or parts[-2] == "python3") and parts[-3] in ("lib", "lib64"):
            return Path(*parts[:-3])
        if parts[-2] == "Lib":
            return Path(*parts[:-2])
    return site


def from_directory(path: Path, chosen_by: str) -> Target:
    if not path.exists():
        raise TargetError(f"target {path} does not exist")
    if not path.is_dir():
        raise TargetError(f"target {path} is not a directory")
    prefix = path.absolute()
    cfg = read_pyvenv_cfg(prefix)
    version = _version_from_cfg(cfg) if cfg else None
    site_paths, version = _layout_site_dirs(prefix, version)
    if not site_paths:
        if _looks_like_site_dir(prefix):
            return _from_site_dir(prefix, chosen_by)
        raise TargetError(f"no Python environment found at {path} (no site-packages directory)")
    sites = [SiteDir(str(p), str(prefix)) for p in site_paths]
    if cfg and cfg.get("include-system-site-packages", "false").lower() == "true":
        base = _base_prefix(cfg)
        if base is not None and base != prefix:
            base_sites, _ = _layout_site_dirs(base, version)
            sites.extend(SiteDir(str(p), str(base), inherited=True) for p in base_sites)
    return Target(
        prefix=str(prefix),
        python=find_python(prefix, version),
        site_dirs=tuple(sites),
        chosen_by=chosen_by,
        python_version=version,
    )


def _looks_like_site_dir(path: Path) -> bool:
    if path.name in _SITE_NAMES:
        return True
    try:
        with os.scandir(path) as entries:
            return any(e.name.endswith((".dist-info", ".egg-info")) for e in entries)
    except OSError:
        return False


def _from_site_dir(site: Path, chosen_by: str) -> Target:
    prefix = prefix_of_site_dir(site)
    match = _PYDIR.match(site.parent.name)
    version = (int(match[1]), int(match[2])) if match else None
    python = find_python(prefix, version) if prefix != site else None
    return Target(
        prefix=str(prefix),
        python=python,
        site_dirs=(SiteDir(str(site), str(prefix)),),
        chosen_by=chosen_by,
        python_version=version,
    )


# Run in the target interpreter with -I -S: stdlib only, no site hooks, no .pth files.
# Under -S a venv is not detected (site.venv() does that, and also runs .pth files), so
# find pyvenv.cfg the way site.venv() does and ask sysconfig for that prefix's paths.
_PROBE = """
import json, os, site, sys, sysconfig
exe_dir = os.path.dirname(os.path.abspath(sys.executable))
prefix = sys.prefix
for where in (exe_dir, os.path.dirname(exe_dir)):
    if os.path.isfile(os.path.join(where, "pyvenv.cfg")):
        prefix = os.path.dirname(exe_dir)
        break
paths = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})
try:
    sites = site.getsitepackages([prefix])
except Exception:
    sites = []
print(json.dumps({
    "prefix": prefix, "base_prefix": sys.base_prefix, "executable": sys.executable,
    "version": list(sys.version_info[:2]),
    "purelib": paths.get("purelib"), "platlib": paths.get("platlib"), "sites": sites,
}))
"""


def from_python(python: str, chosen_by: str = "--python") -> Target:
    import json
    import subprocess

    if not os.path.exists(python):
        raise TargetError(f"interpreter {python} does not exist")
    try:
        proc = subprocess.run(
            [python, "-I", "-S", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": os.environ.get("PATH", "")},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"cannot run interpreter {python}: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise TargetError(f"interpreter {python} failed (exit {proc.returncode}): {last}")
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise TargetError(f"interpreter {python} printed something unexpected") from None
    prefix = Path(info["prefix"])
    ordered = [info["purelib"], info["platlib"], *info["sites"]]
    sites: list[SiteDir] = []
    seen: set[str] = set()
    for raw in ordered:
        if not raw or not os.path.isdir(raw):
            continue
        real = os.path.realpath(raw)
        if real in seen:
            continue
        seen.add(real)
        sites.append(SiteDir(raw, str(prefix)))
    cfg = read_pyvenv_cfg(prefix)
    if cfg and cfg.get("include-system-site-packages", "false").lower() == "true":
        base = Path(info["base_prefix"])
        base_sites, _ = _layout_site_dirs(base, tuple(info["version"]))
        for p in base_sites:
            if os.path.realpath(p) not in seen:
                sites.append(SiteDir(str(p), str(base), inherited=True))
    if not sites:
        raise TargetError(f"interpreter {python} has no site-packages directory")
    return Target(
        prefix=str(prefix),
        python=python,
        site_dirs=tuple(sites),
        chosen_by=chosen_by,
        python_version=(info["version"][0], info["version"][1]),
    )


def discover(target: str | None, python: str | None, environ: Mapping[str, str]) -> Target:
    """Pick the environment to inspect: argument, --python, $VIRTUAL_ENV, $CONDA_PREFIX, self."""
    if target is not None and python is not None:
        raise TargetError("give either TARGET or --python, not both")
    if target is not None:
        return from_directory(Path(target), "argument")
    if python is not None:
        return from_python(python)
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        value = environ.get(variable)
        if value:
            return from_directory(Path(value), f"${variable}")
    return from_directory(Path(sys.prefix), "the interpreter running libdoctor")
