"""Requirements as the installed metadata states them, markers evaluated for the target.

``RequirementIndex`` reads every ``Requires-Dist`` of every installed distribution (parsed on
demand, once), with markers evaluated for the target's Python, not ours, and with the extras
each distribution is installed with active. pip and uv record that a distribution was asked
for (``REQUESTED``), never with which extras, so an extra is active when:

- *requested*: an applicable requirement of another installed distribution asks for it
  (``jax[cuda12]`` in a requirement activates jax's ``cuda12``, whose requirements apply in
  turn: ``jax-cuda12-plugin[with-cuda]`` ...). Reached from unconditional requirements only,
  these are *certain*: what ``libdoctor check`` holds the environment to (``dependencies``).
- *inferred*: every requirement the extra adds is installed (``pip install 'jax[cuda12]'``
  leaves no other trace). Such requirements, and the extras they request, only say what the
  environment uses (``required_by``: which copy of a shared path to keep, what is a
  leftover); they are never reported as broken, since the guess may be wrong
  (``jax[cuda12-local]`` installs the same packages as ``jax[cuda12]`` minus the CUDA wheels).

It also answers which exact pins (``==``) a framework makes, directly or through the extras
of a metapackage it requires (torch → ``cuda-toolkit[cublas]==13.0.3`` →
``nvidia-cublas==13.1.1.3.*``).
"""

from __future__ import annotations

import os
import re
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from libdoctor.environment.distributions import Distribution, canonicalize_name
from libdoctor.environment.rooted import Rooted

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from libdoctor.environment.model import Environment
    from libdoctor.environment.target import Target

__all__ = [
    "EXTRA_ONLY",
    "ActiveExtra",
    "Dependency",
    "Pin",
    "RequirementIndex",
    "Requirers",
    "marker_environment",
    "parse_requirement",
    "version_in",
]

# An extra named in a marker, either way round: ``extra == "cuda12"``, ``"cuda12" == extra``.
_EXTRA_IN_MARKER = re.compile(
    r"""\bextra\s*==\s*["']([^"']+)["']|["']([^"']+)["']\s*==\s*extra\b"""
)

# The plainest requirement under the plainest marker: a name, extras, plain-release version
# specifiers, ``; extra == "name"``. Every line this matches is valid PEP 508 (the property
# tests hold it to packaging's parser) and applies only with its extra, so it is parsed only
# once that extra is active: two in three lines of a torch env are extras nobody asked for.
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_RELEASE = r"[0-9]+(?:\.[0-9]+)*"
_SPEC = rf"(?:(?:==|!=)\s*{_RELEASE}(?:\.\*)?|(?:>=|<=|>|<)\s*{_RELEASE}|~=\s*[0-9]+(?:\.[0-9]+)+)"
EXTRA_ONLY = re.compile(
    rf"^\s*{_NAME}\s*(?:\[\s*(?:{_NAME}(?:\s*,\s*{_NAME})*)?\s*\])?\s*"
    rf"(?:{_SPEC}(?:\s*,\s*{_SPEC})*)?"
    rf"""\s*;\s*extra\s*==\s*(?P<q>["'])(?P<extra>{_NAME})(?P=q)\s*$"""
)


def marker_environment(target: Target) -> dict[str, str]:
    """PEP 508 marker values for the target: this machine, the target's Python version.

    python_full_version is the target's own (pyvenv.cfg, or what its interpreter reported):
    a ``python_full_version < '3.11.3'`` (redis on async-timeout) is true in a 3.11.2 venv
    whoever reads it. Only when the target states no micro version does the running
    interpreter's stand in (same X.Y), else X.Y.0."""
    from packaging.markers import default_environment

    env = {k: str(v) for k, v in default_environment().items()}
    if target.python_version is not None:
        major, minor = target.python_version
        env["python_version"] = f"{major}.{minor}"
        if target.python_full_version is not None:
            env["python_full_version"] = target.python_full_version
        elif not env.get("python_full_version", "").startswith(f"{major}.{minor}."):
            env["python_full_version"] = f"{major}.{minor}.0"
    return env


