"""The interpreter and platform an environment-to-be is planned for: its PEP 508 marker values
and the wheel tags an installer accepts there, most preferred first.

``for_running`` is the interpreter running libdoctor (``packaging.tags.sys_tags``);
``planned(python, platform)`` is another one: CPython X.Y or X.Y.Z on a platform tag. X.Y
is planned as X.Y.0 for ``python_full_version`` (what ``uv pip compile --python-version
X.Y`` assumes: the lowest patch, even where the running interpreter is a later X.Y). A
``manylinux_2_28_x86_64`` platform accepts every older manylinux of its architecture (the
legacy ``manylinux2014``/``2010``/``1`` names among them) and ``linux_x86_64`` last, as pip
and uv accept them there; ``musllinux_1_2`` the older musllinux 1 tags, ``macosx_14_0_arm64``
the older macOS ones (``packaging.tags.mac_platforms``). Both are checked strictly (a
version of digits, a tag of a known platform family): anything else is one line, never a
guess. ``choose_wheel`` picks among a lock's wheel files the one the installer would: the
file whose best tag comes first.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from libdoctor.errors import LibdoctorError

__all__ = ["PlannedPlatform", "choose_wheel", "for_running", "planned", "wheel_tags"]

_ARCH = r"(x86_64|[a-z][a-z0-9]*)"
_MANYLINUX = re.compile(rf"manylinux_2_(\d{{1,3}})_{_ARCH}")
_LEGACY = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
_LEGACY_TAG = re.compile(rf"(manylinux2014|manylinux2010|manylinux1)_{_ARCH}")
_MUSLLINUX = re.compile(rf"musllinux_1_(\d{{1,3}})_{_ARCH}")
_MACOSX = re.compile(rf"macosx_(\d{{1,2}})_(\d{{1,2}})_{_ARCH}")
_OTHER = re.compile(rf"linux_{_ARCH}|win32|win_amd64|win_arm64")
_PYTHON = re.compile(r"([1-9]\d{0,2})\.(\d{1,3})(?:\.(\d{1,3}))?")


@dataclass(frozen=True, slots=True)
class PlannedPlatform:
    """Where the lock is to be installed: marker values and accepted tags, best first."""

    python: tuple[int, int]
    platform: str  # as given, or "this machine"
    markers: dict[str, str]
    tags: tuple[str, ...]  # "cp311-cp311-manylinux_2_28_x86_64", ...

    @property
    def display(self) -> str:
        return f"Python {self.python[0]}.{self.python[1]}, {self.platform}"


def for_running() -> PlannedPlatform:
    """The interpreter running libdoctor on this machine."""
    from packaging.markers import default_environment
    from packaging.tags import sys_tags

    markers = {k: str(v) for k, v in default_environment().items()}
    tags = tuple(str(t) for t in sys_tags())
    return PlannedPlatform(sys.version_info[:2], "this machine", markers, tags)


def planned(python: str | None, platform: str | None) -> PlannedPlatform:
    """CPython PYTHON ("3.11", "3.11.4") on PLATFORM (a wheel platform tag); either None:
    this one's. A ``LibdoctorError`` (one line) for a PYTHON or PLATFORM that is neither."""
    if python is None and platform is None:
        return for_running()
    from packaging.markers import default_environment
    from packaging.tags import compatible_tags, cpython_tags, platform_tags

    full = _python(python) if python is not None else None
    version = (full[0], full[1]) if full is not None else sys.version_info[:2]
    platforms = _platforms(platform) if platform is not None else list(platform_tags())
    tags = [
        *cpython_tags(version, platforms=platforms),
        *compatible_tags(version, platforms=platforms),
    ]
    markers = {k: str(v) for k, v in default_environment().items()}
    if full is not None:
        markers["python_version"] = f"{version[0]}.{version[1]}"
        markers["python_full_version"] = ".".join(map(str, full))
        markers["implementation_version"] = markers["python_full_version"]  # CPython's own
    if platform is not None:
        markers |= _platform_markers(platform)
    shown = platform if platform is not None else "this machine"
    return PlannedPlatform(version, shown, markers, tuple(str(t) for t in tags))


