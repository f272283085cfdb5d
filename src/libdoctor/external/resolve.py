"""What ``pip install REQ...`` would install into a target, asked of the target's own pip
(``pip install --dry-run --report -``), and the wheels it names read from their index by range
requests (``external.remote``): the central directory, METADATA and RECORD, never the body.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from libdoctor.environment.target import Target
from libdoctor.environment.wheel import WheelFile, read_wheel
from libdoctor.errors import LibdoctorError
from libdoctor.external.installers import (
    InstallerOptions,
    Notify,
    installer_env,
    pip_command,
)
from libdoctor.external.remote import RemoteRead, read_remote_wheel

__all__ = ["ResolvedWheels", "WheelProgress", "resolve_requirements"]

WheelProgress = Callable[[int], Callable[[int], None] | None]
"""Given how many wheels pip resolved, what is told of each one read (1 each time)."""


@dataclass(frozen=True, slots=True)
class ResolvedWheels:
    wheels: tuple[WheelFile, ...]  # read from their index, in the order pip would install them
    notes: tuple[str, ...]  # what could not be predicted (sdists), or nothing to install
    unknown: tuple[str, ...] = ()  # "name version" of what pip would build from source
    fetched: int = 0  # bytes that came over the network to read the wheels


def resolve_requirements(
    target: Target,
    requirements: Sequence[str],
    *,
    options: InstallerOptions,
    cache_dir: str,
    environ: Mapping[str, str],
    echo: bool = False,
    notify: Notify | None = None,
    progress: WheelProgress | None = None,
) -> ResolvedWheels:
    """The wheels ``pip install REQ...`` would install into TARGET, read from their index.

    Resolved by the target's own pip against what is installed (no ``--ignore-installed``):
    a requirement already satisfied installs nothing, exactly as pip would do. A local wheel
    (``file://``) is read from disk; a remote one by range requests, kept in CACHE_DIR by its
    sha256. ECHO is accepted for callers; pip's resolution prints nothing worth showing.
    PROGRESS: told of each resolved wheel read (or found to need a build).
    """
    say = notify or (lambda _text: None)
    items = _dry_run(target, requirements, options, environ, say)
    wheels: list[WheelFile] = []
    notes: list[str] = []
    unknown: list[str] = []
    fetched = 0
    if not items:
        notes.append(f"{' '.join(requirements)}: already satisfied, pip would install nothing")
    credentials = _index_urls(options, environ)
    tick = progress(len(items)) if progress else None
    for item in _each(items, tick):
        meta = item.get("metadata", {})
        label = f"{meta.get('name', '?')} {meta.get('version', '?')}"
        info = item.get("download_info", {})
        url = str(info.get("url", ""))
        parsed = urllib.parse.urlparse(url)
        filename = urllib.parse.unquote(os.path.basename(parsed.path))
        if not filename.endswith(".whl"):
            notes.append(f"{label} would be built from {filename or url}: its files are unknown")
            unknown.append(label)
            continue
        if parsed.scheme == "file":
            wheels.append(read_wheel(urllib.request.url2pathname(parsed.path)))
            continue
        sha256 = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
        read = read_remote_wheel(url, sha256=sha256, cache_dir=cache_dir, credentials=credentials)
        say(_read_line(label, read))
        fetched += read.fetched
        wheels.append(read.wheel)
    return ResolvedWheels(tuple(wheels), tuple(notes), tuple(unknown), fetched)


def _each(items: Sequence[Any], tick: Callable[[int], None] | None) -> Iterator[Any]:
    """ITEMS, TICK told of each once the loop's body is done with it."""
    for item in items:
        yield item
        if tick:
            tick(1)


def _index_urls(options: InstallerOptions, environ: Mapping[str, str]) -> tuple[str, ...]:
    """Where pip looks, as given to libdoctor or in pip's variables: the credentials a wheel
    URL on the same host is read with (pip's report names files without them)."""
    given = (options.index_url, *options.extra_index_urls, *options.find_links)
    from_env = (environ.get("PIP_INDEX_URL", ""), *environ.get("PIP_EXTRA_INDEX_URL", "").split())
    return tuple(u for u in (*given, *from_env) if u)


def _dry_run(
    target: Target,
    requirements: Sequence[str],
    options: InstallerOptions,
    environ: Mapping[str, str],
    say: Notify,
) -> list[dict[str, Any]]:
    """The ``install`` items of ``pip install --dry-run --report -``, run by the target's pip.

    pip >= 23.3 is asked for ``fast-deps``: from an index without PEP 658 metadata it reads
    each wheel's METADATA by range requests instead of downloading the wheel (it prefers the
    index's metadata when there is some). An older pip downloads every wheel it resolves,
    fast-deps or not: that is said, not changed.
    """
    pip = pip_command(target)
    argv = [*pip, "install", "--dry-run", "--quiet", "--report", "-"]
    argv += [*options.args(), *requirements]
    say(f"resolving {' '.join(requirements)} with {shlex.join(pip)}")
    version = _pip_version(target, pip)
    if version is not None and _release(version) < _NO_DRY_RUN_DOWNLOAD:
        say(
            f"pip {version} downloads every wheel it resolves during --dry-run (pip >= 23.3 "
            "reads only their metadata): upgrade that pip to plan without the download"
        )
    lazy = version is not None and _release(version) >= _NO_DRY_RUN_DOWNLOAD
    done = _run([*argv, "--use-feature=fast-deps"] if lazy else argv, environ)
    if done.returncode != 0 and lazy and b"invalid choice" in done.stderr:
        done = _run(argv, environ)  # a pip that has dropped the feature
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"]
        reason = next((line for line in lines if "ERROR" in line), lines[-1])
        raise LibdoctorError(f"pip could not resolve {' '.join(requirements)}: {reason.strip()}")
    try:
        report = json.loads(done.stdout)
        items = report["install"]
        if not isinstance(items, list):
            raise TypeError(items)
    except (ValueError, KeyError, TypeError):
        raise LibdoctorError(
            "pip --dry-run --report gave no usable report (needs pip >= 22.2)"
        ) from None
    return items


# pip 23.3 stopped downloading the wheels a --dry-run resolves when it has their metadata.
_NO_DRY_RUN_DOWNLOAD = (23, 3)


def _run(argv: Sequence[str], environ: Mapping[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        argv, env=installer_env(environ), stdin=subprocess.DEVNULL, capture_output=True, check=False
    )


def _pip_version(target: Target, pip: Sequence[str]) -> str | None:
    """The version of the pip that resolves: the target's own (its dist-info directory's
    name), or the one beside libdoctor."""
    if "--python" in pip:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("pip")
        except PackageNotFoundError:
            return None
    for site in target.site_packages:
        for name in os.listdir(site) if os.path.isdir(site) else ():
            if name.startswith("pip-") and name.endswith(".dist-info"):
                return name[len("pip-") : -len(".dist-info")]
    return None


def _release(version: str) -> tuple[int, int]:
    match = re.match(r"(\d+)(?:\.(\d+))?", version)
    return (int(match[1]), int(match[2] or 0)) if match else (0, 0)


def _read_line(label: str, read: RemoteRead) -> str:
    """``nvidia-cudnn-cu13 9.24.0.43: read 66 kB of 706 MB by range (1 request)``."""
    if read.how == "cache":
        return f"{label}: its file list from the cache (no download)"
    requests = f"{read.requests} request{'s' if read.requests != 1 else ''}"
    if read.how == "download":
        return (
            f"{label}: downloaded {_size(read.fetched)} in {requests} "
            "(the server does not honour ranges)"
        )
    return f"{label}: read {_size(read.fetched)} of {_size(read.size)} by range ({requests})"


def _size(count: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"
