"""Requirements as the installed metadata states them, markers evaluated for the target.

``RequirementIndex`` answers who requires a distribution (markers evaluated for the target's
Python, not ours) and which exact pins (``==``) a framework makes, directly or through the
extras of a metapackage it requires (torch → ``cuda-toolkit[cublas]==13.0.3`` →
``nvidia-cublas==13.1.1.3.*``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor.environment.distributions import Distribution, canonicalize_name

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from libdoctor.environment.model import Environment
    from libdoctor.environment.target import Target

__all__ = ["Pin", "RequirementIndex", "marker_environment"]


def marker_environment(target: Target) -> dict[str, str]:
    """PEP 508 marker values for the target: this machine, the target's Python version."""
    from packaging.markers import default_environment

    env = {k: str(v) for k, v in default_environment().items()}
    if target.python_version is not None:
        major, minor = target.python_version
        env["python_version"] = f"{major}.{minor}"
        if not env.get("python_full_version", "").startswith(f"{major}.{minor}."):
            env["python_full_version"] = f"{major}.{minor}.0"
    return env


@dataclass(frozen=True, slots=True)
class Pin:
    """An exact requirement (``==V`` or ``==V.*``) a framework makes on a distribution."""

    by: Distribution  # the framework distribution
    name: str  # as written in Requires-Dist
    key: str
    specifier: str  # "==9.10.2.21"
    via: str | None  # "cuda-toolkit[cublas]" when reached through a metapackage's extra
    installed: tuple[Distribution, ...]  # installed distributions of that name

    @property
    def requirement(self) -> str:
        return f"{self.name}{self.specifier}"

    @property
    def satisfied(self) -> bool:
        return any(_version_in(d.version, self.specifier) for d in self.installed)


def _version_in(version: str, specifier: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(specifier).contains(version, prereleases=True)
    except InvalidSpecifier:
        return False


def _exact(req: Requirement) -> str | None:
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "==="):
        return str(specs[0])
    return None


class RequirementIndex:
    """Requires-Dist of the installed distributions, parsed on demand, markers evaluated.

    Lazy on purpose: a torch env has ~300 requirement strings, and most checks need only the
    framework's own and those of the metapackages it names.
    """

    def __init__(self, env: Environment) -> None:
        self._env = env
        self._markers: dict[str, str] | None = None  # packaging.markers only when needed
        self._by_key: dict[str, list[Distribution]] = defaultdict(list)
        for dist in env.distributions:
            self._by_key[dist.key].append(dist)
        self._parsed: dict[str, list[Requirement]] = {}
        self._required_by: dict[str, list[Distribution]] | None = None
        self._pins: dict[str, list[Pin]] = {}

    def _requirements(self, dist: Distribution) -> list[Requirement]:
        from packaging.requirements import InvalidRequirement, Requirement

        parsed = self._parsed.get(dist.metadata_dir)
        if parsed is None:
            parsed = []
            for text in dist.requires_dist:
                try:
                    parsed.append(Requirement(text))
                except InvalidRequirement:
                    continue
            self._parsed[dist.metadata_dir] = parsed
        return parsed

    def _applies(self, req: Requirement, extra: str) -> bool:
        if req.marker is None:
            return True
        try:
            if self._markers is None:
                self._markers = marker_environment(self._env.target)
            return bool(req.marker.evaluate({**self._markers, "extra": extra}))
        except Exception:  # an undefined marker variable: treat as not applying
            return False

    def installed(self, key: str) -> tuple[Distribution, ...]:
        return tuple(self._by_key.get(key, ()))

    def required_by(self, dist: Distribution) -> list[Distribution]:
        """Installed distributions whose (unconditional) requirements name DIST."""
        if self._required_by is None:
            required: dict[str, list[Distribution]] = defaultdict(list)
            for other in self._env.distributions:
                for req in self._requirements(other):
                    if self._applies(req, ""):
                        required[canonicalize_name(req.name)].append(other)
            self._required_by = required
        return [d for d in self._required_by.get(dist.key, []) if d is not dist]

    def pins(self, dist: Distribution) -> list[Pin]:
        """DIST's exact pins, and those of the extras it asks of the packages it requires.

        One level of extras: torch → cuda-toolkit[cublas] → nvidia-cublas==13.1.1.3.*.
        """
        cached = self._pins.get(dist.metadata_dir)
        if cached is not None:
            return cached
        pins: list[Pin] = []
        seen: set[tuple[str, str]] = set()

        def add(req: Requirement, via: str | None) -> None:
            spec = _exact(req)
            key = canonicalize_name(req.name)
            if spec is None or (key, spec) in seen:
                return
            seen.add((key, spec))
            pins.append(Pin(dist, req.name, key, spec, via, self.installed(key)))

        for req in self._requirements(dist):
            if not self._applies(req, ""):
                continue
            add(req, None)
            for extra in sorted(req.extras):
                for provider in self.installed(canonicalize_name(req.name)):
                    for sub in self._requirements(provider):
                        # Only what the extra adds, not the metapackage's own requirements;
                        # the text test spares evaluating every marker for every extra.
                        if (
                            sub.marker is not None
                            and canonicalize_name(extra) in canonicalize_name(str(sub.marker))
                            and self._applies(sub, extra)
                            and not self._applies(sub, "")
                        ):
                            add(sub, f"{provider.name}[{extra}]")
        self._pins[dist.metadata_dir] = pins
        return pins
