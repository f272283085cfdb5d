"""Remedies: what repairs a finding, as values. A check decides *what* (reinstall these
distributions at their versions, uninstall that one, delete a stale metadata directory)
and *through whom* (``Via``: the installer, its executable, the interpreter, the site
prefix, the ``--target`` folder), all resolved once when the remedy is made
(``external.installers``). The command line is built here, in ``argv``, only when a
remedy is printed or run; nothing reads a command line back.

A ``Via`` without an interpreter (a ``pip install --target`` folder, an environment whose
Python is gone) prints a placeholder made from the Python version (``<python3.11>``), which
``external.installers.unrunnable`` refuses to run; pip cannot uninstall from a --target
folder, so that uninstall prints ``NO_PIP_UNINSTALL`` in place of a command.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeAlias

__all__ = [
    "NO_PIP_UNINSTALL",
    "RUNNABLE",
    "ClearCache",
    "Install",
    "LockRemove",
    "Pin",
    "Reinstall",
    "Remedy",
    "RemoveMetadata",
    "Uninstall",
    "Via",
    "argv",
    "merge_reinstalls",
    "placeholder",
    "program",
    "remedy_of",
    "to_plain",
    "uninstalled",
]

RUNNABLE = frozenset({"pip", "uv"})
"""The installers libdoctor runs itself; others (conda, a distro) are only named in a fix."""

# pip cannot uninstall from a --target folder: it only sees its own environment. A fix that
# needs one names this instead of a command that would act on another environment.
NO_PIP_UNINSTALL = "<pip cannot uninstall from a --target folder>"


def placeholder(version: tuple[int, int] | None) -> str:
    """What stands where no interpreter was found: never a bare ``python`` that PATH would
    resolve to another environment."""
    return f"<python{version[0]}.{version[1]}>" if version else "<python>"


@dataclass(frozen=True, slots=True)
class Via:
    """Who runs a remedy: ``installer`` is the command's program (``pip``, ``uv``, ``conda``;
    ``exe`` is conda's, mamba's or micromamba's binary as found), ``python`` the interpreter
    it acts for as its real binary (None: none found, ``python_version`` names the
    placeholder), ``prefix`` the site prefix conda is told, ``folder`` a ``pip install
    --target`` folder. ``recorded`` is what the distribution's INSTALLER says (pip runs the
    command for a distribution poetry installed): it decides whether libdoctor runs the
    command, not what the command is, so two commands that read alike are equal."""

    installer: str = "pip"
    python: str | None = None
    python_version: tuple[int, int] | None = None
    folder: str | None = None
    prefix: str = ""
    exe: str = ""
    recorded: str = field(default="", compare=False)

    @property
    def interpreter(self) -> str:
        return self.python if self.python is not None else placeholder(self.python_version)

    @property
    def runnable(self) -> bool:
        """Whether libdoctor runs this installer itself (conda and the others it only names)."""
        return (self.recorded or self.installer) in RUNNABLE

    @property
    def upgrades_folder(self) -> bool:
        """pip into a --target folder: ``--upgrade`` replaces each top-level entry whole."""
        return self.installer == "pip" and self.folder is not None


@dataclass(frozen=True, slots=True)
class Pin:
    """A distribution at its installed version; ``spec`` is how conda names it
    (``name=version=build``), empty for pip and uv."""

    name: str
    version: str
    spec: str = ""


@dataclass(frozen=True, slots=True)
class Reinstall:
    """Reinstall DISTS at their versions, without dependencies, in one call through VIA.
    ``ignore_installed``: pip writes over a dist-info without RECORD, which it refuses to
    uninstall (so to ``--force-reinstall``)."""

    dists: tuple[Pin, ...]
    via: Via
    ignore_installed: bool = False


@dataclass(frozen=True, slots=True)
class Install:
    """Install REQUIREMENTS (requirements, wheel files, ``-r``/``-c`` files, or one
    directory with ``editable``) through VIA; ``reinstall`` replaces an installed copy of
    the same version, ``deps`` false installs no dependencies, ``index_url`` is the one
    index to look in."""

    requirements: tuple[str, ...]
    via: Via
    reinstall: bool = False
    deps: bool = True
    editable: bool = False
    index_url: str | None = None


@dataclass(frozen=True, slots=True)
class Uninstall:
    """Uninstall the distribution NAME (as its installer names it) through VIA."""

    name: str
    via: Via

    @property
    def impossible(self) -> bool:
        """pip cannot uninstall from a --target folder (it sees only its own environment)."""
        return self.via.installer == "pip" and self.via.folder is not None


@dataclass(frozen=True, slots=True)
class RemoveMetadata:
    """Delete a stale metadata directory, only it (the files are another copy's)."""

    path: str


@dataclass(frozen=True, slots=True)
class ClearCache:
    """``libdoctor caches clear --stale``: the stale entries of KINDS for the env at PREFIX."""

    kinds: tuple[str, ...]
    prefix: str


@dataclass(frozen=True, slots=True)
class LockRemove:
    """Remove NAMES from a uv project (beside its pyproject.toml); uv locks again."""

    names: tuple[str, ...]


Remedy: TypeAlias = Reinstall | Install | Uninstall | RemoveMetadata | ClearCache | LockRemove


# --------------------------------------------------------------------------- command lines


def argv(remedy: Remedy) -> tuple[str, ...]:
    """The command REMEDY runs, as its installer spells it: the one place that knows the
    arguments of pip, uv and conda."""
    if isinstance(remedy, Reinstall):
        return _reinstall_argv(remedy)
    if isinstance(remedy, Install):
        return _install_argv(remedy)
    if isinstance(remedy, Uninstall):
        return _uninstall_argv(remedy)
    if isinstance(remedy, RemoveMetadata):
        return ("rm", "-rf", "--", remedy.path)
    if isinstance(remedy, ClearCache):
        return ("libdoctor", "caches", "clear", "--stale", *remedy.kinds, remedy.prefix)
    return ("uv", "remove", *remedy.names)


def _requirement(pin: Pin, via: Via) -> str:
    if via.installer == "conda":
        return pin.spec or f"{pin.name}={pin.version}"
    return f"{pin.name}=={pin.version}"


def _reinstall_argv(remedy: Reinstall) -> tuple[str, ...]:
    via = remedy.via
    pins = tuple(_requirement(p, via) for p in remedy.dists)
    into = ("--target", via.folder) if via.folder is not None else ()
    if via.installer == "uv":
        return (
            "uv",
            "pip",
            "install",
            *into,
            "--reinstall",
            "--no-deps",
            "--python",
            via.interpreter,
            *pins,
        )
    if via.installer == "conda":
        return (
            via.exe,
            "install",
            "--yes",
            "--prefix",
            via.prefix,
            "--force-reinstall",
            "--no-deps",
            *pins,
        )
    # pip installs a --target folder through a scratch dir and moves each top-level entry
    # in: --upgrade replaces an existing one whole (so its other owners' files go too:
    # repair.targetdir reinstalls them in the same call).
    how = "--ignore-installed" if remedy.ignore_installed else "--force-reinstall"
    flags = ("--upgrade",) if into else (how,)
    return (via.interpreter, "-m", "pip", "install", *into, *flags, "--no-deps", *pins)


def _install_argv(remedy: Install) -> tuple[str, ...]:
    via = remedy.via
    into = ("--target", via.folder) if via.folder is not None else ()
    no_deps = () if remedy.deps else ("--no-deps",)
    source = (
        ("--editable",)
        if remedy.editable
        else ("--index-url", remedy.index_url)
        if remedy.index_url is not None
        else ()
    )
    if via.installer == "uv":
        again = ("--reinstall",) if remedy.reinstall else ()
        return (
            "uv",
            "pip",
            "install",
            *into,
            *again,
            *no_deps,
            "--python",
            via.interpreter,
            *source,
            *remedy.requirements,
        )
    again = ("--upgrade",) if into else ("--force-reinstall",) if remedy.reinstall else ()
    return (
        via.interpreter,
        "-m",
        "pip",
        "install",
        *into,
        *again,
        *no_deps,
        *source,
        *remedy.requirements,
    )


def _uninstall_argv(remedy: Uninstall) -> tuple[str, ...]:
    via = remedy.via
    if via.installer == "uv":
        into = ("--target", via.folder) if via.folder is not None else ()
        return ("uv", "pip", "uninstall", *into, "--python", via.interpreter, remedy.name)
    if via.installer == "conda":
        return (via.exe, "remove", "--yes", "--prefix", via.prefix, "--force", remedy.name)
    if remedy.impossible:
        return (NO_PIP_UNINSTALL, remedy.name)
    return (via.interpreter, "-m", "pip", "uninstall", "--yes", remedy.name)


def program(remedy: Remedy) -> str | None:
    """The installer REMEDY runs (``pip``, ``uv``, ``conda``), None for a remedy that is not
    an installer's command (a metadata directory deleted, a cache cleared)."""
    if isinstance(remedy, (Reinstall, Install, Uninstall)):
        return remedy.via.installer
    return "uv" if isinstance(remedy, LockRemove) else None


def uninstalled(remedy: Remedy) -> str | None:
    """The distribution REMEDY uninstalls with pip or uv, else None (conda removes; pip
    cannot uninstall from a --target folder)."""
    if isinstance(remedy, Uninstall) and remedy.via.installer != "conda" and not remedy.impossible:
        return remedy.name
    return None


# --------------------------------------------------------------------------- merging


def _mergeable(remedy: Remedy) -> bool:
    """A reinstall another through the same installer and interpreter can join: conda names
    each package with its build (one call each), and pip's ``--ignore-installed`` is
    another way to reinstall."""
    return (
        isinstance(remedy, Reinstall)
        and remedy.via.installer != "conda"
        and not remedy.ignore_installed
    )


def merge_reinstalls(remedies: tuple[Remedy, ...]) -> tuple[Remedy, ...]:
    """Adjacent reinstalls by one installer and interpreter as one call: ``pip install
    --force-reinstall --no-deps A==1 B==2`` does what the two calls would, in one run."""
    out: list[Remedy] = []
    for remedy in remedies:
        last = out[-1] if out else None
        if (
            isinstance(last, Reinstall)
            and isinstance(remedy, Reinstall)
            and _mergeable(last)
            and _mergeable(remedy)
            and last.via == remedy.via
        ):
            out[-1] = replace(last, dists=(*last.dists, *remedy.dists))
            continue
        out.append(remedy)
    return tuple(out)


# --------------------------------------------------------------------------- plain values

_KINDS: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (Reinstall, Install, Uninstall, RemoveMetadata, ClearCache, LockRemove)
}


