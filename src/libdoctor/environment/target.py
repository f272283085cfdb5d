"""Which environment to inspect, and which interpreter answers for it, found without
executing any of its code.

From a directory we read the layout (pyvenv.cfg, lib/pythonX.Y/site-packages, lib64,
conda-meta). With ``--python`` we run that interpreter as ``-I -S`` (no site hooks, no
``.pth`` files) to read sysconfig: stdlib only, never the environment's packages.

The interpreter is the real binary, never a shim: a venv's own ``bin/python`` stays as it is
(it is what makes pip install into the venv), anything else is followed through its symlinks
and through pyenv's shims (read from pyenv's layout, not run). A folder made with
``pip install --target`` has no interpreter of its own; ``--python`` names one, and it must
match the tags the folder's wheels were built for.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from libdoctor.environment.metadata import parse_wheel_tags
from libdoctor.environment.rooted import HOST, Rooted
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
    root: str = "/"  # the system its files are read in (``--root``): see ``Target.root``


@dataclass(frozen=True, slots=True)
class Target:
    prefix: str
    python: str | None  # the interpreter of the environment (its real binary), if known
    site_dirs: tuple[SiteDir, ...]
    chosen_by: str  # why this target: "argument", "--python", "$VIRTUAL_ENV", ...
    python_version: tuple[int, int] | None = None
    # A folder made with ``pip install --target``: no prefix, no interpreter of its own;
    # installs go into it with ``--target``. What its wheels were built for, in words.
    target_dir: str | None = None
    built_for: str = ""
    # The directory the system inside which this environment is read (a mounted image or
    # chroot, ``--root``): its loader configuration and packages are read there, nothing
    # of the host's, and none of its code runs. "/" for the running system.
    root: str = "/"
    # PEP 508's python_full_version ("3.11.2") when the layout states it (pyvenv.cfg's
    # version_info or version) or the interpreter reported it; None when only X.Y is known.
    python_full_version: str | None = None

    @property
    def site_packages(self) -> tuple[str, ...]:
        return tuple(site.path for site in self.site_dirs)

    @property
    def is_venv(self) -> bool:
        """A venv: pip refuses to delete RECORD paths outside it (elsewhere it deletes them)."""
        return Rooted(self.root).isfile(os.path.join(self.prefix, "pyvenv.cfg"))


def read_pyvenv_cfg(prefix: Path, files: Rooted = HOST) -> dict[str, str] | None:
    """pyvenv.cfg as CPython's ``site.venv()`` reads it: each line holding ``=`` is a key
    (stripped, lower-cased) and a value (stripped), the last of a key winning; lines end
    where a text file's do (LF, CR LF, CR), not at str.splitlines()' other separators."""
    try:
        text = files.read(prefix / "pyvenv.cfg").decode("utf-8", "surrogateescape")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise TargetError(f"cannot read {prefix / 'pyvenv.cfg'}: {exc.strerror}") from None
    values: dict[str, str] = {}
    for line in re.split(r"\r\n|\r|\n", text):
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    return values


def includes_system_site(cfg: Mapping[str, str]) -> bool:
    """Whether the venv sees its base interpreter's site-packages: site.venv()'s rule, which
    is yes unless ``include-system-site-packages`` says anything but ``true``."""
    return cfg.get("include-system-site-packages", "true").lower() == "true"


def _version_from_cfg(cfg: Mapping[str, str]) -> tuple[int, int] | None:
    for key in ("version_info", "version"):
        match = re.match(r"^(\d+)\.(\d+)", cfg.get(key, ""))
        if match:
            return int(match[1]), int(match[2])
    return None


def _full_version_from_cfg(cfg: Mapping[str, str], version: tuple[int, int] | None) -> str | None:
    """X.Y.Z from pyvenv.cfg (uv and virtualenv write version_info, venv writes version:
    "3.11.2", "3.12.0.final.0"), when it agrees with the layout's X.Y; else None."""
    for key in ("version_info", "version"):
        match = re.match(r"^(\d+)\.(\d+)\.(\d+)", cfg.get(key, ""))
        if match:
            if version is not None and (int(match[1]), int(match[2])) != version:
                return None
            return f"{match[1]}.{match[2]}.{match[3]}"
    return None


