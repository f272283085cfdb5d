"""Which CUDA each framework was built for, read statically, as data.

Nothing is imported; each framework's build is read from what its wheel ships:

- torch (``torch``): ``torch/version.py``'s ``cuda`` (``hip`` set: a ROCm build), ``ast``-parsed.
- TensorFlow (``tensorflow``, ``tensorflow-cpu``, ``tf-nightly``, ``tf-nightly-cpu``):
  ``tensorflow/python/platform/build_info.py``, whose ``build_info`` dict says
  ``is_cuda_build``, ``cuda_version`` and ``cudnn_version`` (the CPU wheels: no CUDA).
- jax (``jax-cuda12-plugin``, ``jax-cuda13-plugin`` and their ``-pjrt``): the CUDA major is in
  the distribution name; jax itself is the same wheel for every backend.
- onnxruntime (``onnxruntime-gpu``): ``onnxruntime/capi/build_and_package_info.py``'s
  ``cuda_version`` (1.21 on); older wheels lack that file, and the CUDA major is read from
  the libraries ``libonnxruntime_providers_cuda.so`` needs (``libcublasLt.so.11`` ...).
- cupy (``cupy-cuda11x``, ``cupy-cuda12x``, ``cupy-cuda13x``, older ``cupy-cuda102``...):
  the distribution name.

``FRAMEWORKS`` is the registry: adding a framework is one entry (how to recognise its
distribution, how to read its build, which module ``libdoctor probe`` imports and which facts
it asks for). The facts are what the framework tells without a GPU: versions, the CUDA and
cuDNN it was built with or loaded, and whether it sees a device.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from libdoctor import bounded
from libdoctor.elf.dynamic import ElfFormatError, read_elf
from libdoctor.environment.distributions import Distribution
from libdoctor.environment.rooted import HOST, Rooted
from libdoctor.stack.cuda import soname_major

if TYPE_CHECKING:
    from libdoctor.environment.model import Environment

__all__ = [
    "FRAMEWORKS",
    "FrameworkBuild",
    "FrameworkSpec",
    "detect_frameworks",
    "env_reader",
    "parse_cupy_name",
    "parse_onnxruntime_info",
    "parse_tf_build_info",
    "parse_torch_version_py",
    "read_file",
]

Reader = Callable[[str], "bytes | None"]
"""Reads a whole file; None when it does not exist or cannot be read."""


def read_file(path: str, files: Rooted = HOST) -> bytes | None:
    """A small file (a version module, a cache's metadata) or None: absent, unreadable, or
    refused (past MAX_SMALL_FILE_BYTES, or a FIFO or device a cache entry links to); in
    an image (``--root``) every symlink resolved inside it."""
    try:
        return bounded.read_file(files.host(path), bounded.MAX_SMALL_FILE_BYTES)
    except (OSError, ValueError):
        return None


def env_reader(env: Environment) -> Reader:
    """``read_file`` in the system ENV is read in (``--root``)."""
    if env.target.root == "/":
        return read_file
    files = Rooted(env.target.root)
    return lambda path: read_file(path, files)


# --------------------------------------------------------------------------- frameworks


@dataclass(frozen=True, slots=True)
class FrameworkBuild:
    """One installed framework distribution and the CUDA it was built for."""

    framework: str  # registry name: "torch", "tensorflow", "jax", "onnxruntime", "cupy"
    dist: Distribution
    module: str  # what `import` loads it by
    version: str  # the framework's own version string (torch: __version__, with +cu130)
    cuda: str | None  # "13.0", "12" ...; None: not a CUDA build (CPU, ROCm) or unreadable
    source: str  # where ``cuda`` was read: "torch/version.py", "distribution name", ...
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


def _shipped_path(dist: Distribution, relative: str) -> str:
    """Absolute path of RELATIVE (a path inside DIST's site dir)."""
    return os.path.join(dist.base_dir, *relative.split("/"))


def _read_torch(dist: Distribution, reader: Reader) -> FrameworkBuild:
    data = reader(_shipped_path(dist, "torch/version.py"))
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


_TENSORFLOW = frozenset({"tensorflow", "tensorflow-cpu", "tf-nightly", "tf-nightly-cpu"})
TF_BUILD_INFO = "tensorflow/python/platform/build_info.py"


def parse_tf_build_info(data: bytes) -> tuple[dict[str, object], str | None]:
    """``(build_info, problem)`` from build_info.py's ``build_info = collections.OrderedDict(
    [(key, value), ...])`` (or a dict literal) of constants."""
    try:
        tree = ast.parse(data.decode("utf-8", "replace"))
    except (SyntaxError, ValueError) as exc:
        return {}, f"{TF_BUILD_INFO} does not parse: {exc}"
    for node in tree.body:
        if not (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "build_info" for t in node.targets)
        ):
            continue
        value = node.value
        if isinstance(value, ast.Call) and len(value.args) == 1:
            value = value.args[0]  # OrderedDict([...])
        try:
            items = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return {}, f"{TF_BUILD_INFO}: build_info is not made of constants"
        try:
            return dict(items), None
        except (TypeError, ValueError):
            return {}, f"{TF_BUILD_INFO}: build_info is not a mapping"
    return {}, f"{TF_BUILD_INFO} assigns no build_info"


def _read_tensorflow(dist: Distribution, reader: Reader) -> FrameworkBuild:
    data = reader(_shipped_path(dist, TF_BUILD_INFO))
    info, problem = (
        parse_tf_build_info(data) if data is not None else ({}, f"{TF_BUILD_INFO} cannot be read")
    )
    cuda = info.get("cuda_version") if info.get("is_cuda_build") is True else None
    if not isinstance(cuda, str) or not cuda:
        cuda = None  # a CPU or ROCm build
    return FrameworkBuild(
        "tensorflow", dist, "tensorflow", dist.version, cuda, TF_BUILD_INFO, problem
    )


ORT_INFO = "onnxruntime/capi/build_and_package_info.py"
ORT_CUDA_PROVIDER = "onnxruntime/capi/libonnxruntime_providers_cuda.so"


def parse_onnxruntime_info(data: bytes) -> tuple[str | None, str | None]:
    """``(cuda_version, problem)`` from build_and_package_info.py (``cuda_version = '13.0'``;
    absent or empty in a CPU build)."""
    try:
        tree = ast.parse(data.decode("utf-8", "replace"))
    except (SyntaxError, ValueError) as exc:
        return None, f"{ORT_INFO} does not parse: {exc}"
    return _assigned_strings(tree, ("cuda_version",)).get("cuda_version") or None, None


def _read_onnxruntime(dist: Distribution, reader: Reader) -> FrameworkBuild:
    data = reader(_shipped_path(dist, ORT_INFO))
    if data is not None:
        cuda, problem = parse_onnxruntime_info(data)
        return FrameworkBuild(
            "onnxruntime", dist, "onnxruntime", dist.version, cuda, ORT_INFO, problem
        )
    # Before 1.21 the wheel has no such file: the CUDA provider's DT_NEEDED tell the major.
    source = f"DT_NEEDED of {ORT_CUDA_PROVIDER}"
    try:
        needed = read_elf(
            Rooted(dist.site.root).host(_shipped_path(dist, ORT_CUDA_PROVIDER))
        ).needed
    except (OSError, ElfFormatError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        problem = f"{ORT_INFO} and {ORT_CUDA_PROVIDER} cannot be read ({why})"
        return FrameworkBuild(
            "onnxruntime", dist, "onnxruntime", dist.version, None, source, problem
        )
    majors = [m for name in needed if (m := soname_major(name)) is not None]
    cuda = str(majors[0]) if majors else None
    problem = None if majors else f"{ORT_CUDA_PROVIDER} needs no CUDA library with a versioned name"
    return FrameworkBuild("onnxruntime", dist, "onnxruntime", dist.version, cuda, source, problem)


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
        name="tensorflow",
        module="tensorflow",
        matches=lambda key: key in _TENSORFLOW,
        read=_read_tensorflow,
        facts=(
            ("version", "tensorflow.__version__"),
            ("cuda", "tensorflow.sysconfig.get_build_info().get('cuda_version')"),
            ("cudnn", "tensorflow.sysconfig.get_build_info().get('cudnn_version')"),
            ("built_with_cuda", "tensorflow.test.is_built_with_cuda()"),
            ("gpus", "len(tensorflow.config.list_physical_devices('GPU'))"),
        ),
    ),
    FrameworkSpec(
        name="jax",
        module="jax",
        matches=lambda key: _JAX_PLUGIN.match(key) is not None,
        read=_read_jax_plugin,
        facts=(
            ("version", "jax.__version__"),
            ("backend", "jax.default_backend()"),
            # The CUDA plugin's build versions (12090: CUDA 12.9); an error without one.
            ("cuda", "jax._src.lib.cuda_versions.cuda_runtime_build_version()"),
            ("cudnn", "jax._src.lib.cuda_versions.cudnn_build_version()"),
        ),
    ),
    FrameworkSpec(
        name="onnxruntime",
        module="onnxruntime",
        matches=lambda key: key == "onnxruntime-gpu",
        read=_read_onnxruntime,
        facts=(
            ("version", "onnxruntime.__version__"),
            ("cuda", "onnxruntime.capi.build_and_package_info.cuda_version"),
            ("device", "onnxruntime.get_device()"),
            ("providers", "', '.join(onnxruntime.get_available_providers())"),
        ),
    ),
    FrameworkSpec(
        name="cupy",
        module="cupy",
        matches=lambda key: parse_cupy_name(key) is not None,
        read=_read_cupy,
        facts=(
            ("version", "cupy.__version__"),
            ("cuda_runtime", "cupy.cuda.runtime.runtimeGetVersion()"),
            ("cuda_available", "cupy.cuda.is_available()"),
        ),
    ),
)


def framework_spec(name: str) -> FrameworkSpec | None:
    return next((spec for spec in FRAMEWORKS if spec.name == name), None)


def detect_frameworks(env: Environment, reader: Reader | None = None) -> list[FrameworkBuild]:
    """Every installed framework distribution, in environment order (READER: its files,
    ``env_reader`` by default)."""
    reader = env_reader(env) if reader is None else reader
    builds = []
    for dist in env.distributions:
        for spec in FRAMEWORKS:
            if spec.matches(dist.key):
                builds.append(spec.read(dist, reader))
                break
    return builds