def to_plain(remedy: Remedy) -> tuple[Any, ...]:
    """REMEDY as plain values (strings, booleans, None, tuples) a cache can store."""
    return (type(remedy).__name__, *(_plain(getattr(remedy, f.name)) for f in fields(remedy)))


def _plain(value: Any) -> Any:
    if isinstance(value, (Via, Pin)):
        return tuple(_plain(getattr(value, f.name)) for f in fields(value))
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def remedy_of(plain: object) -> Remedy | None:
    """The remedy ``to_plain`` stored, or None when PLAIN is not one (a cache is untrusted)."""
    if type(plain) is not tuple or not plain or type(plain[0]) is not str:
        return None
    kind = _KINDS.get(plain[0])
    if kind is None or len(plain) != len(fields(kind)) + 1:
        return None
    values = [_value(f.name, v) for f, v in zip(fields(kind), plain[1:], strict=True)]
    if any(v is _BAD for v in values):
        return None
    remedy: Remedy = kind(*values)
    return remedy


_BAD = object()
_STRINGS = ("kinds", "names", "requirements")


def _value(name: str, value: object) -> object:
    """VALUE checked for the field NAME (and made a Via or Pins again); ``_BAD`` if not."""
    if name == "via":
        return _via_of(value)
    if name == "dists":
        pins = [_pin_of(p) for p in value] if type(value) is tuple and value else [_BAD]
        return _BAD if any(p is _BAD for p in pins) else tuple(pins)
    if name in _STRINGS:
        ok = type(value) is tuple and all(type(v) is str for v in value)
        return value if ok else _BAD
    if name in ("ignore_installed", "reinstall", "deps", "editable"):
        return value if type(value) is bool else _BAD
    if name == "index_url":
        return value if value is None or type(value) is str else _BAD
    return value if type(value) is str else _BAD


def _pin_of(value: object) -> object:
    ok = type(value) is tuple and len(value) == 3 and all(type(v) is str for v in value)
    return Pin(*value) if ok else _BAD  # type: ignore[misc]


def _via_of(value: object) -> object:
    if type(value) is not tuple or len(value) != len(fields(Via)):
        return _BAD
    installer, python, version, folder, prefix, exe, recorded = value
    strings = (installer, prefix, exe, recorded)
    if not all(type(v) is str for v in strings) or not all(
        v is None or type(v) is str for v in (python, folder)
    ):
        return _BAD
    if version is not None and not (
        type(version) is tuple and len(version) == 2 and all(type(v) is int for v in version)
    ):
        return _BAD
    return Via(installer, python, version, folder, prefix, exe, recorded)