def _python(text: str) -> tuple[int, int, int]:
    """X.Y.Z from ``--python``; X.Y is X.Y.0, as uv plans ``--python-version X.Y``."""
    match = _PYTHON.fullmatch(text)
    if match is None:
        raise LibdoctorError(
            f"--python {_shown(text)}: expected a version X.Y or X.Y.Z (3.11, 3.11.4)"
        )
    return int(match[1]), int(match[2]), int(match[3] or 0)


def _platforms(tag: str) -> list[str]:
    """Every platform tag an installer accepts on TAG's platform, best first."""
    from packaging.tags import mac_platforms

    if legacy := _LEGACY_TAG.fullmatch(tag):
        tag = "manylinux_{}_{}_{}".format(*_LEGACY[legacy[1]], legacy[2])
    if match := _MANYLINUX.fullmatch(tag):
        minor, arch = int(match[1]), match[2]
        found = [f"manylinux_2_{m}_{arch}" for m in range(minor, 4, -1)]
        for name, (_, lminor) in _LEGACY.items():
            if lminor <= minor:
                found.insert(found.index(f"manylinux_2_{lminor}_{arch}") + 1, f"{name}_{arch}")
        return [*found, f"linux_{arch}"]
    if match := _MUSLLINUX.fullmatch(tag):
        minor, arch = int(match[1]), match[2]
        return [*(f"musllinux_1_{m}_{arch}" for m in range(minor, -1, -1)), f"linux_{arch}"]
    if match := _MACOSX.fullmatch(tag):
        return list(mac_platforms((int(match[1]), int(match[2])), match[3])) or [tag]
    if _OTHER.fullmatch(tag):
        return [tag]
    raise LibdoctorError(
        f"--platform {_shown(tag)}: expected a wheel platform tag (manylinux_2_28_x86_64, "
        "manylinux2014_aarch64, musllinux_1_2_x86_64, macosx_14_0_arm64, win_amd64)"
    )


def _shown(text: str) -> str:
    """An argument as an error quotes it: escaped, one short line."""
    return repr(text if len(text) <= 60 else f"{text[:60]}...")


def _platform_markers(tag: str) -> dict[str, str]:
    """sys_platform, platform_system, platform_machine and os_name for a platform tag."""
    if tag.startswith(("manylinux", "musllinux", "linux")):
        arch = tag.rsplit("_", 1)[-1] if not tag.endswith("x86_64") else "x86_64"
        return {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": arch,
                "os_name": "posix"}  # fmt: skip
    if tag.startswith("macosx"):
        arch = "arm64" if tag.endswith("arm64") else "x86_64"
        return {"sys_platform": "darwin", "platform_system": "Darwin", "platform_machine": arch,
                "os_name": "posix"}  # fmt: skip
    if tag.startswith("win"):
        arch = {"win_amd64": "AMD64", "win_arm64": "ARM64", "win32": "x86"}.get(tag, tag)
        return {"sys_platform": "win32", "platform_system": "Windows", "platform_machine": arch,
                "os_name": "nt"}  # fmt: skip
    return {}


def wheel_tags(filename: str) -> frozenset[str] | None:
    """The tags a wheel file name declares; None when it is no valid wheel name."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        return frozenset(str(t) for t in parse_wheel_filename(filename)[3])
    except (InvalidWheelFilename, ValueError):
        return None


def choose_wheel(filenames: Iterable[str], tags: Sequence[str]) -> str | None:
    """Of FILENAMES, the wheel an installer accepting TAGS (best first) would take."""
    rank = {tag: i for i, tag in enumerate(tags)}
    best: tuple[int, str] | None = None
    for name in filenames:
        declared = wheel_tags(name)
        if not declared:
            continue
        score = min((rank[t] for t in declared if t in rank), default=None)
        if score is not None and (best is None or score < best[0]):
            best = (score, name)
    return None if best is None else best[1]