def _layout_site_dirs(
    prefix: Path, version: tuple[int, int] | None, files: Rooted = HOST
) -> tuple[list[Path], tuple[int, int] | None]:
    """site-packages dirs of a POSIX or Windows prefix, deduplicated by real path."""
    found: list[tuple[tuple[int, int] | None, Path]] = []
    for libname in ("lib", "lib64"):
        libdir = prefix / libname
        try:
            children = sorted(files.listdir(libdir))
        except OSError:
            continue
        for child in children:
            match = _PYDIR.match(child)
            if match:
                for site_name in _SITE_NAMES:
                    candidate = libdir / child / site_name
                    if files.isdir(candidate):
                        found.append(((int(match[1]), int(match[2])), candidate))
        if files.isdir(libdir / "python3" / "dist-packages"):
            found.append((None, libdir / "python3" / "dist-packages"))
    windows = prefix / "Lib" / "site-packages"
    if files.isdir(windows):
        found.append((None, windows))
    versions = {v for v, _ in found if v is not None}
    if version is None and len(versions) == 1:
        version = versions.pop()
    chosen: list[Path] = []
    seen: set[str] = set()
    for v, path in found:
        if version is not None and v is not None and v != version:
            continue
        real = files.realpath(path)
        if real not in seen:
            seen.add(real)
            chosen.append(path)
    return chosen, version


def find_python(prefix: Path, version: tuple[int, int] | None, files: Rooted = HOST) -> str | None:
    """PREFIX's own interpreter: a venv's ``bin/python`` as it is, anything else resolved to
    the real binary (``python`` may name another version outside a venv: ``pythonX.Y`` first).
    FILES: the system it is found in (inside a root, a name there: ``/usr/bin/python3.11``)."""
    names = ["python", "python3"]
    if version:
        exact = f"python{version[0]}.{version[1]}"
        names = [*names, exact] if files.isfile(prefix / "pyvenv.cfg") else [exact, *names]
    for bindir in ("bin", "Scripts", ""):
        for name in names:
            for suffix in ("", ".exe"):
                candidate = prefix / bindir / (name + suffix)
                if files.lexists(candidate):
                    return resolve_interpreter(str(candidate), files=files) or str(candidate)
    return None


# --------------------------------------------------------------------------- real interpreters

_MAX_HOPS = 40


def _venv_python(path: str, files: Rooted = HOST) -> bool:
    """PATH is a venv's interpreter: pyvenv.cfg beside it or one level up (CPython's rule)."""
    here = os.path.dirname(path)
    return any(files.isfile(os.path.join(d, "pyvenv.cfg")) for d in (here, os.path.dirname(here)))


def resolve_interpreter(
    path: str,
    environ: Mapping[str, str] | None = None,
    cwd: str | None = None,
    files: Rooted = HOST,
) -> str | None:
    """The real interpreter binary PATH stands for, read from the file system (nothing runs).

    A venv's own interpreter is kept as it is: pip run by it installs into the venv, while its
    symlink target would install into the base. Symlinks are followed one hop at a time (so a
    link to a venv's python stops there); a pyenv shim is read through pyenv's layout (not
    inside a root, FILES: pyenv there is not the caller's). None for a script libdoctor
    cannot see through, or a path that does not exist.
    """
    current = os.path.abspath(path)
    for _ in range(_MAX_HOPS):
        if _venv_python(current, files):
            return current
        if files.islink(current):
            current = os.path.normpath(
                os.path.join(os.path.dirname(current), files.readlink(current))
            )
            continue
        try:
            with files.open(current, "rb") as f:
                head = f.read(4096)
        except OSError:
            return None
        if not head.startswith(b"#!"):
            return current
        if not files.is_host:
            return None
        shim = _pyenv_shim_target(
            current,
            head.decode("utf-8", "replace"),
            os.environ if environ is None else environ,
            os.getcwd() if cwd is None else cwd,
        )
        if shim is None:
            return None
        current = shim
    return None


_PYENV_ROOT = re.compile(r"""^\s*export\s+PYENV_ROOT=["']?([^"'\n]+?)["']?\s*$""", re.M)


