"""Does a planned reinstall really put the missing files back? Asked of the wheel itself.

A reinstall at the installed version writes what the installer's wheel for that version holds,
which need not be what the installed RECORD lists (another build, a repacked wheel). When the
wheel is at hand without a network (a local ``--find-links`` directory or file), its file list
is read and every path missing now must be in it; otherwise the repair is "not verified":
libdoctor says so rather than promising.
"""

from __future__ import annotations

import os
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from libdoctor.disk.stat import Disk
from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.metadata import script_names
from libdoctor.environment.model import Environment
from libdoctor.environment.paths import display, is_bytecode
from libdoctor.environment.wheel import (
    WheelFile,
    open_wheel,
    read_member,
    read_wheel,
    wheel_distribution,
)
from libdoctor.errors import LibdoctorError

__all__ = ["Verification", "local_wheels", "verify_reinstall", "wheel_for"]

Status = Literal["verified", "not verified", "incomplete"]

# Files the installer writes itself, in no wheel: metadata it adds, scripts it generates.
_GENERATED = frozenset({"INSTALLER", "REQUESTED", "direct_url.json", "uv_cache.json"})
_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


@dataclass(frozen=True, slots=True)
class Verification:
    """Whether reinstalling DIST puts back the paths of its that are missing now."""

    dist: Distribution
    status: Status
    missing: tuple[str, ...]  # claimed paths not on disk now (bytecode aside)
    wheels: tuple[str, ...] = ()  # the wheel files the installer could take, found offline
    not_in_wheel: tuple[str, ...] = ()  # missing paths a wheel does not hold
    reason: str = ""


def local_wheels(find_links: Iterable[str]) -> tuple[str, ...]:
    """Every wheel file in the local ``--find-links`` entries (URLs are not read)."""
    found: list[str] = []
    for location in find_links:
        path = location[len("file://") :] if location.startswith("file://") else location
        if path.endswith(".whl") and os.path.isfile(path):
            found.append(os.path.abspath(path))
        elif os.path.isdir(path):
            found += sorted(
                os.path.join(os.path.abspath(path), n)
                for n in os.listdir(path)
                if n.endswith(".whl")
            )
    return tuple(found)


def _release(version: str) -> tuple[str, ...]:
    """A version as ``==`` compares it: trailing ``.0`` release parts do not count."""
    parts = version.strip().lower().split(".")
    while len(parts) > 1 and parts[-1] == "0":
        parts.pop()
    return tuple(parts)


def wheel_for(dist: Distribution, wheels: Sequence[str]) -> list[str]:
    """The wheels among WHEELS that ``pip install NAME==VERSION`` could pick for DIST."""
    out = []
    for path in wheels:
        match = _WHEEL_NAME.match(os.path.basename(path))
        if (
            match
            and canonicalize_name(match["name"]) == dist.key
            and _release(match["version"]) == _release(dist.version)
        ):
            out.append(path)
    return out


def _missing(dist: Distribution, env: Environment, disk: Disk) -> tuple[str, ...]:
    return tuple(
        c.path
        for c in env.claims_of(dist)
        if not is_bytecode(c.path) and not disk.stat(c.path).exists
    )


def _scripts(wheel: WheelFile, bindir: str) -> set[str]:
    """The console and GUI scripts the installer generates from the wheel's entry points
    (entry_points.txt read as importlib.metadata reads it, as pip does; inflated within
    MAX_MEMBER_BYTES)."""
    name = f"{wheel.dist_info}/entry_points.txt"
    try:
        with open(wheel.path, "rb") as handle, open_wheel(handle, wheel.path) as archive:
            text = read_member(archive, name, wheel.path).decode("utf-8", "replace")
    except (KeyError, OSError, zipfile.BadZipFile, LibdoctorError):
        return set()
    return {os.path.join(bindir, name) for name in script_names(text)}


def _placed(wheel: WheelFile, dist: Distribution, env: Environment) -> set[str]:
    """Every path the wheel puts in the target, the installer's own additions included: the
    scripts it generates, the metadata files it writes, and the wheel's files where it
    places them."""
    scripts = _scripts(wheel, os.path.join(dist.site.prefix, "bin"))
    metadata = os.path.join(dist.site.path, wheel.dist_info)
    _, files = wheel_distribution(wheel, env.target, dist.installer or "pip")
    return scripts | {os.path.join(metadata, n) for n in _GENERATED} | set(files)


def verify_reinstall(
    dist: Distribution, env: Environment, disk: Disk, wheels: Sequence[str]
) -> Verification:
    """Whether every one of DIST's missing paths is in each wheel the installer could take."""
    missing = _missing(dist, env, disk)
    candidates = wheel_for(dist, wheels)
    if not candidates:
        return Verification(
            dist,
            "not verified",
            missing,
            reason=f"no wheel of {dist.name}=={dist.version} is at hand offline (a local "
            "--find-links); the installer will take whatever its index serves",
        )
    lacking: list[str] = []
    for path in candidates:
        try:
            wheel = read_wheel(path)
        except LibdoctorError as exc:
            return Verification(dist, "not verified", missing, tuple(candidates), reason=str(exc))
        placed = _placed(wheel, dist, env)
        lacking += [p for p in missing if p not in placed and p not in lacking]
    names = ", ".join(os.path.basename(c) for c in candidates)
    if lacking:
        return Verification(
            dist,
            "incomplete",
            missing,
            tuple(candidates),
            tuple(lacking),
            f"{names} lacks {len(lacking)} of the {len(missing)} missing path(s) "
            f"(first: {display(lacking[0])}): the reinstall does not put them back",
        )
    reason = (
        f"{names} holds all {len(missing)} missing path(s)"
        if missing
        else f"{names} is at hand; none of its paths is missing"
    )
    return Verification(dist, "verified", missing, tuple(candidates), reason=reason)
