"""Which CUDA each framework was built for, and which CUDA each CUDA package is for.

Read statically, as data: torch's ``torch/version.py`` is parsed (``ast``), never imported;
jax CUDA plugins and cupy say their CUDA major in their distribution name. ``FRAMEWORKS``
is the registry: adding a framework is one entry (how to recognise its distribution, how to
read its build, which module ``libdoctor probe`` imports and which facts it asks for).

The CUDA major of an ``nvidia-*`` distribution comes from real evidence only, strongest
first (``MAJOR_RULES``): the ``-cuNN`` name suffix; files under ``nvidia/cuNN/`` (the
suffix-less CUDA 13 toolkit wheels); a library file whose soname tracks the CUDA major
(``libcudart.so.13``, ``libcublas.so.12``...). A version number alone is not evidence:
``nvidia-cufft 12.x`` is CUDA 13's cuFFT.

Requirements: ``RequirementIndex`` answers who requires a distribution (markers evaluated
for the target's Python) and which exact pins (``==``) a framework makes, directly or
through the extras of a metapackage it requires (torch → ``cuda-toolkit[cublas]==13.0.3``
→ ``nvidia-cublas==13.1.1.3.*``).
"""

from __future__ import annotations

import ast
import os
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor.environment.distributions import Distribution, canonicalize_name

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from libdoctor.environment.model import Environment
    from libdoctor.environment.target import Target

__all__ = [
    "FRAMEWORKS",
    "MAJOR_RULES",
    "CudaPackage",
    "FrameworkBuild",
    "FrameworkSpec",
    "Pin",
    "RequirementIndex",
    "cuda_major_of",
    "cuda_packages",
    "detect_frameworks",
    "marker_environment",
    "parse_cupy_name",
    "parse_torch_version_py",
    "read_file",
]

Reader = Callable[[str], "bytes | None"]
"""Reads a whole file; None when it does not exist or cannot be read."""


