"""How a finding about a distribution is worded and repaired.

Distro-managed distributions (no INSTALLER) only inform, and their findings name the system
package manager instead of a pip command: their state is the distro's.
"""

from __future__ import annotations

from collections.abc import Sequence

from libdoctor.environment.distributions import Distribution
from libdoctor.environment.model import Environment
from libdoctor.external.installers import reinstall_fix
from libdoctor.findings import DistRef, Fix, Severity


def ref(dist: Distribution) -> DistRef:
    return DistRef(dist.name, dist.version)


EXTERNAL_NOTE = (
    " It was not installed by pip, uv or conda (no INSTALLER file): a system package "
    "manager owns it and may patch its files on purpose; repair it through that manager."
)


def severity_for(dists: Sequence[Distribution], severity: Severity) -> Severity:
    """Findings about distro-managed distributions only inform: their state is the distro's."""
    return Severity.INFO if all(d.external for d in dists) else severity


def repair_fix(dist: Distribution, env: Environment, note: str = "") -> Fix | None:
    """DIST's reinstall (with what must come along in a ``pip install --target`` folder)."""
    if dist.external:
        return None
    return reinstall_fix(dist, env.target, note=note, installed=env.distributions)


def file_list(dist: Distribution) -> str:
    """What lists DIST's files, as a message names it: RECORD, or for a conda package its
    ``conda-meta/NAME-VERSION-BUILD.json``, which conda users know by that name."""
    return "its conda-meta record" if dist.kind == "conda" else "RECORD"


def about(dist: Distribution, message: str) -> str:
    return message + EXTERNAL_NOTE if dist.external else message


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 file', '2 files'; MANY for words that do not just take an 's' (directories)."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def are(n: int) -> str:
    return "is" if n == 1 else "are"
