"""The interpreter and platform an environment-to-be is planned for: its PEP 508 marker values
and the wheel tags an installer accepts there, most preferred first.

``for_running`` is the interpreter running libdoctor (``packaging.tags.sys_tags``);
``planned(python, platform)`` is another one: CPython X.Y on a platform tag. A
``manylinux_2_28_x86_64`` platform accepts every older manylinux of its architecture (the
legacy ``manylinux2014``/``2010``/``1`` names among them) and ``linux_x86_64`` last, as pip
and uv accept them there. ``choose_wheel`` picks among a lock's wheel files the one the
installer would: the file whose best tag comes first.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from libdoctor.errors import LibdoctorError

__all__ = ["PlannedPlatform", "choose_wheel", "for_running", "planned", "wheel_tags"]

_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_(\w+)")
_LEGACY = {"manylinux2014": (2, 17), "manylinux2010": (2, 12), "manylinux1": (2, 5)}
_PYTHON = re.compile(r"(\d+)\.(\d+)")


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
    """CPython PYTHON ("3.11") on PLATFORM (a wheel platform tag); either None: this one's."""
    if python is None and platform is None:
        return for_running()
    from packaging.markers import default_environment
    from packaging.tags import compatible_tags, cpython_tags, platform_tags

    version = _python(python) if python is not None else sys.version_info[:2]
    platforms = _platforms(platform) if platform is not None else list(platform_tags())
    tags = [
        *cpython_tags(version, platforms=platforms),
        *compatible_tags(version, platforms=platforms),
    ]
    markers = {k: str(v) for k, v in default_environment().items()}
    markers["python_version"] = f"{version[0]}.{version[1]}"
    if tuple(sys.version_info[:2]) != version:
        markers["python_full_version"] = f"{version[0]}.{version[1]}.0"
    if platform is not None:
        markers |= _platform_markers(platform)
    shown = platform if platform is not None else "this machine"
    return PlannedPlatform(version, shown, markers, tuple(str(t) for t in tags))


def _python(text: str) -> tuple[int, int]:
    match = _PYTHON.fullmatch(text.strip())
    if match is None:
        raise LibdoctorError(f"--python {text}: expected a version X.Y (3.11)")
    return int(match[1]), int(match[2])


def _platforms(tag: str) -> list[str]:
    """Every platform tag an installer accepts on TAG's platform, best first."""
    match = _MANYLINUX.fullmatch(tag)
    if match is None and tag.split("_", 1)[0] in _LEGACY:
        head, _, arch = tag.partition("_")
        major, minor = _LEGACY[head]
        match = _MANYLINUX.fullmatch(f"manylinux_{major}_{minor}_{arch}")
    if match is None:
        return [tag]
    major, minor, arch = int(match[1]), int(match[2]), match[3]
    found = [f"manylinux_{major}_{m}_{arch}" for m in range(minor, 4, -1)]
    for legacy, (lmajor, lminor) in _LEGACY.items():
        if (lmajor, lminor) <= (major, minor):
            found.insert(found.index(f"manylinux_{lmajor}_{lminor}_{arch}") + 1, f"{legacy}_{arch}")
    return [*found, f"linux_{arch}"]


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
