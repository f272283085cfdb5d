"""What ``pip install REQ...`` would install into a target, asked of the target's own pip
(``pip install --dry-run --report -``), and the wheels it names fetched into the user cache
(``pip download --no-deps``), so ``plan install`` can read them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from libdoctor.environment.installers import (
    InstallerOptions,
    Notify,
    installer_env,
    pip_command,
)
from libdoctor.environment.process import run_installer
from libdoctor.environment.target import Target
from libdoctor.errors import LibdoctorError

__all__ = ["ResolvedWheels", "resolve_requirements"]


@dataclass(frozen=True, slots=True)
class ResolvedWheels:
    wheels: tuple[str, ...]  # local wheel files, in the order pip would install them
    notes: tuple[str, ...]  # what could not be predicted (sdists), or nothing to install
    unknown: tuple[str, ...] = ()  # "name version" of what pip would build from source


def resolve_requirements(
    target: Target,
    requirements: Sequence[str],
    *,
    options: InstallerOptions,
    cache_dir: str,
    environ: Mapping[str, str],
    echo: bool = False,
    notify: Notify | None = None,
) -> ResolvedWheels:
    """The wheels ``pip install REQ...`` would install into TARGET, fetched into the cache.

    Resolved by the target's own pip against what is installed (no ``--ignore-installed``):
    a requirement already satisfied installs nothing, exactly as pip would do.
    """
    say = notify or (lambda _text: None)
    pip = pip_command(target)
    argv = [*pip, "install", "--dry-run", "--quiet", "--report", "-"]
    argv += [*options.args(), *requirements]
    say(f"resolving {' '.join(requirements)} with {shlex.join(pip)}")
    done = subprocess.run(
        argv, env=installer_env(environ), stdin=subprocess.DEVNULL, capture_output=True, check=False
    )
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"]
        reason = next((line for line in lines if "ERROR" in line), lines[-1])
        raise LibdoctorError(f"pip could not resolve {' '.join(requirements)}: {reason.strip()}")
    try:
        report = json.loads(done.stdout)
        items = report["install"]
    except (ValueError, KeyError, TypeError):
        raise LibdoctorError(
            "pip --dry-run --report gave no usable report (needs pip >= 22.2)"
        ) from None
    wheels: list[str] = []
    notes: list[str] = []
    unknown: list[str] = []
    if not items:
        notes.append(f"{' '.join(requirements)}: already satisfied, pip would install nothing")
    for item in items:
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
        sha256 = (info.get("archive_info") or {}).get("hashes", {}).get("sha256")
        if parsed.scheme == "file":
            wheels.append(urllib.request.url2pathname(parsed.path))
            continue
        wheels.append(_fetch(pip, url, filename, sha256, options, cache_dir, environ, echo, say))
    return ResolvedWheels(tuple(wheels), tuple(notes), tuple(unknown))


def _fetch(
    pip: Sequence[str],
    url: str,
    filename: str,
    sha256: str | None,
    options: InstallerOptions,
    cache_dir: str,
    environ: Mapping[str, str],
    echo: bool,
    say: Notify,
) -> str:
    dest_dir = os.path.join(cache_dir, "wheels", hashlib.sha256(url.encode()).hexdigest()[:16])
    dest = os.path.join(dest_dir, filename)
    if os.path.isfile(dest) and (sha256 is None or _file_sha256(dest) == sha256):
        say(f"{filename}: in the cache")
        return dest
    os.makedirs(dest_dir, exist_ok=True)
    say(f"downloading {filename}")
    quiet = () if echo else ("--quiet",)
    argv = [*pip, "download", *quiet, "--no-deps", "--dest", dest_dir, *options.args(), url]
    code, output = run_installer(argv, installer_env(environ), echo)
    if code != 0 or not os.path.isfile(dest):
        last = (output.strip().splitlines() or [f"exit {code}"])[-1]
        raise LibdoctorError(f"pip download {filename} failed: {last}")
    if sha256 is not None and _file_sha256(dest) != sha256:
        os.unlink(dest)
        raise LibdoctorError(f"{filename}: downloaded file does not match the index's sha256")
    return dest


def _file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