def version_in(version: str, specifier: str) -> bool:
    """VERSION satisfies SPECIFIER, pre-releases included (as ``pip check`` compares); a
    version that is not PEP 440 satisfies no specifier but the empty one."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(specifier).contains(version, prereleases=True)
    except (InvalidSpecifier, ValueError):
        return False


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
        return any(version_in(d.version, self.specifier) for d in self.installed)


@dataclass(frozen=True, slots=True)
class Dependency:
    """One applicable requirement of an installed distribution, as its metadata states it."""

    requirer: Distribution
    name: str  # as written
    key: str  # canonical
    extras: tuple[str, ...]  # the extras it asks of the required distribution (normalised)
    specifier: str  # "" for any version
    url: str | None  # a direct reference (``name @ url``)
    marker: str | None  # the whole marker, as packaging writes it
    extra: str | None  # the requirer's extra that makes it apply; None: unconditional
    certain: bool  # unconditional, or through an extra a certain requirement requests

    @property
    def requirement(self) -> str:
        """The requirement without its marker: ``jax-cuda12-plugin[with-cuda]==0.4.35``."""
        extras = f"[{','.join(self.extras)}]" if self.extras else ""
        if self.url:
            return f"{self.name}{extras} @ {self.url}"
        return f"{self.name}{extras}{self.specifier}"

    def accepts(self, version: str) -> bool:
        return self.url is not None or not self.specifier or version_in(version, self.specifier)


@dataclass(frozen=True, slots=True)
class ActiveExtra:
    """An extra a distribution is installed with, and the evidence that says so."""

    dist: Distribution
    name: str  # normalised
    requested_by: tuple[Dependency, ...]  # requirements asking for it; () when only inferred
    inferred: bool  # every requirement it adds is installed
    requested_directly: bool = field(default=False)  # REQUESTED: the user asked for DIST

    @property
    def certain(self) -> bool:
        return any(dep.certain for dep in self.requested_by)

    @property
    def evidence(self) -> str:
        """ "requested as jax[cuda12] by foo 1.0", or "inferred: ... are installed"."""
        if self.requested_by:
            first = self.requested_by[0]
            more = len({d.requirer.metadata_dir for d in self.requested_by}) - 1
            text = f"requested as {first.name}[{self.name}] by {first.requirer.display}"
            return text + (f" and {more} more" if more > 0 else "")
        # pip and uv write REQUESTED for what the user asked for, never with which extras.
        asked = f"{self.dist.name} was requested directly and " if self.requested_directly else ""
        return f"inferred: {asked}all of {self.name}'s requirements are installed"


def _exact(req: Requirement) -> str | None:
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "==="):
        return str(specs[0])
    return None


@dataclass(slots=True)
class _Parsed:
    """One distribution's Requires-Dist, parsed: what applies without extras, what each
    extra adds (filled in on demand), and the lines that do not parse."""

    base: list[Requirement]
    conditional: list[Requirement]  # markers that do not hold without an extra
    deferred: dict[str, list[str]]  # extra -> EXTRA_ONLY lines, not parsed yet
    invalid: list[tuple[str, str]]  # (line, why)
    by_extra: dict[str, list[Requirement]] | None = None


@dataclass(frozen=True, slots=True)
class Requirers:
    """Who requires a distribution (``required_by``) and how, as said (``requirers_text``;
    "" when nothing does)."""

    dists: tuple[Distribution, ...]
    text: str


class RequirementIndex:
    """Requires-Dist of the installed distributions, parsed on demand, markers evaluated.

    Lazy on purpose: most checks need only a framework's own requirements and those of the
    metapackages it names; ``dependencies`` (every distribution's certain requirements)
    and ``required_by`` (what uses a distribution, inferred extras included) are computed
    the first time they are asked for.
    """

    def __init__(self, env: Environment) -> None:
        self._env = env
        self._markers: dict[str, str] | None = None  # packaging.markers only when needed
        self._by_key: dict[str, list[Distribution]] = defaultdict(list)
        for dist in env.distributions:
            self._by_key[dist.key].append(dist)
        self._parsed: dict[str, _Parsed] = {}
        self._pins: dict[str, list[Pin]] = {}
        self._deps: dict[str, list[Dependency]] = defaultdict(list)  # metadata_dir -> applicable
        self._certain = False  # the certain requirements followed
        self._extras: dict[tuple[str, str], list[Dependency]] = {}  # (dir, extra) -> requesters
        self._inferred: set[tuple[str, str]] = set()
        self._possible = False  # inferred extras followed
        self._required_by: dict[str, list[Dependency]] | None = None

    # ----------------------------------------------------------------------- parsing

    def _parse(self, dist: Distribution) -> _Parsed:
        parsed = self._parsed.get(dist.metadata_dir)
        if parsed is None:
            parsed = _Parsed([], [], defaultdict(list), [])
            for text in dist.requires_dist:
                plain = EXTRA_ONLY.match(text)
                if plain is not None:
                    parsed.deferred[canonicalize_name(plain["extra"])].append(text)
                    continue
                req = parse_requirement(text, parsed.invalid)
                if req is not None:
                    (parsed.base if self._applies(req, "") else parsed.conditional).append(req)
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

    def _by_extra(self, dist: Distribution) -> dict[str, list[Requirement]]:
        """What each extra of DIST adds to its own requirements (markers evaluated here)."""
        parsed = self._parse(dist)
        if parsed.by_extra is None:
            by_extra: dict[str, list[Requirement]] = defaultdict(list)
            for extra, lines in parsed.deferred.items():
                for text in lines:
                    req = parse_requirement(text, parsed.invalid)
                    if req is not None and self._applies(req, extra):
                        by_extra[extra].append(req)
            for req in parsed.conditional:
                for name in extras_named(str(req.marker)):
                    if self._applies(req, name):
                        by_extra[name].append(req)
            parsed.by_extra = dict(by_extra)
        return parsed.by_extra

    def extra_requirements(self, dist: Distribution) -> dict[str, list[str]]:
        """extra of DIST -> the canonical names it adds to DIST's requirements."""
        return {
            extra: [canonicalize_name(req.name) for req in reqs]
            for extra, reqs in self._by_extra(dist).items()
        }

    def invalid(self, dist: Distribution) -> list[tuple[str, str]]:
        """DIST's Requires-Dist lines that do not parse, with why."""
        return self._parse(dist).invalid

    # ----------------------------------------------------------------------- what is installed

    def installed(self, key: str) -> tuple[Distribution, ...]:
        return tuple(self._by_key.get(key, ()))

    def visible(self, key: str) -> tuple[Distribution, ...]:
        """The copies of KEY an import finds: those of the first site dir (in the target's
        order) holding any; the others are shadowed."""
        found = self._by_key.get(key, ())
        for site in self._env.target.site_dirs:
            here = tuple(d for d in found if d.site.path == site.path)
            if here:
                return here
        return tuple(found)

    # ----------------------------------------------------------------------- dependencies

    def dependencies(self, dist: Distribution) -> list[Dependency]:
        """DIST's certain requirements: unconditional, or through an extra that a certain
        requirement (of any installed distribution) requests."""
        return [d for d in self._all_deps().get(dist.metadata_dir, ()) if d.certain]

    def _all_deps(self) -> dict[str, list[Dependency]]:
        """Every distribution's applicable requirements; the certain ones on first use."""
        if not self._certain:
            self._certain = True
            queue: deque[Dependency] = deque()
            for other in self._env.distributions:
                for req in self._parse(other).base:
                    queue.append(self._add(other, req, None, certain=True))
            self._follow(queue, certain=True)
        return self._deps

    def _add(
        self, dist: Distribution, req: Requirement, extra: str | None, certain: bool
    ) -> Dependency:
        dep = Dependency(
            requirer=dist,
            name=req.name,
            key=canonicalize_name(req.name),
            extras=tuple(sorted({canonicalize_name(e) for e in req.extras})),
            specifier=str(req.specifier),
            url=req.url or None,
            marker=str(req.marker) if req.marker is not None else None,
            extra=extra,
            certain=certain,
        )
        self._deps[dist.metadata_dir].append(dep)
        return dep

    def _follow(self, queue: deque[Dependency], certain: bool) -> None:
        """Activate the extras the queued requirements request, and queue what they add."""
        while queue:
            dep = queue.popleft()
            for extra in dep.extras:
                for provider in self.installed(dep.key):
                    if self._activate(provider, extra, dep):
                        for req in self._by_extra(provider).get(extra, []):
                            queue.append(self._add(provider, req, extra, certain))

    def _activate(self, dist: Distribution, extra: str, by: Dependency | None) -> bool:
        """Record BY (None: inferred) as evidence for DIST[EXTRA]; True if newly active."""
        key = (dist.metadata_dir, extra)
        known = key in self._extras
        requesters = self._extras.setdefault(key, [])
        if by is None:
            self._inferred.add(key)
        else:
            requesters.append(by)
        return not known

    def _follow_inferred(self) -> None:
        """Infer extras until nothing changes: each one whose added requirements are all
        installed, and what those request in turn (none of it certain)."""
        if self._possible:
            return
        self._all_deps()
        self._possible = True
        changed = True
        while changed:
            changed = False
            for dist in self._env.distributions:
                for extra, added in sorted(self._by_extra(dist).items()):
                    if (dist.metadata_dir, extra) in self._extras:
                        continue
                    if all(self._by_key.get(canonicalize_name(r.name)) for r in added):
                        self._activate(dist, extra, None)
                        queue = deque(self._add(dist, r, extra, certain=False) for r in added)
                        self._follow(queue, certain=False)
                        changed = True

    def extras(self, dist: Distribution) -> list[ActiveExtra]:
        """The extras DIST is installed with, requested or inferred, with the evidence."""
        self._follow_inferred()
        direct = Rooted(dist.site.root).exists(os.path.join(dist.metadata_dir, "REQUESTED"))
        return [
            ActiveExtra(dist, key[1], tuple(by), key in self._inferred, direct)
            for key, by in sorted(self._extras.items())
            if key[0] == dist.metadata_dir
        ]

    def active_extra(self, dist: Distribution, extra: str) -> ActiveExtra | None:
        return next((e for e in self.extras(dist) if e.name == extra), None)

    def requirements_on(self, dist: Distribution) -> list[Dependency]:
        """Every requirement naming DIST by another distribution: unconditional, through
        requested extras and through inferred ones."""
        if self._required_by is None:
            self._follow_inferred()
            required: dict[str, list[Dependency]] = defaultdict(list)
            for deps in self._deps.values():
                for dep in deps:
                    required[dep.key].append(dep)
            self._required_by = required
        return [d for d in self._required_by.get(dist.key, []) if d.requirer is not dist]

    def required_by(self, dist: Distribution) -> list[Distribution]:
        """Installed distributions that require DIST, through any active extra too."""
        found = {d.requirer.metadata_dir: d.requirer for d in self.requirements_on(dist)}
        return list(found.values())

    def requirers_text(self, dist: Distribution) -> str:
        """Who requires DIST and how: "torchlike (cudnn-a==9.1.0)", "jax-cuda12-plugin
        (nvidia-cudnn-cu12<10,>=9.1 through its extra with-cuda, inferred: ...)"."""
        parts: dict[str, None] = {}
        for dep in self.requirements_on(dist):
            why = self.why(dep) if dep.extra is not None else ""
            parts[f"{dep.requirer.name} ({dep.requirement}{' ' + why if why else ''})"] = None
        return ", ".join(sorted(parts))

    def requirers(self, dist: Distribution) -> Requirers:
        """``required_by`` and ``requirers_text`` of DIST, in one value."""
        dists = tuple(self.required_by(dist))
        return Requirers(dists, self.requirers_text(dist) if dists else "")

    def why(self, dep: Dependency) -> str:
        """What made DEP apply: "" when unconditional, else its extra and that extra's
        evidence, and any further condition of its marker."""
        parts = []
        if dep.extra is not None:
            active = self.active_extra(dep.requirer, dep.extra)
            evidence = f", {active.evidence}" if active is not None else ""
            parts.append(f"through its extra {dep.extra}{evidence}")
        if dep.marker and dep.marker != f'extra == "{dep.extra}"':
            parts.append(f"where {dep.marker}")
        return "; ".join(parts)

    # ----------------------------------------------------------------------- pins

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

        for req in self._parse(dist).base:
            add(req, None)
            for extra in sorted(req.extras):
                for provider in self.installed(canonicalize_name(req.name)):
                    for sub in self._by_extra(provider).get(canonicalize_name(extra), []):
                        add(sub, f"{provider.name}[{extra}]")
        self._pins[dist.metadata_dir] = pins
        return pins


def parse_requirement(text: str, invalid: list[tuple[str, str]]) -> Requirement | None:
    """TEXT parsed by packaging; None, with why appended to INVALID, when it does not parse."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        invalid.append((text, str(exc).splitlines()[0]))
        return None


def extras_named(marker: str) -> list[str]:
    """The extras a marker's text names, normalised (``extra == "with_cuda"`` → with-cuda)."""
    return sorted({canonicalize_name(a or b) for a, b in _EXTRA_IN_MARKER.findall(marker)})
