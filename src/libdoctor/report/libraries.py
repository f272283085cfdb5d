"""How ``why`` and ``tree`` name a library for people and in JSON.

Paths are shown relative to the site dir or prefix they live in, and each library carries
the distributions whose RECORD claims it, or, outside the environment, the system package
that lists it: the question behind both commands is "whose file is this, and how did the
loader get to it".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from libdoctor.checks.libraries import owner_refs, searched_dirs
from libdoctor.environment.paths import display

if TYPE_CHECKING:
    from libdoctor.analysis.libraries import Provider, SystemOwners
    from libdoctor.environment.model import Environment
    from libdoctor.external.ospackages import SystemPackage
    from libdoctor.loader.model import Resolution


def short(env: Environment, path: str | None) -> str:
    """A path relative to the site dir or prefix it lives in, for people."""
    if path is None:
        return "-"
    norm = os.path.normpath(path)
    for root in (*env.target.site_packages, env.target.prefix):
        if norm.startswith(root.rstrip(os.sep) + os.sep):
            return display(os.path.relpath(norm, root))
    return display(norm)


def owner_label(env: Environment, path: str | None, system: SystemOwners | None = None) -> str:
    """Who owns PATH: the distributions claiming it, else its system package, if known."""
    if path is None:
        return ""
    owners = env.owners(os.path.normpath(path))
    if owners:
        return ", ".join(d.display for d in owners)
    package = system.owner(path) if system is not None else None
    return package.label if package is not None else ""


def provider_lines(providers: Sequence[Provider], indent: str) -> list[str]:
    """What the system's package database says of a library nobody found."""
    lines = []
    for provider in providers:
        package = provider.package
        state = (
            "on disk, in no directory the loader tried"
            if provider.present
            else f"missing from disk; {reinstall_hint(package)}"
        )
        lines.append(
            f"{indent}{package.manager} package {package.name} lists "
            f"{display(package.path)} ({state})"
        )
    return lines


def reinstall_hint(package: SystemPackage) -> str:
    if package.manager == "dpkg":
        return f"apt-get install --reinstall {package.name}"
    return f"dnf reinstall {package.name}"


def via_label(env: Environment, res: Resolution) -> str:
    if res.via is None:
        return ""
    if res.via in ("rpath", "runpath") and res.via_owner:
        return f"{res.via} of {short(env, res.via_owner)}"
    return res.via.replace("_", " ")


def resolution_dict(
    env: Environment, res: Resolution, system: SystemOwners | None = None
) -> dict[str, Any]:
    package = system.owner(res.path) if system is not None else None
    return {
        "name": res.name,
        "path": display(res.path) if res.path else None,
        "needed_by": display(res.requester) if res.requester else None,
        "via": res.via,
        "via_owner": display(res.via_owner) if res.via_owner else None,
        "status": res.status,
        "reason": res.reason,
        "owner": owner_refs(env, res.path),
        "system_package": package.evidence() if package is not None else None,
        "searched": searched_dirs(res),
    }
