"""Which CUDA each framework was built for, read statically, as data.

torch's ``torch/version.py`` is parsed (``ast``), never imported; jax CUDA plugins and cupy
say their CUDA major in their distribution name. ``FRAMEWORKS`` is the registry: adding a
framework is one entry (how to recognise its distribution, how to read its build, which
module ``libdoctor probe`` imports and which facts it asks for).
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor.environment.distributions import Distribution

if TYPE_CHECKING:
    from libdoctor.environment.model import Environment

__all__ = [
    "FRAMEWORKS",
    "FrameworkBuild",
    "FrameworkSpec",
    "detect_frameworks",
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
