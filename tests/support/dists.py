"""Distribution values made in memory, for the pure parts of the checks (no venv, no pip)."""

from __future__ import annotations

from collections.abc import Sequence

from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.model import Environment
from libdoctor.environment.record import ParsedRecord, RecordEntry
from libdoctor.environment.target import SiteDir, Target


def fake_dist(
    name: str,
    version: str,
    paths: Sequence[str] = (),
    requires: Sequence[str] = (),
    site: str = "/env/site",
) -> Distribution:
    """A pip-installed distribution whose RECORD lists PATHS (size 1, no hash)."""
    key = canonicalize_name(name)
    return Distribution(
        name=name,
        version=version,
        key=key,
        metadata_dir=f"{site}/{key}-{version}.dist-info",
        kind="dist-info",
        site=SiteDir(site, "/env"),
        base_dir=site,
        installer="pip",
        requires_dist=tuple(requires),
        record=ParsedRecord(tuple(RecordEntry(p, None, 1) for p in paths), ()),
        record_error=None,
    )


def env_of(*dists: Distribution, python: tuple[int, int] = (3, 11)) -> Environment:
    """A venv at /env holding DISTS (site /env/site), over a base interpreter's /base/site."""
    sites = (SiteDir("/env/site", "/env"), SiteDir("/base/site", "/base", inherited=True))
    target = Target("/env", "/env/bin/python", sites, "test", python)
    return Environment(target=target, distributions=dists, claims={}, escaping=(), by_dist={})