def _pyenv_shim_target(shim: str, text: str, environ: Mapping[str, str], cwd: str) -> str | None:
    """What a pyenv shim would exec: ``$PYENV_ROOT/versions/<version>/bin/<its name>``, the
    version chosen as pyenv chooses it ($PYENV_VERSION, a ``.python-version`` file in the
    working directory or above, ``$PYENV_ROOT/version``). None for "system" (pyenv would
    search PATH) or anything else that is not a pyenv shim."""
    if "pyenv" not in text or "exec" not in text:
        return None
    match = _PYENV_ROOT.search(text)
    root = match[1] if match else environ.get("PYENV_ROOT", "")
    if not root and os.path.basename(os.path.dirname(shim)) == "shims":
        root = os.path.dirname(os.path.dirname(shim))
    if not root:
        return None
    program = os.path.basename(shim)
    for version in _pyenv_versions(root, environ, cwd):
        if version == "system":
            return None
        found = _pyenv_version_dir(root, version)
        if found is not None and os.path.lexists(os.path.join(found, "bin", program)):
            return os.path.join(found, "bin", program)
    return None


def _pyenv_versions(root: str, environ: Mapping[str, str], cwd: str) -> list[str]:
    if environ.get("PYENV_VERSION"):
        return environ["PYENV_VERSION"].split(":")
    directory = cwd
    while True:
        candidate = os.path.join(directory, ".python-version")
        if os.path.isfile(candidate):
            return _version_file(candidate)
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return _version_file(os.path.join(root, "version"))