def read_file(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------- frameworks


@dataclass(frozen=True, slots=True)
class FrameworkBuild:
    """One installed framework distribution and the CUDA it was built for."""

    framework: str  # registry name: "torch", "jax", "cupy"
    dist: Distribution
    module: str  # what `import` loads it by
    version: str  # the framework's own version string (torch: __version__, with +cu130)
    cuda: str | None  # "13.0", "12" ...; None: not a CUDA build (CPU, ROCm) or unreadable
    source: str  # where ``cuda`` was read: "torch/version.py", "distribution name"
    problem: str | None = None  # why the build could not be read

    @property
    def cuda_major(self) -> int | None:
        if self.cuda is None:
            return None
        head = self.cuda.split(".", 1)[0]
        return int(head) if head.isdigit() else None

    @property
    def display(self) -> str:
        cuda = f"CUDA {self.cuda}" if self.cuda else "no CUDA"
        return f"{self.dist.name} {self.version} ({cuda})"


@dataclass(frozen=True, slots=True)
class FrameworkSpec:
    """How to recognise one framework and read its build. One registry entry per framework."""

    name: str
    module: str  # imported by ``libdoctor probe``
    matches: Callable[[str], bool]  # canonical distribution name -> is it this framework?
    read: Callable[[Distribution, Reader], FrameworkBuild]
    # Facts ``libdoctor probe`` asks the imported module for: (name, expression). Each is
    # evaluated in the child with the module bound to its name, inside try/except.
    facts: tuple[tuple[str, str], ...] = ()


def _assigned_strings(tree: ast.Module, names: Iterable[str]) -> dict[str, str | None]:
    """Module-level ``NAME = 'text'`` / ``NAME: T = None`` assignments of constant values."""
    wanted = set(names)
    found: dict[str, str | None] = {}
    for node in tree.body:
        targets: list[ast.expr]
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if not isinstance(value, ast.Constant) or not (
            value.value is None or isinstance(value.value, str)
        ):
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in wanted:
                found[target.id] = value.value
    return found


def parse_torch_version_py(data: bytes) -> tuple[dict[str, str | None], str | None]:
    """``(values, problem)``: ``__version__``, ``cuda``, ``hip`` from torch/version.py's text."""
    try:
        tree = ast.parse(data.decode("utf-8", "replace"))
    except (SyntaxError, ValueError) as exc:
        return {}, f"torch/version.py does not parse: {exc}"
    values = _assigned_strings(tree, ("__version__", "cuda", "hip"))
    if "__version__" not in values:
        return values, "torch/version.py assigns no __version__"
    if "cuda" not in values:
        return values, "torch/version.py assigns no cuda"
    return values, None


def _record_path(dist: Distribution, relative: str) -> str | None:
    """Absolute path of RELATIVE if DIST's RECORD lists it."""
    if dist.record is None:
        return None
    for entry in dist.record.entries:
        if entry.path == relative:
            return os.path.join(dist.base_dir, relative)
    return None


def _read_torch(dist: Distribution, reader: Reader) -> FrameworkBuild:
    path = _record_path(dist, "torch/version.py") or os.path.join(
        dist.base_dir, "torch", "version.py"
    )
    data = reader(path)
    if data is None:
        return FrameworkBuild(
            "torch", dist, "torch", dist.version, None, "torch/version.py",
            problem="torch/version.py cannot be read",
        )  # fmt: skip
    values, problem = parse_torch_version_py(data)
    version = values.get("__version__") or dist.version
    cuda = values.get("cuda")
    if values.get("hip"):
        cuda = None  # a ROCm build: no CUDA libraries
    return FrameworkBuild("torch", dist, "torch", version, cuda, "torch/version.py", problem)


_JAX_PLUGIN = re.compile(r"^jax-cuda(\d+)-(?:plugin|pjrt)$")


def _read_jax_plugin(dist: Distribution, reader: Reader) -> FrameworkBuild:
    match = _JAX_PLUGIN.match(dist.key)
    cuda = match[1] if match else None
    return FrameworkBuild("jax", dist, "jax", dist.version, cuda, "distribution name")


def parse_cupy_name(key: str) -> str | None:
    """CUDA version in a cupy distribution name: cupy-cuda12x → "12", cupy-cuda102 → "10.2"."""
    match = re.match(r"^cupy-cuda(\d+)(x?)$", key)
    if match is None:
        return None
    digits, wildcard = match[1], match[2]
    if wildcard:
        return digits
    if len(digits) < 2:
        return None
    return f"{digits[:-1]}.{digits[-1]}"


def _read_cupy(dist: Distribution, reader: Reader) -> FrameworkBuild:
    return FrameworkBuild("cupy", dist, "cupy", dist.version, parse_cupy_name(dist.key), "name")


FRAMEWORKS: tuple[FrameworkSpec, ...] = (
    FrameworkSpec(
        name="torch",
        module="torch",
        matches=lambda key: key == "torch",
        read=_read_torch,
        facts=(
            ("version", "torch.__version__"),
            ("cuda", "torch.version.cuda"),
            ("cudnn", "torch.backends.cudnn.version()"),
            ("cuda_available", "torch.cuda.is_available()"),
        ),
    ),
    FrameworkSpec(
        name="jax",
        module="jax",
        matches=lambda key: _JAX_PLUGIN.match(key) is not None,
        read=_read_jax_plugin,
        facts=(("version", "jax.__version__"), ("backend", "jax.default_backend()")),
    ),
    FrameworkSpec(
        name="cupy",
        module="cupy",
        matches=lambda key: parse_cupy_name(key) is not None,
        read=_read_cupy,
        facts=(
            ("version", "cupy.__version__"),
            ("cuda_runtime", "cupy.cuda.runtime.runtimeGetVersion()"),
        ),
    ),
)


def framework_spec(name: str) -> FrameworkSpec | None:
    return next((spec for spec in FRAMEWORKS if spec.name == name), None)


def detect_frameworks(env: Environment, reader: Reader = read_file) -> list[FrameworkBuild]:
    """Every installed framework distribution, in environment order."""
    builds = []
    for dist in env.distributions:
        for spec in FRAMEWORKS:
            if spec.matches(dist.key):
                builds.append(spec.read(dist, reader))
                break
    return builds


# --------------------------------------------------------------------------- CUDA packages


@dataclass(frozen=True, slots=True)
class CudaPackage:
    """A distribution built for one CUDA major, and the evidence that says so."""

    dist: Distribution
    major: int
    evidence: str


# Libraries whose soname number is the CUDA major they belong to.
_TRACKS_CUDA = re.compile(r"^lib(cudart|cublas|cublasLt|nvblas|nvrtc|nvJitLink|cupti)\.so\.(\d+)")
# Libraries whose soname number differs from the CUDA major, where one value is unambiguous.
_SONAME_MAJOR: Mapping[str, int] = {
    "libcufft.so.11": 12,
    "libcufft.so.12": 13,
    "libcusolver.so.12": 13,
}
# Distributions versioned with the CUDA toolkit by NVIDIA's own scheme (the version is the CUDA
# version by definition, unlike the nvidia-* library wheels).
_VERSIONED_WITH_CUDA = frozenset({"cuda-toolkit", "cuda-bindings", "cuda-python"})
_CU_SUFFIX = re.compile(r"-cu(\d+)$")
_CU_DIR = re.compile(r"(?:^|/)nvidia/cu(\d+)/")


def _paths(dist: Distribution) -> tuple[str, ...]:
    return tuple(e.path for e in dist.record.entries) if dist.record is not None else ()


def _by_suffix(dist: Distribution) -> tuple[int, str] | None:
    match = _CU_SUFFIX.search(dist.key)
    return (int(match[1]), f"name suffix -cu{match[1]}") if match else None


def _by_cu_dir(dist: Distribution) -> tuple[int, str] | None:
    for path in _paths(dist):
        match = _CU_DIR.search(path)
        if match:
            return int(match[1]), f"files in nvidia/cu{match[1]}/ ({path})"
    return None


def _by_soname(dist: Distribution) -> tuple[int, str] | None:
    for path in _paths(dist):
        name = path.rpartition("/")[2]
        match = _TRACKS_CUDA.match(name)
        if match:
            return int(match[2]), f"ships {name}"
        if name in _SONAME_MAJOR:
            return _SONAME_MAJOR[name], f"ships {name}"
    return None


def _by_cuda_version(dist: Distribution) -> tuple[int, str] | None:
    if dist.key not in _VERSIONED_WITH_CUDA:
        return None
    head = dist.version.split(".", 1)[0]
    if not head.isdigit():
        return None
    return int(head), f"{dist.name} is versioned with CUDA ({dist.version})"


MAJOR_RULES: tuple[Callable[[Distribution], tuple[int, str] | None], ...] = (
    _by_suffix,
    _by_cu_dir,
    _by_soname,
    _by_cuda_version,
)
"""Tried in order; the first that answers decides."""


def is_cuda_package_name(key: str) -> bool:
    return key.startswith("nvidia-") or key in _VERSIONED_WITH_CUDA


def cuda_major_of(dist: Distribution) -> CudaPackage | None:
    """The CUDA major of an nvidia-* (or cuda-toolkit-like) distribution, from evidence."""
    if not is_cuda_package_name(dist.key):
        return None
    for rule in MAJOR_RULES:
        found = rule(dist)
        if found is not None:
            return CudaPackage(dist, found[0], found[1])
    return None


def cuda_packages(env: Environment) -> list[CudaPackage]:
    return [p for d in env.distributions if (p := cuda_major_of(d)) is not None]


# --------------------------------------------------------------------------- requirements


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