def _version_file(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            words = [w for line in f for w in line.split("#", 1)[0].split()]
    except OSError:
        return []
    return words


def _pyenv_version_dir(root: str, version: str) -> str | None:
    """``versions/<version>``, or for a prefix like ``3.11`` the newest ``3.11.*`` installed."""
    versions = os.path.join(root, "versions")
    exact = os.path.join(versions, version)
    if os.path.isdir(exact):
        return exact
    try:
        names = [n for n in os.listdir(versions) if n.startswith(version + ".")]
    except OSError:
        return None
    numeric = [n for n in names if re.fullmatch(r"[\d.]+", n)]
    if not numeric:
        return None
    return os.path.join(versions, max(numeric, key=lambda n: [int(p) for p in n.split(".") if p]))


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


def from_directory(path: Path, chosen_by: str, files: Rooted = HOST) -> Target:
    """The environment at PATH; FILES: the system it is read in (``under_root``)."""
    if not files.exists(path):
        raise TargetError(f"target {path} does not exist")
    if not files.isdir(path):
        raise TargetError(f"target {path} is not a directory")
    # One identity for the target, from here on: ``..`` and symlinks resolved once, so the
    # model, the backup listing and every message name each file the same way.
    prefix = Path(files.realpath(path))
    cfg = read_pyvenv_cfg(prefix, files)
    version = _version_from_cfg(cfg) if cfg else None
    site_paths, version = _layout_site_dirs(prefix, version, files)
    if not site_paths:
        if _looks_like_site_dir(prefix, files):
            return _from_site_dir(prefix, chosen_by, files)
        raise TargetError(f"no Python environment found at {path} (no site-packages directory)")
    sites = [SiteDir(str(p), str(prefix)) for p in site_paths]
    if cfg is not None and includes_system_site(cfg):
        base = _base_prefix(cfg)
        base = None if base is None else Path(files.host(base))  # the root's, inside one
        if base is not None and base != prefix:
            base_sites, _ = _layout_site_dirs(base, version, files)
            sites.extend(SiteDir(str(p), str(base), inherited=True) for p in base_sites)
    return Target(
        prefix=str(prefix),
        python=find_python(prefix, version, files),
        site_dirs=tuple(sites),
        chosen_by=chosen_by,
        python_version=version,
        python_full_version=_full_version_from_cfg(cfg, version) if cfg else None,
    )


def _looks_like_site_dir(path: Path, files: Rooted) -> bool:
    if path.name in _SITE_NAMES:
        return True
    try:
        return any(n.endswith((".dist-info", ".egg-info")) for n in files.listdir(path))
    except OSError:
        return False


def _from_site_dir(site: Path, chosen_by: str, files: Rooted) -> Target:
    prefix = prefix_of_site_dir(site)
    if prefix == site:
        return _from_target_folder(site, chosen_by, files)
    match = _PYDIR.match(site.parent.name)
    version = (int(match[1]), int(match[2])) if match else None
    return Target(
        prefix=str(prefix),
        python=find_python(prefix, version, files),
        site_dirs=(SiteDir(str(site), str(prefix)),),
        chosen_by=chosen_by,
        python_version=version,
    )


# --------------------------------------------------------------------------- --target folders


@dataclass(frozen=True, slots=True)
class BuiltFor:
    """What a ``pip install --target`` folder's contents were built for: each distribution's
    wheel tags (its WHEEL file) and the suffixes of its extension modules."""

    tags: tuple[tuple[str, tuple[str, ...]], ...]  # (dist-info directory, its tags)
    suffixes: tuple[str, ...]  # ".cpython-311-x86_64-linux-gnu.so", ...

    @property
    def version(self) -> tuple[int, int] | None:
        """The one Python version every version-specific tag and suffix names, if any."""
        found: set[tuple[int, int]] = set()
        for suffix in self.suffixes:
            match = _SUFFIX_VERSION.match(suffix)
            if match:
                found.add((int(match[1]), int(match[2])))
        for _, tags in self.tags:
            exact = {v for v in map(_exact_version, tags) if v is not None}
            if len(exact) == 1:
                found |= exact
        return found.pop() if len(found) == 1 else None

    def describe(self) -> str:
        version = self.version
        return f"Python {version[0]}.{version[1]}" if version else ""


_SUFFIX = re.compile(r"(\.(?:cpython|pypy)[^./,\s]*\.so)(?=,)")
_SUFFIX_VERSION = re.compile(r"^\.(?:cpython-|pypy)(\d)(\d+)")
_PYTAG = re.compile(r"^(py|cp|pp)(\d)(\d*)$")


def read_built_for(folder: Path, files: Rooted = HOST) -> BuiltFor:
    """The WHEEL tags and extension suffixes of every dist-info in FOLDER (unreadable: none)."""
    tags: list[tuple[str, tuple[str, ...]]] = []
    suffixes: set[str] = set()
    try:
        names = sorted(n for n in files.listdir(folder) if n.endswith(".dist-info"))
    except OSError:
        names = []
    for name in names:
        wheel = _read_text(folder / name / "WHEEL", files)
        if wheel:
            tags.append((name, tuple(x for t in parse_wheel_tags(wheel) for x in _expand(t))))
        suffixes.update(_SUFFIX.findall(_read_text(folder / name / "RECORD", files)))
    return BuiltFor(tuple(tags), tuple(sorted(suffixes)))


def _read_text(path: Path, files: Rooted) -> str:
    try:
        return files.read(path).decode("utf-8", "replace")
    except OSError:
        return ""


def _expand(tag: str) -> tuple[str, ...]:
    """A compressed tag set ("py2.py3-none-any") as its single tags."""
    parts = tag.split("-")
    if len(parts) != 3:
        return (tag,)
    pys, abis, plats = (p.split(".") for p in parts)
    return tuple(f"{a}-{b}-{c}" for a in pys for b in abis for c in plats)


def _exact_version(tag: str) -> tuple[int, int] | None:
    """The version a tag is built for alone (cp311-cp311-..., cp311-none-...), else None."""
    parts = tag.split("-")
    match = _PYTAG.match(parts[0]) if len(parts) == 3 else None
    if match is None or not match[3] or parts[1] == "abi3" or match[1] == "py":
        return None
    return int(match[2]), int(match[3])


@dataclass(frozen=True, slots=True)
class Interpreter:
    """An interpreter as it reports itself when run as ``-I -S``."""

    path: str  # the real binary (a venv's own interpreter as it is)
    version: tuple[int, int]
    implementation: str  # "cpython", "pypy"
    ext_suffix: str  # ".cpython-311-x86_64-linux-gnu.so"
    platform: str  # sysconfig.get_platform(): "linux-x86_64"
    full_version: str | None = None  # platform.python_version(): "3.11.2"

    def describe(self) -> str:
        name = {"cpython": "CPython", "pypy": "PyPy"}.get(self.implementation, self.implementation)
        return f"{name} {self.version[0]}.{self.version[1]} ({self.platform})"


def _tag_fits(tag: str, interp: Interpreter) -> bool:
    parts = tag.split("-")
    match = _PYTAG.match(parts[0]) if len(parts) == 3 else None
    if match is None or not _platform_fits(parts[2], interp.platform):
        return False
    kind, major, minor = match[1], int(match[2]), int(match[3]) if match[3] else None
    version = interp.version
    if major != version[0] or (kind, interp.implementation) in (("cp", "pypy"), ("pp", "cpython")):
        return False
    if parts[1] == "abi3":
        return kind == "cp" and (minor is None or version[1] >= minor)
    if parts[1] == "none" and kind == "py":
        return minor is None or version[1] >= minor
    return minor == version[1]  # built for this version's ABI alone


def _platform_fits(plat: str, platform: str) -> bool:
    if plat == "any":
        return True
    family, _, arch = platform.partition("-")
    arch = arch.rsplit("-", 1)[-1]
    if family == "linux":
        return plat.startswith(("linux_", "manylinux", "musllinux")) and plat.endswith("_" + arch)
    return plat == platform.replace("-", "_").replace(".", "_") or plat.endswith("_" + arch)


def mismatch(built: BuiltFor, interp: Interpreter) -> str | None:
    """Why INTERP cannot use a folder BUILT so, or None when every distribution fits."""
    for name, tags in built.tags:
        if tags and not any(_tag_fits(t, interp) for t in tags):
            return f"{name} is built for {', '.join(tags[:3])}"
    for suffix in built.suffixes:
        if suffix != interp.ext_suffix:
            return f"it holds extension modules built for *{suffix}"
    return None


def _from_target_folder(folder: Path, chosen_by: str, files: Rooted = HOST) -> Target:
    built = read_built_for(folder, files)
    return Target(
        prefix=str(folder),
        python=None,
        site_dirs=(SiteDir(str(folder), str(folder)),),
        chosen_by=chosen_by,
        python_version=built.version,
        target_dir=str(folder),
        built_for=built.describe(),
    )


def with_interpreter(target: Target, python: str, environ: Mapping[str, str]) -> Target:
    """TARGET, a ``pip install --target`` folder, served by the interpreter PYTHON (run as
    ``-I -S`` to learn what it is), which must fit the tags of the folder's wheels."""
    if target.target_dir is None:
        raise TargetError(
            "give either TARGET or --python, not both (--python goes with TARGET only for a "
            "folder made with `pip install --target`, which has no interpreter of its own)"
        )
    interp = interpreter(python, environ)
    why = mismatch(read_built_for(Path(target.target_dir)), interp)
    if why is not None:
        raise TargetError(
            f"--python {python} is {interp.describe()} and cannot use {target.target_dir}: {why}"
        )
    return replace(
        target,
        python=interp.path,
        python_version=interp.version,
        python_full_version=interp.full_version,
    )


# --------------------------------------------------------------------------- --python


# Run in the target interpreter with -I -S: stdlib only, no site hooks, no .pth files.
# Under -S a venv is not detected (site.venv() does that, and also runs .pth files), so
# find pyvenv.cfg the way site.venv() does and ask sysconfig for that prefix's paths.
_PROBE = """
import json, os, platform, site, sys, sysconfig
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
    "version": list(sys.version_info[:2]), "implementation": sys.implementation.name,
    "full_version": platform.python_version(),
    "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX") or "",
    "platform": sysconfig.get_platform(),
    "purelib": paths.get("purelib"), "platlib": paths.get("platlib"), "sites": sites,
}))
"""


def _probe(python: str, environ: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """(the real interpreter, what it reports). A shim is seen through without running it
    when its layout says where it leads; otherwise the interpreter it runs reports itself."""
    import json
    import subprocess

    if not os.path.exists(python):
        raise TargetError(f"interpreter {python} does not exist")
    resolved = resolve_interpreter(python, environ)
    try:
        proc = subprocess.run(
            [resolved or python, "-I", "-S", "-c", _PROBE],
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": environ.get("PATH", "")},
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"cannot run interpreter {python}: {exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise TargetError(f"interpreter {python} failed (exit {proc.returncode}): {last}")
    try:
        info: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise TargetError(f"interpreter {python} printed something unexpected") from None
    reported = str(info.get("executable") or "")
    real = resolved or (resolve_interpreter(reported, environ) if reported else None)
    if real is None:
        raise TargetError(f"cannot tell which binary {python} runs (it reports {reported!r})")
    return real, info


def interpreter(python: str, environ: Mapping[str, str]) -> Interpreter:
    real, info = _probe(python, environ)
    return Interpreter(
        path=real,
        version=(info["version"][0], info["version"][1]),
        implementation=str(info.get("implementation", "")),
        ext_suffix=str(info.get("ext_suffix", "")),
        platform=str(info.get("platform", "")),
        full_version=_reported_full_version(info),
    )


def from_python(
    python: str, chosen_by: str = "--python", environ: Mapping[str, str] | None = None
) -> Target:
    real, info = _probe(python, os.environ if environ is None else environ)
    reported = os.path.normpath(info["prefix"])
    prefix = Path(os.path.realpath(reported))  # one identity, as for a directory target
    ordered = [info["purelib"], info["platlib"], *info["sites"]]
    sites: list[SiteDir] = []
    seen: set[str] = set()
    for raw in ordered:
        if not raw or not os.path.isdir(raw):
            continue
        real_dir = os.path.realpath(raw)
        if real_dir in seen:
            continue
        seen.add(real_dir)
        sites.append(SiteDir(_rebased(os.path.normpath(raw), reported, str(prefix)), str(prefix)))
    cfg = read_pyvenv_cfg(prefix)
    if cfg is not None and includes_system_site(cfg):
        base = Path(info["base_prefix"])
        base_sites, _ = _layout_site_dirs(base, tuple(info["version"]))
        for p in base_sites:
            if os.path.realpath(p) not in seen:
                sites.append(SiteDir(str(p), str(base), inherited=True))
    if not sites:
        raise TargetError(f"interpreter {python} has no site-packages directory")
    return Target(
        prefix=str(prefix),
        python=real,
        site_dirs=tuple(sites),
        chosen_by=chosen_by,
        python_version=(info["version"][0], info["version"][1]),
        python_full_version=_reported_full_version(info),
    )


def _reported_full_version(info: Mapping[str, Any]) -> str | None:
    full = info.get("full_version")
    return full if isinstance(full, str) and re.match(r"^\d+\.\d+\.\d+", full) else None


def _rebased(path: str, old: str, new: str) -> str:
    """PATH under the prefix spelled NEW instead of OLD (the same directory); else as it is."""
    if path == old:
        return new
    if old != new and path.startswith(old.rstrip(os.sep) + os.sep):
        return os.path.join(new, os.path.relpath(path, old))
    return path


def under_root(root: str, target: str) -> Target:
    """TARGET, a path as the system inside ROOT names it (``/opt/venv``), read in ROOT: every
    symlink resolved with ROOT as ``/``, and the interpreter and any inherited site dir
    taken inside ROOT too, never the host's."""
    base = os.path.realpath(root)
    if not os.path.isdir(base):
        raise TargetError(f"--root {root} is not a directory")
    files = Rooted(base)
    found = from_directory(Path(files.host(target)), "argument", files)
    python = found.python  # a venv's own python stays as it is, a name in the root resolved
    if python is not None and not python.startswith(base + os.sep):
        python = files.host(python)
    return replace(
        found,
        site_dirs=tuple(replace(s, root=base) for s in found.site_dirs if files.isdir(s.path)),
        python=python,
        root=base,
    )


def discover(target: str | None, python: str | None, environ: Mapping[str, str]) -> Target:
    """Pick the environment to inspect: argument, --python, $VIRTUAL_ENV, $CONDA_PREFIX, self.

    TARGET and --python together: a ``pip install --target`` folder and the interpreter that
    serves it (nothing else takes both)."""
    if target is not None and python is not None:
        return with_interpreter(from_directory(Path(target), "argument"), python, environ)
    if target is not None:
        return from_directory(Path(target), "argument")
    if python is not None:
        return from_python(python, environ=environ)
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        value = environ.get(variable)
        if value:
            return from_directory(Path(value), f"${variable}")
    return from_directory(Path(sys.prefix), "the interpreter running libdoctor")
